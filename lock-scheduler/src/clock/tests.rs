//! The estimator driven by a fake transport on tokio's paused clock: every delay and every
//! clock is made up, so the documented bounds can be checked exactly.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ClockSource, DatabaseClock, WallClock};
use lock_core::LockError;

/// A database whose clock is `base + (monotonic elapsed) + step`, behind a link whose delays
/// out and back are taken in turn from `delays`.
struct FakeDatabase {
    started: Instant,
    base: DateTime<Utc>,
    state: Mutex<FakeState>,
}

struct FakeState {
    step: TimeDelta,
    delays: Vec<(Duration, Duration)>,
    next: usize,
}

impl FakeDatabase {
    fn new(delays: &[(u64, u64)]) -> Arc<Self> {
        Arc::new(FakeDatabase {
            started: Instant::now(),
            base: Utc.with_ymd_and_hms(2026, 11, 30, 12, 0, 0).unwrap(),
            state: Mutex::new(FakeState {
                step: TimeDelta::zero(),
                delays: delays
                    .iter()
                    .map(|&(out, back)| (Duration::from_micros(out), Duration::from_micros(back)))
                    .collect(),
                next: 0,
            }),
        })
    }

    /// The database's true time at `at`.
    fn time_at(&self, at: Instant) -> DateTime<Utc> {
        let step = self.state.lock().unwrap().step;
        self.base + TimeDelta::from_std(at - self.started).unwrap() + step
    }

    fn step(&self, by: TimeDelta) {
        self.state.lock().unwrap().step += by;
    }

    fn set_delays(&self, delays: &[(u64, u64)]) {
        let mut state = self.state.lock().unwrap();
        state.delays = delays
            .iter()
            .map(|&(out, back)| (Duration::from_micros(out), Duration::from_micros(back)))
            .collect();
        state.next = 0;
    }
}

struct Transport(Arc<FakeDatabase>);

#[async_trait]
impl ClockSource for Transport {
    async fn read(&self) -> Result<DateTime<Utc>, LockError> {
        let (out, back) = {
            let mut state = self.0.state.lock().unwrap();
            let delay = state.delays[state.next % state.delays.len()];
            state.next += 1;
            delay
        };
        tokio::time::sleep(out).await;
        let read = self.0.time_at(Instant::now());
        tokio::time::sleep(back).await;
        Ok(read)
    }
    fn describe(&self) -> String {
        "fake database".into()
    }
}

/// A host wall clock `skew` away from the fake database's, steppable.
fn wall(db: &Arc<FakeDatabase>, skew: Arc<Mutex<TimeDelta>>) -> WallClock {
    let db = db.clone();
    Arc::new(move || {
        db.time_at(Instant::now()) - db.state.lock().unwrap().step + *skew.lock().unwrap()
    })
}

async fn clock(db: &Arc<FakeDatabase>, skew: TimeDelta) -> (DatabaseClock, Arc<Mutex<TimeDelta>>) {
    let skew = Arc::new(Mutex::new(skew));
    let clock = DatabaseClock::measure(
        Box::new(Transport(db.clone())),
        wall(db, skew.clone()),
        Duration::from_secs(1),
        "test-instance".into(),
    )
    .await
    .unwrap();
    (clock, skew)
}

/// Whether `d` is `micros` (plus at most `slack` microseconds of drift allowance).
fn within(d: Duration, micros: u64, slack: u64) -> bool {
    d >= Duration::from_micros(micros) && d <= Duration::from_micros(micros + slack)
}

fn error(clock: &DatabaseClock, db: &FakeDatabase) -> Duration {
    (clock.now() - db.time_at(Instant::now()))
        .abs()
        .to_std()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn asymmetric_delays_stay_within_half_the_shortest_round_trip() {
    // Out and back in microseconds: the quietest round trip is 4 ms, split 3 + 1.
    let db = FakeDatabase::new(&[
        (8_000, 2_000),
        (1_000, 30_000),
        (15_000, 15_000),
        (3_000, 1_000),
        (9_000, 9_000),
    ]);
    let (clock, _) = clock(&db, TimeDelta::zero()).await;
    // Documented bound: half the shortest round trip (plus drift, nothing yet).
    // (The estimate has aged by the fifth round trip, 18 ms: 1.8 us of drift allowance.)
    let bound = clock.error_bound();
    assert!(within(bound, 2_000, 10), "bound {bound:?}");
    // The true error of a 3 + 1 split is 1 ms; whatever it is, it is inside the bound.
    let err = error(&clock, &db);
    assert!(err <= bound, "error {err:?} beyond the bound {bound:?}");
    assert_eq!(err, Duration::from_millis(1));

    // An hour later the bound has grown by the drift allowance (100 ppm: 360 ms), no more.
    tokio::time::sleep(Duration::from_secs(3600)).await;
    let bound = clock.error_bound();
    assert!(within(bound, 362_000, 10), "bound after an hour {bound:?}");
    assert!(error(&clock, &db) <= clock.error_bound());

    // A refresh with 20 ms round trips: narrower than the hour-old estimate, so it wins.
    db.set_delays(&[(10_000, 10_000)]);
    clock.refresh().await.unwrap();
    let bound = clock.error_bound();
    assert!(
        within(bound, 10_000, 10),
        "bound after a busy refresh {bound:?}"
    );
    assert!(error(&clock, &db) <= clock.error_bound());

    // A quiet estimate is kept over a busier one measured soon after.
    // (tokio's timers count whole milliseconds, so every made-up delay is one.)
    db.set_delays(&[(1_000, 1_000)]);
    clock.refresh().await.unwrap();
    db.set_delays(&[(40_000, 2_000)]);
    clock.refresh().await.unwrap();
    let bound = clock.error_bound();
    assert!(
        within(bound, 1_000, 20),
        "kept the quiet estimate: {bound:?}"
    );
    assert!(error(&clock, &db) <= bound);
}

#[tokio::test(start_paused = true)]
async fn a_database_clock_step_is_picked_up_at_the_next_refresh_and_re_plans_timers() {
    let db = FakeDatabase::new(&[(2_000, 1_000), (1_000, 1_000)]);
    let (clock, _) = clock(&db, TimeDelta::zero()).await;
    let stop = CancellationToken::new();
    let refresh_every = Duration::from_secs(5);
    let refresher = tokio::spawn(clock.clone().refresh_until(refresh_every, stop.clone()));

    // A timer for the database's 60 s from now.
    let slot = db.time_at(Instant::now()) + TimeDelta::seconds(60);
    let sleeper = {
        let (clock, stop) = (clock.clone(), stop.clone());
        tokio::spawn(async move {
            assert!(clock.sleep_until(slot, &stop).await);
            Instant::now()
        })
    };
    // The database's clock is stepped 20 s forward (its NTP corrected it): the slot now comes
    // 20 s sooner by the monotonic clock. Seen at the next refresh, within 5 s.
    tokio::time::sleep(Duration::from_secs(1)).await;
    db.step(TimeDelta::seconds(20));
    tokio::time::sleep(refresh_every).await;
    let bound = clock.error_bound();
    assert!(bound <= Duration::from_millis(2), "bound {bound:?}");
    assert!(error(&clock, &db) <= bound, "after the step's refresh");

    let woke = tokio::time::timeout(Duration::from_secs(120), sleeper)
        .await
        .expect("the timer woke")
        .unwrap();
    let late = db.time_at(woke) - slot;
    assert!(
        late >= -TimeDelta::from_std(bound).unwrap() && late <= TimeDelta::milliseconds(3),
        "the timer fired {late} from the slot by the database's stepped clock"
    );

    // A step backwards: the timer waits for the database to get there again.
    let slot = db.time_at(Instant::now()) + TimeDelta::seconds(30);
    let sleeper = {
        let (clock, stop) = (clock.clone(), stop.clone());
        tokio::spawn(async move {
            assert!(clock.sleep_until(slot, &stop).await);
            Instant::now()
        })
    };
    db.step(TimeDelta::seconds(-40));
    let woke = tokio::time::timeout(Duration::from_secs(120), sleeper)
        .await
        .expect("the timer woke")
        .unwrap();
    let late = db.time_at(woke) - slot;
    assert!(
        late >= -TimeDelta::milliseconds(3) && late <= TimeDelta::milliseconds(3),
        "fired {late} from the slot after a backward step"
    );
    stop.cancel();
    refresher.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_step_of_the_host_wall_clock_changes_nothing_but_the_reported_offset() {
    let db = FakeDatabase::new(&[(1_000, 1_000)]);
    let (clock, skew) = clock(&db, TimeDelta::seconds(600)).await;
    let offset = clock.host_offset();
    assert!(
        (offset - TimeDelta::seconds(600)).abs() <= TimeDelta::milliseconds(1),
        "a host 10 minutes ahead: {offset}"
    );
    let slot = db.time_at(Instant::now()) + TimeDelta::seconds(10);
    let planned = clock.instant_at(slot);

    // The host's clock is set back 15 minutes (an operator fixing it, or NTP waking up).
    *skew.lock().unwrap() = TimeDelta::seconds(-300);
    clock.refresh().await.unwrap();
    assert_eq!(clock.instant_at(slot), planned, "the timer's plan");
    assert!(error(&clock, &db) <= clock.error_bound());
    let offset = clock.host_offset();
    assert!(
        (offset + TimeDelta::seconds(300)).abs() <= TimeDelta::milliseconds(1),
        "the reported offset follows the host's clock: {offset}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_database_that_never_answers_fails_the_measurement() {
    struct Silent;
    #[async_trait]
    impl ClockSource for Silent {
        async fn read(&self) -> Result<DateTime<Utc>, LockError> {
            std::future::pending().await
        }
        fn describe(&self) -> String {
            "silent database".into()
        }
    }
    let error = DatabaseClock::measure(
        Box::new(Silent),
        Arc::new(Utc::now),
        Duration::from_secs(2),
        "test".into(),
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("read the clock failed on silent database"),
        "{error}"
    );
}

/// The in-memory provider, except that its clock cannot be read.
struct NoClock(lock_core::InMemoryLockProvider);

// No cluster tables: the scheduler runs without them.
impl lock_cluster::ClusterProvider for NoClock {}

#[async_trait]
impl lock_core::LockProvider for NoClock {
    async fn acquire(
        &self,
        request: &lock_core::LockRequest,
    ) -> Result<lock_core::AcquireOutcome, LockError> {
        self.0.acquire(request).await
    }
    async fn extend(&self, lease: &lock_core::Lease, at_most: Duration) -> Result<bool, LockError> {
        self.0.extend(lease, at_most).await
    }
    async fn release(
        &self,
        lease: &lock_core::Lease,
        at_least: Duration,
    ) -> Result<bool, LockError> {
        self.0.release(lease, at_least).await
    }
    async fn list_locks(&self) -> Result<Vec<lock_core::LockRecord>, LockError> {
        self.0.list_locks().await
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<lock_core::LockRecord>, LockError> {
        self.0.force_unlock(name).await
    }
    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        Err(LockError::provider(
            "now",
            "",
            self.describe(),
            "connection refused",
        ))
    }
    fn describe(&self) -> String {
        "a database that cannot be reached".into()
    }
}

#[tokio::test]
async fn a_scheduler_does_not_start_by_an_unmeasured_clock() {
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let job_ran = ran.clone();
    let job = crate::Job::new(
        "never",
        crate::Trigger::fixed_rate(Duration::from_millis(10)).unwrap(),
        move || {
            let ran = job_ran.clone();
            async move { ran.store(true, std::sync::atomic::Ordering::SeqCst) }
        },
    );
    let error = crate::Scheduler::builder()
        .lock_provider(NoClock(lock_core::InMemoryLockProvider::new()))
        .operation_timeout(Duration::from_secs(1))
        .jobs([job])
        .start()
        .await
        .expect_err("start() must fail when the database's clock cannot be read");
    assert!(
        error
            .to_string()
            .contains("now failed on a database that cannot be reached"),
        "{error}"
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !ran.load(std::sync::atomic::Ordering::SeqCst),
        "a job fired"
    );
}

#[tokio::test(start_paused = true)]
async fn loops_refused_together_share_one_measurement_that_sees_the_step() {
    let db = FakeDatabase::new(&[(1_000, 1_000)]);
    let (clock, _) = clock(&db, TimeDelta::zero()).await;
    let reads = || db.state.lock().unwrap().next;
    // The database's clock steps back; three job loops are refused at once and each asks for
    // a measurement taken after its refusal.
    db.step(TimeDelta::seconds(-10));
    let refused = Instant::now();
    let before = reads();
    let (a, b, c) = tokio::join!(
        clock.refresh_after(refused),
        clock.refresh_after(refused),
        clock.refresh_after(refused)
    );
    a.and(b).and(c).unwrap();
    assert_eq!(
        reads() - before,
        super::REFRESH_SAMPLES,
        "one measurement for the three"
    );
    assert!(error(&clock, &db) <= clock.error_bound(), "it saw the step");
    // A refusal after that measurement gets one of its own.
    tokio::time::sleep(Duration::from_millis(10)).await;
    clock.refresh_after(Instant::now()).await.unwrap();
    assert_eq!(reads() - before, 2 * super::REFRESH_SAMPLES);
}
