//! Operating a cluster on the in-memory provider: run history, pause and resume, trigger
//! requests claimed by one instance, the registry's view, housekeeping, and a provider
//! without operations tables. The same scheduler code runs on the SQL providers (their
//! multi-process tests are in `lock-cli/tests/operations.rs`).

use lock_cluster::ClusterProvider;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_cluster::{ClusterOptions, ClusterView, RegistryRow, RunState};
use lock_core::{
    AcquireOutcome, FireKind, InMemoryLockProvider, JobContext, Lease, LockError, LockProvider,
    LockRecord, LockRequest,
};
use lock_scheduler::{Job, RunOutcome, Scheduler, Trigger};
use test_support::process::eventually;

const WAIT: Duration = Duration::from_secs(10);

fn counting(name: &str, every: Duration, runs: &Arc<AtomicUsize>) -> Job {
    let runs = runs.clone();
    Job::new(name, Trigger::fixed_rate(every).unwrap(), move || {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_records_every_run_with_its_fence_kind_and_outcome() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .jobs([
            Job::new(
                "ok",
                Trigger::fixed_rate(Duration::from_millis(100)).unwrap(),
                || async {},
            ),
            Job::new(
                "fails",
                Trigger::fixed_rate(Duration::from_millis(100)).unwrap(),
                || async { Err::<(), _>("disk full") },
            ),
            Job::new(
                "panics",
                Trigger::fixed_rate(Duration::from_millis(100)).unwrap(),
                || async {
                    if true {
                        panic!("boom");
                    }
                },
            ),
        ])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    for job in ["ok", "fails", "panics"] {
        eventually(WAIT, "two finished runs of each job", || async {
            let runs = store.history(job, 10).await.unwrap();
            (runs.iter().filter(|r| r.ended_at.is_some()).count() >= 2).then_some(())
        })
        .await;
    }
    let stopping = Utc::now();
    scheduler.shutdown().await.unwrap();
    let ok = store.history("ok", 100).await.unwrap();
    assert!(
        ok.windows(2).all(|w| w[0].fence > w[1].fence),
        "newest first, fences increase"
    );
    for run in &ok {
        // A fire granted ahead of its slot as shutdown began starts at its slot with the
        // shutdown's cancelled() resolved, as any body then running (the in-memory store's
        // clock is this host's, read through its monotonic clock: 50 ms for the two to differ).
        if run.outcome == RunState::Cancelled {
            assert!(
                run.started_at >= stopping - chrono::TimeDelta::milliseconds(50),
                "cancelled before shutdown began ({stopping}): {run:?}"
            );
        } else {
            assert_eq!(run.outcome, RunState::Succeeded, "{run:?}");
        }
        assert_eq!(run.fire_kind, FireKind::Scheduled);
        assert!(run.slot.is_some());
        assert!(run.ended_at.unwrap() >= run.started_at);
        assert_eq!(run.instance_id, scheduler.executor().instance_id());
    }
    // A run that returned its error after shutdown asked it to stop (granted ahead of its slot
    // as shutdown began) is recorded cancelled, its error kept; every other one failed.
    let fails = store.history("fails", 100).await.unwrap();
    for run in &fails {
        assert_eq!(run.error.as_deref(), Some("disk full"), "{run:?}");
        match run.outcome {
            RunState::Failed => assert!(!run.cancel_requested, "{run:?}"),
            RunState::Cancelled => assert!(
                run.cancel_requested
                    && run.started_at >= stopping - chrono::TimeDelta::milliseconds(50),
                "cancelled before shutdown began ({stopping}): {run:?}"
            ),
            _ => panic!("a failing body recorded as neither failed nor cancelled: {run:?}"),
        }
    }
    assert!(
        fails.iter().any(|run| run.outcome == RunState::Failed),
        "{fails:?}"
    );
    let panics = store.history("panics", 1).await.unwrap();
    assert_eq!(panics[0].outcome, RunState::Panicked);
    assert_eq!(panics[0].error.as_deref(), Some("boom"));
    // The housekeeping job is a locked job of its own, listed with the others.
    assert!(
        scheduler
            .jobs()
            .iter()
            .any(|j| j.name == lock_scheduler::HOUSEKEEPING_JOB)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_refuses_fires_from_the_next_heartbeat_until_resumed() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .heartbeat_interval(Duration::from_millis(100))
        .jobs([counting("tick", Duration::from_millis(100), &runs)])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    eventually(WAIT, "a first run", || async {
        (runs.load(Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    assert!(store.pause("tick", "test").await.unwrap());
    eventually(WAIT, "a fire refused as paused", || async {
        (scheduler.jobs()[0].last_outcome == Some(RunOutcome::Paused)).then_some(())
    })
    .await;
    let paused_at = runs.load(Ordering::SeqCst);
    // Five more slots pass: none runs.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(runs.load(Ordering::SeqCst), paused_at, "a paused job ran");
    // A manual run is an operator's explicit request: it runs even while paused.
    assert_eq!(
        scheduler.trigger("tick").await.unwrap(),
        RunOutcome::Succeeded
    );
    assert!(store.resume("tick").await.unwrap());
    eventually(WAIT, "runs again after resume", || async {
        (runs.load(Ordering::SeqCst) > paused_at + 2).then_some(())
    })
    .await;
    scheduler.shutdown().await.unwrap();
}

/// A job paused cluster-wide before an instance starts does not fire once at its start: the
/// pauses are read before the job loops begin, not left to the first heartbeat (whose answer
/// can come after the first fire of a short period).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_paused_before_start_never_fires() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let store = provider.cluster().unwrap();
    assert!(store.pause("tick", "test").await.unwrap());
    let runs = Arc::new(AtomicUsize::new(0));
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .heartbeat_interval(Duration::from_secs(60))
        .jobs([counting("tick", Duration::from_millis(50), &runs)])
        .start()
        .await
        .unwrap();
    eventually(WAIT, "a fire refused as paused", || async {
        (scheduler.jobs()[0].last_outcome == Some(RunOutcome::Paused)).then_some(())
    })
    .await;
    // Several more slots pass, the first fire at the start among them: none runs.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "a job paused before start ran"
    );
    scheduler.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_request_runs_once_on_one_instance_as_a_manual_fire() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let kinds = Arc::new(std::sync::Mutex::new(Vec::new()));
    let start = |id: &'static str| {
        let kinds = kinds.clone();
        let job = Job::new(
            "nightly",
            Trigger::cron("0 0 3 * * *").unwrap(),
            move |ctx: JobContext| {
                let kinds = kinds.clone();
                async move {
                    kinds
                        .lock()
                        .unwrap()
                        .push((ctx.fire_kind(), ctx.instance_id().to_owned()));
                }
            },
        );
        Scheduler::builder()
            .lock_provider(provider.clone())
            .instance_id(id)
            .history(Duration::from_secs(3600))
            .heartbeat_interval(Duration::from_millis(100))
            .jobs([job])
            .start()
    };
    let a = start("instance-a").await.unwrap();
    let b = start("instance-b").await.unwrap();
    let store = provider.cluster().unwrap();
    let id = store.request_trigger("nightly", "test").await.unwrap();
    let runs = eventually(WAIT, "the requested run", || async {
        let runs = store.history("nightly", 10).await.unwrap();
        runs.first()
            .is_some_and(|r| r.ended_at.is_some())
            .then_some(runs)
    })
    .await;
    // Ten more heartbeats of both instances: still exactly one run.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(store.history("nightly", 10).await.unwrap().len(), 1);
    assert_eq!(runs[0].fire_kind, FireKind::Manual);
    let control = store.control().await.unwrap();
    let claimed = control.iter().find(|c| c.id == id).unwrap();
    assert_eq!(
        claimed.claimed_by.as_deref(),
        Some(runs[0].instance_id.as_str())
    );
    assert_eq!(
        *kinds.lock().unwrap(),
        [(FireKind::Manual, runs[0].instance_id.clone())]
    );
    // The registry shows both instances alive, running the job, with its next fire.
    let view = ClusterView::read(provider.as_ref(), &ClusterOptions::default())
        .await
        .unwrap();
    assert_eq!(view.instances.len(), 2);
    assert!(view.instances.iter().all(|i| i.alive));
    let nightly = view.jobs.iter().find(|j| j.name == "nightly").unwrap();
    assert_eq!(nightly.live_instances, ["instance-a", "instance-b"]);
    assert!(nightly.next_fire.unwrap() > view.database_now);
    assert!(!nightly.missed);
    assert_eq!(
        nightly.last_run.as_ref().unwrap().outcome,
        RunState::Succeeded
    );
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    // Stopped instances count as gone after five heartbeat intervals.
    eventually(WAIT, "both instances gone", || async {
        let view = ClusterView::read(provider.as_ref(), &ClusterOptions::default())
            .await
            .unwrap();
        view.instances.iter().all(|i| !i.alive).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn housekeeping_deletes_history_older_than_the_retention() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let retention = Duration::from_secs(1);
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(retention)
        .jobs([counting("tick", Duration::from_millis(100), &runs)])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    // An incident of the alert rules resolved now ages out with the runs; an open one stays.
    assert!(
        store
            .open_incident("missed_slot/tick", "late")
            .await
            .unwrap()
    );
    assert!(store.resolve_incident("missed_slot/tick").await.unwrap());
    assert!(
        store
            .open_incident("instance_gone/a", "gone")
            .await
            .unwrap()
    );
    // Runs for 3 s (30 rows written) while housekeeping (every second) keeps about the last
    // second's: the oldest row left is at most the retention plus one housekeeping period
    // (and a run's time) old.
    eventually(WAIT, "three seconds of runs", || async {
        (runs.load(Ordering::SeqCst) >= 30).then_some(())
    })
    .await;
    let oldest = eventually(WAIT, "old rows deleted", || async {
        let now = provider.database_time().await.unwrap();
        let rows = store.history("tick", 1000).await.unwrap();
        let oldest: DateTime<Utc> = rows.last()?.started_at;
        (now - oldest < chrono::TimeDelta::milliseconds(2500)).then_some(rows.len())
    })
    .await;
    assert!(oldest < runs.load(Ordering::SeqCst), "rows were deleted");
    let far = provider.database_time().await.unwrap() + chrono::TimeDelta::hours(1);
    assert_eq!(
        store
            .delete_expired(lock_cluster::Expired::Incidents, far, 10)
            .await
            .unwrap(),
        0,
        "housekeeping deleted the resolved incident already"
    );
    let open = store.open_incidents().await.unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    let housekeeping = store
        .history(lock_scheduler::HOUSEKEEPING_JOB, 10)
        .await
        .unwrap();
    assert!(
        housekeeping
            .iter()
            .any(|r| r.outcome == RunState::Succeeded)
    );
    scheduler.shutdown().await.unwrap();
}

/// The in-memory provider without its operations tables, like a provider that keeps none.
struct LocksOnly(InMemoryLockProvider);

// No cluster tables: the scheduler runs without them.
impl lock_cluster::ClusterProvider for LocksOnly {}

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
async fn a_provider_without_operations_runs_the_jobs_and_warns_once() {
    let (logs, _guard) = test_support::logs::capture();
    let runs = Arc::new(AtomicUsize::new(0));
    let provider = LocksOnly(InMemoryLockProvider::new());
    let scheduler = Scheduler::builder()
        .lock_provider(provider)
        .history(Duration::from_secs(60))
        .jobs([counting("tick", Duration::from_millis(50), &runs)])
        .start()
        .await
        .unwrap();
    eventually(WAIT, "runs", || async {
        (runs.load(Ordering::SeqCst) >= 3).then_some(())
    })
    .await;
    scheduler.shutdown().await.unwrap();
    let text = logs.text();
    assert_eq!(
        text.matches("this provider keeps no operations tables")
            .count(),
        1,
        "{text}"
    );
    assert!(
        !scheduler
            .jobs()
            .iter()
            .any(|j| j.name == lock_scheduler::HOUSEKEEPING_JOB)
    );
    let view = ClusterView::read(
        &LocksOnly(InMemoryLockProvider::new()),
        &ClusterOptions::default(),
    )
    .await;
    assert!(
        view.unwrap_err()
            .to_string()
            .contains("has no operations tables")
    );
}

#[tokio::test]
async fn sharing_the_jobs_out_needs_the_registry() {
    let error = Scheduler::builder()
        .lock_provider(LocksOnly(InMemoryLockProvider::new()))
        .share_jobs(true)
        .jobs([])
        .start()
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("share_jobs(true) needs the cluster registry"),
        "{error}"
    );
}

/// The registry row of job `name` in `rows`, and the instance's own row's heartbeat.
fn job_row_at(rows: &[RegistryRow], name: &str) -> Option<DateTime<Utc>> {
    rows.iter()
        .find(|r| r.job.as_ref().is_some_and(|j| j.name == name))
        .map(|r| r.heartbeat_at)
}

fn own_row_at(rows: &[RegistryRow]) -> DateTime<Utc> {
    rows.iter()
        .find(|r| r.job.is_none())
        .expect("the instance's row")
        .heartbeat_at
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_writes_a_job_row_only_when_it_changed_and_drops_removed_jobs() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let daily = |name: &str, hour: u32| {
        Job::new(
            name,
            Trigger::cron(&format!("0 0 {hour} * * *")).unwrap(),
            || async {},
        )
    };
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id("beats")
        .heartbeat_interval(Duration::from_millis(50))
        .no_history() // the registry's job rows counted below are these two alone
        .jobs([daily("daily", 3), daily("other", 4)])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    let first = eventually(WAIT, "both jobs registered", || async {
        let rows = store.registry().await.unwrap();
        (rows.iter().filter(|r| r.job.is_some()).count() == 2).then_some(rows)
    })
    .await;
    // Five beats later the instance's row moved and the idle jobs' rows did not (a complete
    // beat, which rewrites them, comes every 60 beats).
    let later = eventually(WAIT, "five more heartbeats", || async {
        let rows = store.registry().await.unwrap();
        (own_row_at(&rows) >= own_row_at(&first) + chrono::TimeDelta::milliseconds(250))
            .then_some(rows)
    })
    .await;
    assert_eq!(job_row_at(&later, "daily"), job_row_at(&first, "daily"));
    assert!(job_row_at(&later, "daily").unwrap() < own_row_at(&later));
    // The view still counts the job as this live instance's.
    let view = ClusterView::read(&*provider, &ClusterOptions::default())
        .await
        .unwrap();
    let job = view.jobs.iter().find(|j| j.name == "daily").unwrap();
    assert_eq!(job.live_instances, ["beats"]);
    assert!(job.next_fire.is_some());
    assert_eq!(view.instances[0].jobs, ["daily", "other"]);
    // A removed job's row goes at the next heartbeat (a complete one); the other stays.
    scheduler.remove_job("other").await.unwrap();
    let rows = eventually(WAIT, "the removed job's row deleted", || async {
        let rows = store.registry().await.unwrap();
        job_row_at(&rows, "other").is_none().then_some(rows)
    })
    .await;
    assert!(job_row_at(&rows, "daily").is_some());
    scheduler.shutdown().await.unwrap();
}

/// A job due every second moves its next fire at every fire; its row is not rewritten for
/// that until the registered fire is 10 s old (4 instances x 10,000 such jobs rewrote 40,000
/// rows a second), and the view shows the fire after a registered one that ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_whose_next_fire_ran_is_rewritten_only_once_it_is_ten_seconds_old() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id("moving")
        .heartbeat_interval(Duration::from_millis(500)) // a complete beat every 30 s
        .no_history()
        .jobs([Job::new(
            "every-second",
            Trigger::cron("* * * * * *").unwrap(),
            move || {
                let runs = counted.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                }
            },
        )])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    let registered = |rows: &[RegistryRow]| {
        rows.iter()
            .find_map(|r| r.job.as_ref().and_then(|j| j.next_fire))
            .expect("the job's row")
    };
    let first = eventually(WAIT, "the job registered", || async {
        let rows = store.registry().await.unwrap();
        rows.iter().any(|r| r.job.is_some()).then_some(rows)
    })
    .await;
    let first_fire = registered(&first);
    // Three fires later (six beats) the row still holds the first next fire ...
    let before = runs.load(Ordering::SeqCst);
    eventually(WAIT, "three more fires", || async {
        (runs.load(Ordering::SeqCst) >= before + 3).then_some(())
    })
    .await;
    let rows = store.registry().await.unwrap();
    assert_eq!(registered(&rows), first_fire);
    assert_eq!(
        job_row_at(&rows, "every-second"),
        job_row_at(&first, "every-second")
    );
    // ... which the view does not show: it ran, and the fire after it is what comes.
    let view = ClusterView::read(&*provider, &ClusterOptions::default())
        .await
        .unwrap();
    assert!(view.jobs[0].next_fire > Some(first_fire));
    assert!(!view.jobs[0].missed);
    // Once the registered fire is 10 s old, a beat rewrites the row with the current one.
    let rewritten = eventually(Duration::from_secs(15), "the row rewritten", || async {
        let rows = store.registry().await.unwrap();
        (registered(&rows) != first_fire).then_some(rows)
    })
    .await;
    let now = provider.database_time().await.unwrap();
    let moved = registered(&rewritten) - first_fire;
    assert!(
        moved >= chrono::TimeDelta::seconds(10)
            && moved < chrono::TimeDelta::seconds(20)
            && registered(&rewritten) <= now + chrono::TimeDelta::seconds(1),
        "rewritten after {moved} to {}, the database's clock at {now}",
        registered(&rewritten)
    );
    scheduler.shutdown().await.unwrap();
}

/// With an interval of whole seconds, every beat after the first goes at half past a second
/// of the database's clock: cron slots are whole seconds, and a beat there would meet the
/// burst of their acquires at the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_second_heartbeats_go_at_half_past_a_second() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .heartbeat_interval(Duration::from_secs(1))
        .jobs([counting("idle", Duration::from_secs(3600), &runs)])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    let id = scheduler.executor().instance_id().to_owned();
    // Each beat stamps the instance's row with the database's time (the in-memory provider's
    // clock); the row is read every 20 ms, so every beat of these 3.5 s is seen.
    let mut beats: Vec<DateTime<Utc>> = Vec::new();
    let until = tokio::time::Instant::now() + Duration::from_millis(3500);
    while tokio::time::Instant::now() < until {
        let row = store
            .registry()
            .await
            .unwrap()
            .into_iter()
            .find(|r| r.instance.instance_id == id && r.job.is_none());
        if let Some(row) = row
            && beats.last() != Some(&row.heartbeat_at)
        {
            beats.push(row.heartbeat_at);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    scheduler.shutdown().await.unwrap();
    assert!(beats.len() >= 3, "the first beat and two more: {beats:?}");
    // The timer goes at .500 by the clock estimate (exact here: the provider's clock is this
    // host's). 300 ms of margin for a loaded machine's timers; without the phase a beat falls
    // anywhere in the second.
    for beat in &beats[1..] {
        let ms = beat.timestamp_subsec_millis();
        assert!(
            (500..800).contains(&ms),
            "a beat after the first at {beat} ({ms} ms past the second): {beats:?}"
        );
    }
}
