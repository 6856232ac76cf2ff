//! The database stops answering, then answers again: what the job loop does meanwhile and
//! after. The in-memory provider behind a switch that fails every acquire while it is off
//! (what a stopped database does to a fire); its clock is this host's, so "database time"
//! here is `Utc::now()`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use lock_cluster::{Cluster, ClusterProvider};
use lock_core::{
    AcquireOutcome, FireKind, InMemoryLockProvider, JobContext, Lease, LockError, LockProvider,
    LockRecord, LockRequest,
};
use lock_scheduler::{Job, MisfirePolicy, Scheduler, Trigger};
use test_support::process::eventually;

/// The in-memory provider whose acquires fail while `down` (its other calls keep working, as
/// with a database that refuses new statements); counts the failed acquires and keeps the
/// time of the first.
#[derive(Default)]
struct Flaky {
    inner: InMemoryLockProvider,
    down: AtomicBool,
    /// The cluster's tables of `inner`, or none.
    with_cluster: bool,
    failed: AtomicUsize,
    first_failure: Mutex<Option<DateTime<Utc>>>,
}

impl Flaky {
    fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }
}

impl ClusterProvider for Flaky {
    fn cluster(&self) -> Option<&dyn Cluster> {
        self.with_cluster.then_some(&self.inner as &dyn Cluster)
    }
}

#[async_trait]
impl LockProvider for Flaky {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        if self.down.load(Ordering::SeqCst) {
            self.failed.fetch_add(1, Ordering::SeqCst);
            self.first_failure
                .lock()
                .unwrap()
                .get_or_insert_with(Utc::now);
            return Err(LockError::provider(
                "acquire",
                &*request.name,
                "flaky in-memory",
                std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused"),
            ));
        }
        self.inner.acquire(request).await
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
        self.inner.database_time().await
    }
    fn describe(&self) -> String {
        "flaky in-memory".into()
    }
}

/// Every run's slot and kind, in order.
type Runs = Arc<Mutex<Vec<(Option<DateTime<Utc>>, FireKind)>>>;

fn recording(name: &str, trigger: Trigger, runs: &Runs) -> Job {
    let runs = runs.clone();
    Job::new(name, trigger, move |ctx: JobContext| {
        let runs = runs.clone();
        async move {
            runs.lock()
                .unwrap()
                .push((ctx.scheduled_at(), ctx.fire_kind()));
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_regular_slot_after_the_database_answers_again_runs() {
    let (_, runs, failed_at, _) = through_an_outage(
        "outage-fire-once",
        Trigger::fixed_rate(Duration::from_secs(1))
            .unwrap()
            .with_misfire(MisfirePolicy::FireOnce)
            .unwrap(),
    )
    .await;
    // The outage's slots, superseded by the regular one (fire_once runs the latest missed).
    let answered = failed_at + TimeDelta::milliseconds(9_500);
    assert!(
        !runs
            .iter()
            .any(|(slot, _)| slot.is_some_and(|s| s > failed_at && s < answered)),
        "nothing ran the slots of the outage: {runs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_catch_up_the_missed_slots_run_in_order_before_the_first_regular_slot() {
    let (trigger, runs, failed_at, first) = through_an_outage(
        "outage-catch-up",
        Trigger::fixed_rate(Duration::from_secs(1))
            .unwrap()
            .with_misfire(MisfirePolicy::CatchUp)
            .unwrap()
            .with_misfire_grace(Duration::from_secs(60))
            .with_misfire_max(100),
    )
    .await;
    // Every slot from the first refused one to the regular one: once each, in order.
    let mut missed = Vec::new();
    let mut at = trigger.next_slot(failed_at).unwrap().instant();
    while at < first {
        missed.push(at);
        at = trigger.next_slot(at).unwrap().instant();
    }
    assert!(missed.len() >= 8, "the outage missed slots: {missed:?}");
    let ran: Vec<DateTime<Utc>> = runs
        .iter()
        .filter_map(|(slot, _)| *slot)
        .filter(|s| *s > failed_at && *s < first)
        .collect();
    assert_eq!(ran, missed, "each missed slot once, oldest first: {runs:?}");
}

/// Runs `trigger` as `job` on a provider whose acquires fail for 9.5 s, then answer again, and
/// asserts that the first regular slot after that ran at its time (as a scheduled fire).
/// Returns the trigger, the runs, when the first acquire failed, and that regular slot.
async fn through_an_outage(
    job: &str,
    trigger: Trigger,
) -> (
    Trigger,
    Vec<(Option<DateTime<Utc>>, FireKind)>,
    DateTime<Utc>,
    DateTime<Utc>,
) {
    let provider = Arc::new(Flaky::default());
    let runs = Runs::default();
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([recording(job, trigger.clone(), &runs)])
        .start()
        .await
        .unwrap();
    eventually(Duration::from_secs(5), "a first run", || async {
        (!runs.lock().unwrap().is_empty()).then_some(())
    })
    .await;

    provider.set_down(true);
    let failed_at = eventually(Duration::from_secs(5), "a failed acquire", || async {
        *provider.first_failure.lock().unwrap()
    })
    .await;
    // 9.5 s after the first failure: the catch-up's retry timer (500 ms doubling to 5 s from
    // that failure) retried at 7.5 s and next retries at 12.5 s, so the database answers again
    // in the middle of its longest pause, a second or more from either retry.
    let back_at = failed_at + TimeDelta::milliseconds(9_500);
    tokio::time::sleep((back_at - Utc::now()).to_std().unwrap_or_default()).await;
    provider.set_down(false);
    let back = Utc::now();
    // The first slot whose acquire goes after the database answers: acquires go at most
    // 100 ms (the default acquire-ahead) before their slot, 100 ms more for scheduling.
    let first = trigger
        .next_slot(back + TimeDelta::milliseconds(200))
        .unwrap()
        .instant();
    // Its body starts at the slot; 1.5 s is its margin (and still before the retry at 12.5 s).
    tokio::time::sleep(
        (first + TimeDelta::milliseconds(1_500) - Utc::now())
            .to_std()
            .unwrap_or_default(),
    )
    .await;
    scheduler.shutdown().await.unwrap();
    let runs = runs.lock().unwrap().clone();
    assert!(
        runs.contains(&(Some(first), FireKind::Scheduled)),
        "the first regular slot after the database answered again ({first}, answered at \
         {back}) ran at its time, not held back by the catch-up's retry timer: {runs:?}"
    );
    (trigger, runs, failed_at, first)
}

#[tokio::test]
async fn a_job_that_cannot_fire_for_two_periods_warns_once_and_says_when_it_fires_again() {
    // Current-thread: the captured logs are this thread's.
    let (logs, _guard) = test_support::logs::capture_at(tracing::Level::INFO);
    let provider = Arc::new(Flaky::default());
    let runs = Runs::default();
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([recording(
            "outage-warned",
            Trigger::fixed_rate(Duration::from_millis(500)).unwrap(),
            &runs,
        )])
        .start()
        .await
        .unwrap();
    eventually(Duration::from_secs(5), "a first run", || async {
        (!runs.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    provider.set_down(true);
    // Three seconds: six slots refused, the WARN due after the fourth (more than 1 s, two
    // periods, after the first).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        provider.failed.load(Ordering::SeqCst) >= 5,
        "the slots were tried"
    );
    let warned = |text: &str| {
        text.lines()
            .filter(|line| line.contains("could not fire for more than two periods"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let during = warned(&logs.text());
    assert_eq!(
        during.len(),
        1,
        "one WARN for the outage, not one per slot: {during:?}"
    );
    assert!(
        during[0].contains("WARN") && during[0].contains("outage-warned"),
        "at WARN, naming the job: {}",
        during[0]
    );
    assert!(
        during[0].contains("down_for="),
        "saying how long: {}",
        during[0]
    );

    provider.set_down(false);
    let ran = runs.lock().unwrap().len();
    eventually(Duration::from_secs(5), "a run after the outage", || async {
        (runs.lock().unwrap().len() > ran).then_some(())
    })
    .await;
    scheduler.shutdown().await.unwrap();
    let text = logs.text();
    let again: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("job fires again"))
        .collect();
    assert_eq!(again.len(), 1, "{text}");
    assert!(
        again[0].contains("INFO") && again[0].contains("outage-warned"),
        "{}",
        again[0]
    );
    assert_eq!(warned(&text).len(), 1, "still one WARN: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_trigger_request_survives_a_failed_acquire_and_runs() {
    let provider = Arc::new(Flaky {
        with_cluster: true,
        ..Flaky::default()
    });
    let runs = Runs::default();
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id("outage-manual-a")
        .heartbeat_interval(Duration::from_millis(100))
        .jobs([recording(
            "outage-manual",
            Trigger::cron("0 0 3 * * *").unwrap(),
            &runs,
        )])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    provider.set_down(true);
    let id = store
        .request_trigger("outage-manual", "test")
        .await
        .unwrap();
    eventually(Duration::from_secs(5), "the request claimed", || async {
        let control = store.control().await.unwrap();
        control
            .iter()
            .any(|c| c.id == id && c.claimed_by.as_deref() == Some("outage-manual-a"))
            .then_some(())
    })
    .await;
    eventually(Duration::from_secs(5), "its fire refused", || async {
        (provider.failed.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    provider.set_down(false);
    // The run is asked again (250 ms, then doubling): well within the wait.
    eventually(Duration::from_secs(10), "the requested run", || async {
        runs.lock()
            .unwrap()
            .contains(&(None, FireKind::Manual))
            .then_some(())
    })
    .await;
    scheduler.shutdown().await.unwrap();
    assert_eq!(*runs.lock().unwrap(), [(None, FireKind::Manual)], "once");
}
