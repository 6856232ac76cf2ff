//! Run limits on the in-memory provider, two schedulers with their own instance ids playing
//! two instances: an instance at `max_concurrent_runs` leaves fires to one with room, and a
//! fire no instance has room for is recorded missed, "every instance busy", once. Also what
//! `start()` refuses.
//!
//! Each instance is kept at its limit by a "hog" job run manually (a manual run waits for a
//! permit, then holds it until shutdown): an async body on one instance, a blocking one on
//! the other, so both kinds of body count against the limit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_cluster::{ClusterProvider, RunState};
use lock_core::{InMemoryLockProvider, JobContext, LockError};
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::process::eventually;

const WAIT: Duration = Duration::from_secs(20);

/// The job whose fires are counted: every 500 ms, noting which instance ran it.
fn work(ran_on: Arc<Mutex<Vec<String>>>) -> Job {
    Job::new(
        "work",
        Trigger::fixed_rate(Duration::from_millis(500)).unwrap(),
        move |ctx: JobContext| {
            let ran_on = ran_on.clone();
            async move {
                ran_on.lock().unwrap().push(ctx.instance_id().to_owned());
                Ok::<(), &str>(())
            }
        },
    )
}

/// A job that, run, holds its permit until shutdown; `started` is set once it runs. Named
/// `hog-<instance>`: each instance's hog has its own lock.
fn hog(name: String, blocking: bool, started: Arc<AtomicBool>) -> Job {
    let trigger = Trigger::fixed_rate(Duration::from_secs(86_400)).unwrap();
    if blocking {
        Job::blocking(name, trigger, move |ctx: JobContext| {
            started.store(true, Ordering::SeqCst);
            while !ctx.is_cancelled() {
                std::thread::sleep(Duration::from_millis(10));
            }
            Ok::<(), &str>(())
        })
    } else {
        Job::new(name, trigger, move |ctx: JobContext| {
            let started = started.clone();
            async move {
                started.store(true, Ordering::SeqCst);
                ctx.cancelled().await;
                Ok::<(), &str>(())
            }
        })
    }
}

/// Starts instance `id`: `work`, and a hog when `busy` (run at once, holding the only permit).
async fn instance(
    provider: &Arc<InMemoryLockProvider>,
    id: &str,
    busy: Option<bool>,
    ran_on: &Arc<Mutex<Vec<String>>>,
) -> Scheduler {
    let started = Arc::new(AtomicBool::new(false));
    let mut jobs = vec![work(ran_on.clone())];
    if let Some(blocking) = busy {
        jobs.push(hog(format!("hog-{id}"), blocking, started.clone()));
    }
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id(id)
        .max_concurrent_runs(1)
        .jobs(jobs)
        .start()
        .await
        .unwrap();
    if busy.is_some() {
        let (handle, name) = (scheduler.clone(), format!("hog-{id}"));
        tokio::spawn(async move { handle.trigger(&name).await });
        eventually(WAIT, "the hog runs", || async {
            started.load(Ordering::SeqCst).then_some(())
        })
        .await;
    }
    scheduler
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_other_instance_at_its_limit_the_one_with_room_runs_every_fire() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let ran_on = Arc::new(Mutex::new(Vec::new()));
    let busy = instance(&provider, "busy", Some(false), &ran_on).await;
    // Runs of `work` before the hog held the permit are not counted.
    ran_on.lock().unwrap().clear();
    let free = instance(&provider, "free", None, &ran_on).await;
    // A slot due before "free" had planned its first fire had no instance with room: it is
    // rightly missed. One period after its start, every slot is planned by it.
    let planned_from = chrono::Utc::now() + chrono::TimeDelta::milliseconds(500);
    let seen = eventually(WAIT, "six runs of work", || async {
        let seen = ran_on.lock().unwrap().clone();
        (seen.len() >= 6).then_some(seen)
    })
    .await;
    busy.shutdown().await.unwrap();
    free.shutdown().await.unwrap();
    assert!(seen.iter().all(|id| id == "free"), "{seen:?}");
    let store = provider.cluster().unwrap();
    let missed = store.history("work", 100).await.unwrap();
    assert!(
        missed
            .iter()
            .filter(|run| run.slot.is_some_and(|slot| slot >= planned_from))
            .all(|run| run.outcome != RunState::Missed),
        "{missed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_instance_at_its_limit_each_fire_is_recorded_missed_once() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let ran_on = Arc::new(Mutex::new(Vec::new()));
    let a = instance(&provider, "a", Some(false), &ran_on).await;
    let b = instance(&provider, "b", Some(true), &ran_on).await;
    ran_on.lock().unwrap().clear();
    let store = provider.cluster().unwrap();
    let missed = eventually(WAIT, "three missed fires", || async {
        let runs = store.history("work", 100).await.unwrap();
        let missed: Vec<_> = runs
            .into_iter()
            .filter(|run| run.outcome == RunState::Missed)
            .collect();
        (missed.len() >= 3).then_some(missed)
    })
    .await;
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();
    assert!(ran_on.lock().unwrap().is_empty(), "no body ran");
    for run in &missed {
        assert_eq!(run.error.as_deref(), Some("every instance busy"));
        assert_eq!(run.fire_kind, lock_core::FireKind::Scheduled);
    }
    let mut slots: Vec<_> = missed.iter().map(|run| run.slot).collect();
    slots.sort();
    let before = slots.len();
    slots.dedup();
    assert_eq!(
        slots.len(),
        before,
        "a slot recorded missed twice: {missed:?}"
    );
}

async fn start_error(builder: lock_scheduler::SchedulerBuilder) -> String {
    match builder.start().await {
        Err(LockError::InvalidConfiguration(message)) => message,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn start_refuses_limits_of_zero_and_groups_no_job_has() {
    let ran_on = Arc::new(Mutex::new(Vec::new()));
    let builder = || {
        Scheduler::builder()
            .lock_provider(InMemoryLockProvider::new())
            .jobs([work(ran_on.clone()).with_group("reports")])
    };
    let message = start_error(builder().max_concurrent_runs(0)).await;
    assert!(message.contains("max_concurrent_runs(0)"), "{message}");
    let message = start_error(builder().group_limit("reports", 0)).await;
    assert!(message.contains("group_limit(\"reports\", 0)"), "{message}");
    let message = start_error(builder().group_limit("report", 2)).await;
    assert!(
        message.contains("\"report\"") && message.contains("`reports`"),
        "names the known groups: {message}"
    );
    let scheduler = builder().group_limit("reports", 1).start().await.unwrap();
    scheduler.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_run_waits_for_room_in_its_group() {
    // Two jobs of group `reports` under group_limit 1; each, run, holds until released.
    let release = Arc::new(tokio::sync::Notify::new());
    let order = Arc::new(Mutex::new(Vec::new()));
    let job = |name: &'static str| {
        let (release, order) = (release.clone(), order.clone());
        Job::new(
            name,
            Trigger::fixed_rate(Duration::from_secs(86_400)).unwrap(),
            move || {
                let (release, order) = (release.clone(), order.clone());
                async move {
                    order.lock().unwrap().push(format!("{name} started"));
                    if name == "first" {
                        release.notified().await;
                    }
                    order.lock().unwrap().push(format!("{name} ended"));
                    Ok::<(), &str>(())
                }
            },
        )
        .with_group("reports")
    };
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .group_limit("reports", 1)
        .jobs([job("first"), job("second")])
        .start()
        .await
        .unwrap();
    let first = tokio::spawn({
        let s = scheduler.clone();
        async move { s.trigger("first").await }
    });
    eventually(WAIT, "the first run", || async {
        (!order.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    let second = tokio::spawn({
        let s = scheduler.clone();
        async move { s.trigger("second").await }
    });
    // The second waits for the first's permit: its start can only follow the first's end.
    tokio::task::yield_now().await;
    release.notify_one();
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    scheduler.shutdown().await.unwrap();
    assert_eq!(
        *order.lock().unwrap(),
        [
            "first started",
            "first ended",
            "second started",
            "second ended"
        ]
    );
}
