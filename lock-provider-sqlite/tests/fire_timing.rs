//! When a scheduled body starts, on a real database file: a fire granted ahead of its slot
//! when shutdown begins, a grant that comes back later than the job's `misfire_grace`, and a
//! database clock that steps back by more than `max_slot_lead`.
//!
//! The provider is SQLite behind a thin wrapper that notes every acquire and can delay the
//! answer or move the clock it reports (to play a frozen database or a stepped clock); the
//! locks themselves are SQLite's. SQLite's clock is this host's, so the slots, the acquires,
//! the bodies' starts and the rows are compared on one clock.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Timelike, Utc};
use lock_cluster::{Cluster, ClusterProvider};
use lock_core::{
    AcquireOutcome, JobContext, Lease, LockError, LockProvider, LockRecord, LockRequest, Refusal,
};
use lock_provider_sqlite::SqliteLockProvider;
use lock_scheduler::{Job, RunOutcome, Scheduler, Trigger};

/// One acquire the scheduler sent: for which slot, when it was answered, and whether granted.
#[derive(Clone, Debug)]
struct Asked {
    slot: Option<DateTime<Utc>>,
    answered: DateTime<Utc>,
    granted: bool,
}

/// SQLite, noting every acquire; optionally answering slotted acquires `delay` late (a frozen
/// database that decides when it thaws) and reporting its clock `offset` from the host's (a
/// database clock that stepped).
#[derive(Clone)]
struct Wrapped {
    inner: Arc<SqliteLockProvider>,
    asked: Arc<Mutex<Vec<Asked>>>,
    delay: Duration,
    offset: Arc<Mutex<TimeDelta>>,
}

impl Wrapped {
    fn new(inner: SqliteLockProvider) -> Self {
        Wrapped {
            inner: Arc::new(inner),
            asked: Arc::default(),
            delay: Duration::ZERO,
            offset: Arc::default(),
        }
    }

    fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }

    /// The database's time now, with the offset.
    fn now(&self) -> DateTime<Utc> {
        Utc::now() + *self.offset.lock().unwrap()
    }

    /// Steps the database's clock by `by`.
    fn step(&self, by: TimeDelta) {
        *self.offset.lock().unwrap() += by;
    }
}

impl ClusterProvider for Wrapped {
    fn cluster(&self) -> Option<&dyn Cluster> {
        self.inner.cluster()
    }
}

#[async_trait]
impl LockProvider for Wrapped {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        if request.slot.is_some() && !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        // The slot check on the stepped clock (SQLite's own, on the host's clock, is laxer when
        // the step is back, so it never refuses what this one lets through).
        let now = self.now();
        let outcome = if request.slot_too_far_ahead(now) {
            AcquireOutcome::Refused(Refusal::slot_in_future(now))
        } else {
            self.inner.acquire(request).await?
        };
        self.asked.lock().unwrap().push(Asked {
            slot: request.slot.map(|s| s.instant()),
            answered: Utc::now(),
            granted: matches!(outcome, AcquireOutcome::Acquired(_)),
        });
        Ok(outcome)
    }
    async fn extend(&self, lease: &Lease, at_most: Duration) -> Result<bool, LockError> {
        self.inner.extend(lease, at_most).await
    }
    async fn release(&self, lease: &Lease, at_least: Duration) -> Result<bool, LockError> {
        self.inner.release(lease, at_least).await
    }
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.inner.list_locks().await
    }
    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner.read_lock(name).await
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner.force_unlock(name).await
    }
    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        Ok(self.inner.database_time().await? + *self.offset.lock().unwrap())
    }
    fn describe(&self) -> String {
        format!("{} (wrapped by the test)", self.inner.describe())
    }
}

/// The scheduler's estimate of SQLite's clock errs by half a local round trip: far under a
/// millisecond.
const CLOCK_ERROR: TimeDelta = TimeDelta::milliseconds(1);

/// A body's run: its slot, when it started, and whether `cancelled()` had resolved then.
#[derive(Clone, Debug)]
struct Started {
    slot: DateTime<Utc>,
    at: DateTime<Utc>,
    cancelled: bool,
}

type Runs = Arc<Mutex<Vec<Started>>>;

/// Notes the run of the body calling it.
fn note(runs: &Runs) -> JobContext {
    let ctx = JobContext::current().expect("a scheduled body runs under its lock");
    runs.lock().unwrap().push(Started {
        slot: ctx.scheduled_at().expect("a cron fire has a slot"),
        at: Utc::now(),
        cancelled: ctx.is_cancelled(),
    });
    ctx
}

/// The next whole second at least `margin` from now.
fn next_second_after(margin: Duration) -> DateTime<Utc> {
    let earliest = Utc::now() + TimeDelta::from_std(margin).unwrap();
    let ms = earliest.timestamp_millis();
    DateTime::from_timestamp_millis((ms / 1000 + 1) * 1000).unwrap()
}

async fn sleep_until(at: DateTime<Utc>) {
    if let Ok(left) = (at - Utc::now()).to_std() {
        tokio::time::sleep(left).await;
    }
}

/// A fire granted ahead of its slot, with shutdown beginning before the slot: the body starts
/// at its slot with `cancelled()` already resolved, as any body running when shutdown began,
/// so a body that honours it ends at once, its lease is released and shutdown returns `Ok`
/// (it used to start with a signal nothing resolved, and ran until the shutdown timed out,
/// its lease left held).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_inside_the_acquire_ahead_window_cancels_the_granted_body() {
    let (_dir, sqlite) = common::fresh_provider().await;
    let provider = Wrapped::new(sqlite);
    let runs: Runs = Arc::default();
    let job = Job::new("tick", Trigger::cron("* * * * * *").unwrap(), {
        let runs = runs.clone();
        move || {
            let runs = runs.clone();
            async move {
                note(&runs).cancelled().await;
            }
        }
    });
    // Started 50 ms into a second: the first slot is the next second, and its fire asks at
    // once (the ahead is 2 s and there is no previous slot to halve the way back to), so its
    // grant comes most of a second before the slot.
    sleep_until(next_second_after(Duration::ZERO) + TimeDelta::milliseconds(50)).await;
    let shutdown_timeout = Duration::from_secs(5);
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .acquire_ahead(Duration::from_secs(2))
        .shutdown_timeout(shutdown_timeout)
        .jobs([job])
        .start()
        .await
        .unwrap();
    let granted = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            if let Some(asked) = provider.asked().into_iter().find(|a| a.granted) {
                return asked;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the first fire was granted");
    let slot = granted.slot.expect("a cron fire has a slot");
    assert!(granted.answered < slot, "granted ahead: {granted:?}");
    let began = Utc::now();
    // Inside the window between the grant and the slot (by 300 ms at least, so the body
    // cannot have started before shutdown began).
    assert!(
        slot - began >= TimeDelta::milliseconds(300),
        "the grant came too close to its slot for this test: {granted:?}, now {began}"
    );
    let stopped = scheduler.shutdown().await;
    let returned = Utc::now();
    assert!(
        stopped.is_ok(),
        "a body honouring cancelled() ends at once: {stopped:?}"
    );
    let runs = runs.lock().unwrap().clone();
    let [run] = runs.as_slice() else {
        panic!("one run, the granted slot's: {runs:?}");
    };
    assert_eq!(run.slot, slot);
    assert!(
        run.at >= slot - CLOCK_ERROR,
        "never before its slot: {run:?}"
    );
    assert!(
        run.cancelled,
        "it starts with the shutdown's signal already resolved: {run:?}"
    );
    // Promptly: the wait for the slot (under a second) and a release, far under the 5 s
    // shutdown timeout the old behaviour ran into.
    assert!(
        returned - slot < TimeDelta::seconds(2),
        "shutdown returned {} after the slot",
        returned - slot
    );
    let row = provider.inner.read_lock("tick").await.unwrap().unwrap();
    assert!(!row.held, "the lease was released: {row:?}");
    assert_eq!(row.last_fire, Some(slot), "the slot ran: {row:?}");
    assert_eq!(
        scheduler.jobs()[0].last_outcome,
        Some(RunOutcome::Cancelled)
    );
}

/// A cron trigger with a single slot (yearly): `at`, which must be a whole second, in UTC.
fn only_at(at: DateTime<Utc>) -> Trigger {
    use chrono::Datelike;
    Trigger::cron(&format!(
        "{} {} {} {} {} *",
        at.second(),
        at.minute(),
        at.hour(),
        at.day(),
        at.month()
    ))
    .unwrap()
}

/// A grant that comes back later than `misfire_grace` after its slot (a database frozen for
/// 2 s, the grace 1 s): the lease is given back at once, the body does not run, the slot stays
/// spent, and the fire shows as skipped with no history row (as any missed slot). It used to
/// start the body 2 s late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_later_than_the_misfire_grace_is_given_back() {
    let (_dir, sqlite) = common::fresh_provider().await;
    let provider = Wrapped {
        delay: Duration::from_secs(2),
        ..Wrapped::new(sqlite)
    };
    let runs: Runs = Arc::default();
    let slot = next_second_after(Duration::from_millis(1500));
    let job = Job::new(
        "late",
        only_at(slot).with_misfire_grace(Duration::from_secs(1)),
        {
            let runs = runs.clone();
            move || {
                let runs = runs.clone();
                async move {
                    note(&runs);
                }
            }
        },
    )
    .with_lock(
        lock_core::LockConfiguration::new("late", Duration::from_secs(60), Duration::ZERO).unwrap(),
    );
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .jobs([job])
        .start()
        .await
        .unwrap();
    // The acquire, sent about 100 ms before the slot, is answered 2 s later.
    let answered = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(asked) = provider.asked().into_iter().find(|a| a.slot == Some(slot)) {
                return asked;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the slot was asked for");
    assert!(answered.granted, "{answered:?}");
    assert!(
        answered.answered - slot > TimeDelta::milliseconds(1500),
        "answered past the grace: {answered:?}"
    );
    // The fire's outcome is recorded right after the release (one local SQLite write).
    let outcome = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let status = scheduler.jobs().remove(0);
            if let (false, Some(outcome)) = (status.running, status.last_outcome) {
                return outcome;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the fire ended");
    assert_eq!(outcome, RunOutcome::Skipped, "recorded as missed");
    assert!(
        runs.lock().unwrap().is_empty(),
        "the body did not run: {:?}",
        runs.lock().unwrap()
    );
    let row = provider.inner.read_lock("late").await.unwrap().unwrap();
    assert!(!row.held, "the lease was given back at once: {row:?}");
    assert!(
        row.lock_until - row.locked_at < TimeDelta::seconds(10),
        "released, not left to lock_at_most_for (60 s): {row:?}"
    );
    assert_eq!(row.last_fire, Some(slot), "the slot stays spent: {row:?}");
    let history = provider
        .inner
        .cluster()
        .unwrap()
        .history("late", 10)
        .await
        .unwrap();
    assert!(history.is_empty(), "no run to show: {history:?}");
    scheduler.shutdown().await.unwrap();
}

/// The database's clock steps back by 8 s (more than `max_slot_lead`, 5 s): each instance asks
/// the next slot 8 s before the database reaches it and is refused as too far ahead. That
/// refusal does not spend the slot: the job loop reads the database's clock again at once and
/// fires the slot when the database reaches it, so every slot after the last one run before
/// the step runs exactly once, on the stepped clock. It used to count each refused slot as
/// done until the next clock refresh (30 s) and go on after the last, losing them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_clock_stepping_back_loses_no_slot() {
    let (_dir, sqlite) = common::fresh_provider().await;
    let provider = Wrapped::new(sqlite);
    let runs: Runs = Arc::default();
    let job = Job::new("tick", Trigger::cron("* * * * * *").unwrap(), {
        let runs = runs.clone();
        move || {
            let runs = runs.clone();
            async move {
                note(&runs);
            }
        }
    });
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([job])
        .start()
        .await
        .unwrap();
    // Half way between two slots, a few slots in.
    sleep_until(next_second_after(Duration::from_millis(2500)) + TimeDelta::milliseconds(500))
        .await;
    let step = TimeDelta::seconds(8);
    provider.step(-step);
    let last_before = runs
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.slot)
        .max()
        .expect("slots ran before the step");
    // The stepped clock goes past the last slot run before the step, then 3 more slots (and a
    // half second for the last to start).
    let until = last_before + TimeDelta::milliseconds(3500);
    sleep_until(until + step).await;
    scheduler.shutdown().await.unwrap();
    let runs = runs.lock().unwrap().clone();
    let after: Vec<_> = runs.iter().filter(|r| r.slot > last_before).collect();
    let expected: Vec<_> = (1..=3)
        .map(|s| last_before + TimeDelta::seconds(s))
        .collect();
    let slots: Vec<_> = after.iter().map(|r| r.slot).collect();
    assert_eq!(
        slots,
        expected,
        "each slot after the step ran once, none lost: {runs:?}, asked {:?}",
        provider.asked()
    );
    for run in after {
        // Started at its slot by the stepped clock: 8 s after it by the host's.
        let by_database = run.at - step;
        assert!(
            by_database >= run.slot - CLOCK_ERROR
                && by_database - run.slot < TimeDelta::milliseconds(500),
            "{run:?}"
        );
    }
}
