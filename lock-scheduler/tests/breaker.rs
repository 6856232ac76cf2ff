//! The circuit breaker on a three-instance cluster: three `Scheduler`s with their own instance
//! ids sharing one in-memory provider (which keeps the cluster's tables), so the failures are
//! counted across instances from the shared history, and the pauses, resumes and action log
//! are the cluster's.
//!
//! Timing: periods of 200-500 ms and heartbeats of 50 ms, so a pause is seen everywhere well
//! before the next slot; every wait is for a condition with a 20 s deadline (a loaded 2-core
//! machine), and the one settle period (checking that nothing more happens) is several periods.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lock_cluster::{Action, ActionRecord, ClusterProvider, ControlKind, RunState};
use lock_core::{
    AcquireOutcome, InMemoryLockProvider, Lease, LockError, LockProvider, LockRecord, LockRequest,
};
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::process::eventually;

const WAIT: Duration = Duration::from_secs(20);
const BREAKER: &str = "scheduler:circuit-breaker";

fn failing(name: &str, every: Duration, runs: &Arc<AtomicUsize>) -> Job {
    let runs = runs.clone();
    Job::new(name, Trigger::fixed_rate(every).unwrap(), move || {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Err::<(), _>("upstream down")
        }
    })
}

/// Three instances of one service, each with `job()`.
async fn cluster(provider: &Arc<InMemoryLockProvider>, job: impl Fn() -> Job) -> Vec<Scheduler> {
    let mut schedulers = Vec::new();
    for i in 1..=3 {
        schedulers.push(
            Scheduler::builder()
                .lock_provider(provider.clone())
                .instance_id(format!("node-{i}"))
                .heartbeat_interval(Duration::from_millis(50))
                .jobs([job()])
                .start()
                .await
                .unwrap(),
        );
    }
    schedulers
}

async fn stop(schedulers: Vec<Scheduler>) {
    for scheduler in schedulers {
        scheduler.shutdown().await.unwrap();
    }
}

async fn actions(provider: &InMemoryLockProvider, job: &str) -> Vec<ActionRecord> {
    let mut log = provider.cluster().unwrap().actions(job, 100).await.unwrap();
    log.reverse(); // oldest first
    log
}

fn failed_fires(runs: &[lock_cluster::RunRecord]) -> usize {
    runs.iter()
        .filter(|r| r.outcome == RunState::Failed)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_failing_everywhere_is_paused_after_exactly_n_failures_with_one_action() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let every = Duration::from_millis(500);
    let schedulers = cluster(&provider, || {
        failing("charge_cards", every, &runs).with_pause_after_failures(3, None)
    })
    .await;
    let store = provider.cluster().unwrap();
    let pause = eventually(WAIT, "the breaker's pause", || async {
        actions(&provider, "charge_cards").await.into_iter().next()
    })
    .await;
    assert_eq!(pause.action, Action::Pause);
    assert_eq!(pause.requested_by, BREAKER);
    let detail = pause.detail.unwrap();
    assert!(
        detail.starts_with(
            "circuit breaker: 3 failed runs in a row; resume with `lockctl resume charge_cards`"
        ),
        "{detail}"
    );
    // Settle: five periods. A pause is in force everywhere one heartbeat (50 ms) after it was
    // written, long before the next slot, so no fire runs after the third.
    tokio::time::sleep(every * 5).await;
    let history = store.history("charge_cards", 100).await.unwrap();
    assert_eq!(failed_fires(&history), 3, "{history:#?}");
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(actions(&provider, "charge_cards").await.len(), 1);
    let control = store.control().await.unwrap();
    assert!(control.iter().any(|c| c.kind == ControlKind::Pause
        && c.job == "charge_cards"
        && c.requested_by == BREAKER));
    stop(schedulers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_pause_for_the_job_resumes_by_itself_once_and_fails_again() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let schedulers = cluster(&provider, || {
        failing("sync_ledger", Duration::from_millis(300), &runs)
            .with_pause_after_failures(2, Some(Duration::from_secs(1)))
    })
    .await;
    let log = eventually(WAIT, "pause, resume, pause", || async {
        let log = actions(&provider, "sync_ledger").await;
        (log.len() >= 3).then_some(log)
    })
    .await;
    let kinds: Vec<Action> = log.iter().map(|a| a.action).collect();
    assert_eq!(kinds[..3], [Action::Pause, Action::Resume, Action::Pause]);
    assert!(log.iter().all(|a| a.requested_by == BREAKER));
    assert!(
        log[0]
            .detail
            .as_deref()
            .unwrap()
            .contains("2 failed runs in a row; resumes by itself at"),
        "{:?}",
        log[0].detail
    );
    assert_eq!(
        log[1].detail.as_deref(),
        Some("circuit breaker: pause_for 1s elapsed")
    );
    // Paused for its pause_for by the store's clock. The pause action is written a moment after
    // the pause row, and the scheduler's estimate of the database's clock may be a few ms off:
    // 100 ms of margin below, and above a resume comes within a heartbeat or so.
    let paused_for = (log[1].at - log[0].at).to_std().unwrap();
    assert!(paused_for >= Duration::from_millis(900), "{paused_for:?}");
    // Half-open after the resume: the streak was not broken, so the first fire after it
    // that fails pauses the job again.
    assert!(log[2].at > log[1].at);
    stop(schedulers).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_in_between_resets_the_count() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let fires = Arc::new(AtomicUsize::new(0));
    let job = {
        let fires = fires.clone();
        move || {
            let fires = fires.clone();
            Job::new(
                "flaky",
                Trigger::fixed_rate(Duration::from_millis(200)).unwrap(),
                move || {
                    let n = fires.fetch_add(1, Ordering::SeqCst);
                    async move {
                        // Two failures, one success, over and over.
                        if n % 3 == 2 { Ok(()) } else { Err("flaky") }
                    }
                },
            )
            .with_pause_after_failures(3, None)
        }
    };
    let schedulers = cluster(&provider, job).await;
    let store = provider.cluster().unwrap();
    eventually(WAIT, "twelve finished fires", || async {
        let runs = store.history("flaky", 100).await.unwrap();
        (runs.iter().filter(|r| r.ended_at.is_some()).count() >= 12).then_some(())
    })
    .await;
    stop(schedulers).await;
    assert!(actions(&provider, "flaky").await.is_empty());
    assert!(
        store
            .control()
            .await
            .unwrap()
            .iter()
            .all(|c| c.kind != ControlKind::Pause)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_pause_is_left_alone() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let store = provider.cluster().unwrap();
    assert!(store.pause("nightly", "lockctl:alice").await.unwrap());
    let runs = Arc::new(AtomicUsize::new(0));
    let schedulers = cluster(&provider, || {
        failing("nightly", Duration::from_millis(200), &runs)
            .with_pause_after_failures(1, Some(Duration::from_millis(100)))
    })
    .await;
    // Ten times the breaker's pause_for, and many heartbeats.
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop(schedulers).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert!(actions(&provider, "nightly").await.is_empty());
    assert!(
        store
            .control()
            .await
            .unwrap()
            .iter()
            .any(|c| c.kind == ControlKind::Pause
                && c.job == "nightly"
                && c.requested_by == "lockctl:alice")
    );
}

struct LocksOnly(InMemoryLockProvider);

impl ClusterProvider for LocksOnly {}

#[async_trait]
impl LockProvider for LocksOnly {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        self.0.acquire(request).await
    }
    async fn extend(&self, lease: &Lease, at_most: Duration) -> Result<bool, LockError> {
        self.0.extend(lease, at_most).await
    }
    async fn release(&self, lease: &Lease, at_least: Duration) -> Result<bool, LockError> {
        self.0.release(lease, at_least).await
    }
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.0.list_locks().await
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.0.force_unlock(name).await
    }
    fn describe(&self) -> String {
        "locks-only table".into()
    }
}

#[tokio::test]
async fn start_refuses_a_breaker_that_cannot_work() {
    let job = |after, pause_for| {
        Job::new(
            "charge_cards",
            Trigger::fixed_rate(Duration::from_secs(60)).unwrap(),
            || async {},
        )
        .with_pause_after_failures(after, pause_for)
    };
    let error = |result: Result<Scheduler, LockError>| match result {
        Ok(_) => panic!("start() accepted it"),
        Err(error) => error.to_string(),
    };
    for (after, pause_for, says) in [
        (0, None, "pause_after_failures = 0 is out of range"),
        (
            lock_trigger::MAX_PAUSE_AFTER_FAILURES + 1,
            None,
            "is out of range",
        ),
        (3, Some(Duration::ZERO), "pause_for is zero"),
    ] {
        let message = error(
            Scheduler::builder()
                .lock_provider(InMemoryLockProvider::new())
                .jobs([job(after, pause_for)])
                .start()
                .await,
        );
        assert!(
            message.contains("charge_cards") && message.contains(says),
            "{message}"
        );
    }
    let message = error(
        Scheduler::builder()
            .lock_provider(InMemoryLockProvider::new())
            .no_history()
            .jobs([job(3, None)])
            .start()
            .await,
    );
    assert!(
        message.contains("`charge_cards`") && message.contains("no_history"),
        "{message}"
    );
    let message = error(
        Scheduler::builder()
            .lock_provider(LocksOnly(InMemoryLockProvider::new()))
            .jobs([job(3, None)])
            .start()
            .await,
    );
    assert!(
        message.contains("`charge_cards`") && message.contains("ensure_schema"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_are_counted_not_attempts() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let every = Duration::from_millis(500);
    let schedulers = cluster(&provider, || {
        failing("retried", every, &runs)
            .with_retries(1, Duration::from_millis(10))
            .with_pause_after_failures(2, None)
    })
    .await;
    let store = provider.cluster().unwrap();
    let pause = eventually(WAIT, "the breaker's pause", || async {
        actions(&provider, "retried").await.into_iter().next()
    })
    .await;
    assert!(pause.detail.unwrap().contains("2 failed runs in a row"));
    // Settle: four periods (the pause is seen within a 50 ms heartbeat).
    tokio::time::sleep(every * 4).await;
    stop(schedulers).await;
    let history = store.history("retried", 100).await.unwrap();
    // Two fires of two attempts each: four failed rows, two fences.
    assert_eq!(failed_fires(&history), 4, "{history:#?}");
    let mut fences: Vec<u64> = history.iter().map(|r| r.fence).collect();
    fences.dedup();
    assert_eq!(fences.len(), 2, "{history:#?}");
    assert_eq!(actions(&provider, "retried").await.len(), 1);
}
