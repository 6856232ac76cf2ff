//! The scheduler against the in-memory provider: once per slot across instances, failure
//! isolation, graceful shutdown.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use lock_cluster::ClusterProvider;
use lock_core::{InMemoryLockProvider, JobContext, JobError, LockConfiguration, LockProvider};
use lock_scheduler::{Job, RunOutcome, Scheduler, Trigger};

#[derive(Debug, Clone)]
struct Run {
    slot: DateTime<Utc>,
    fence: u64,
    instance: String,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_schedulers_run_every_slot_exactly_once() {
    let provider: Arc<dyn ClusterProvider> = Arc::new(InMemoryLockProvider::new());
    let runs = Arc::new(Mutex::new(Vec::<Run>::new()));
    let mut schedulers = Vec::new();
    for i in 0..3 {
        let runs = runs.clone();
        let job = Job::new(
            "every-second",
            Trigger::cron("* * * * * *").unwrap(),
            move || {
                let runs = runs.clone();
                async move {
                    let ctx = JobContext::current().expect("a scheduled body runs under its lock");
                    runs.lock().unwrap().push(Run {
                        slot: ctx.scheduled_at().expect("a cron fire has a slot"),
                        fence: ctx.fence(),
                        instance: ctx.instance_id().to_owned(),
                    });
                }
            },
        );
        let scheduler = Scheduler::builder()
            .lock_provider(provider.clone())
            .instance_id(format!("instance-{i}"))
            .jobs([job])
            .start()
            .await
            .unwrap();
        schedulers.push(scheduler);
    }
    tokio::time::sleep(Duration::from_millis(6_500)).await;
    for scheduler in &schedulers {
        scheduler.shutdown().await.unwrap();
    }
    let mut runs = runs.lock().unwrap().clone();
    runs.sort_by_key(|r| r.slot);
    assert!(
        runs.len() >= 5,
        "expected at least 5 slots in 6.5 s, got {runs:?}"
    );
    for pair in runs.windows(2) {
        assert_eq!(
            (pair[1].slot - pair[0].slot).num_milliseconds(),
            1000,
            "a slot ran twice or was missed: {pair:?}"
        );
        assert!(
            pair[1].fence > pair[0].fence,
            "fences must strictly increase: {pair:?}"
        );
    }
    for run in &runs {
        assert_eq!(
            run.slot.timestamp_subsec_millis(),
            0,
            "cron slots are whole seconds"
        );
        assert!(run.instance.starts_with("instance-"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn panics_and_errors_do_not_stop_the_scheduler() {
    let panics = Arc::new(AtomicUsize::new(0));
    let errors = Arc::new(AtomicUsize::new(0));
    let (p, e) = (panics.clone(), errors.clone());
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([
            Job::new(
                "panics",
                Trigger::fixed_rate(Duration::from_millis(200)).unwrap(),
                move || {
                    let p = p.clone();
                    async move {
                        if p.fetch_add(1, Ordering::SeqCst) < usize::MAX {
                            panic!("boom");
                        }
                    }
                },
            ),
            Job::new(
                "fails",
                Trigger::fixed_rate(Duration::from_millis(200)).unwrap(),
                move || {
                    let e = e.clone();
                    async move {
                        e.fetch_add(1, Ordering::SeqCst);
                        Err::<(), _>("database down")
                    }
                },
            ),
        ])
        .start()
        .await
        .unwrap();
    eventually("three fires of each job", || {
        panics.load(Ordering::SeqCst) >= 3 && errors.load(Ordering::SeqCst) >= 3
    })
    .await;
    let status = scheduler.jobs();
    scheduler.shutdown().await.unwrap();
    assert!(
        panics.load(Ordering::SeqCst) >= 3,
        "a panicking job must keep firing"
    );
    assert!(
        errors.load(Ordering::SeqCst) >= 3,
        "a failing job must keep firing"
    );
    let fails = status.iter().find(|j| j.name == "fails").unwrap();
    assert_eq!(
        fails.last_outcome,
        Some(RunOutcome::Failed(JobError::new("database down")))
    );
    let panicked = status.iter().find(|j| j.name == "panics").unwrap();
    assert_eq!(
        panicked.last_outcome,
        Some(RunOutcome::Panicked("boom".into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_body_releases_its_lease() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([Job::new(
            "panics-once",
            Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
            || async {
                if std::hint::black_box(true) {
                    panic!("boom")
                }
            },
        )])
        .start()
        .await
        .unwrap();
    // The status records the outcome after the release: wait for it, not for a guessed time
    // (a loaded CI machine took longer than 300 ms to get there).
    eventually("the first fire to finish", || {
        scheduler.jobs()[0].last_outcome.is_some()
    })
    .await;
    assert_eq!(
        scheduler.jobs()[0].last_outcome,
        Some(RunOutcome::Panicked("boom".into()))
    );
    let locks = provider.list_locks().await.unwrap();
    assert_eq!(locks.len(), 1);
    assert!(
        !locks[0].held,
        "the lease of a panicked body must be released: {locks:?}"
    );
    scheduler.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cancels_running_bodies_and_releases_leases() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let saw_cancel = Arc::new(AtomicUsize::new(0));
    let seen = saw_cancel.clone();
    let config =
        LockConfiguration::new("long-job", Duration::from_secs(600), Duration::ZERO).unwrap();
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .shutdown_timeout(Duration::from_secs(5))
        .jobs([Job::new(
            "long-job",
            Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
            move || {
                let seen = seen.clone();
                async move {
                    let ctx = JobContext::current().unwrap();
                    tokio::select! {
                        _ = ctx.cancelled() => { seen.fetch_add(1, Ordering::SeqCst); }
                        _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                    }
                }
            },
        )
        .with_lock(config)])
        .start()
        .await
        .unwrap();
    eventually("the body to start", || scheduler.jobs()[0].running).await;
    assert!(
        provider.list_locks().await.unwrap()[0].held,
        "the job should hold its lock while running"
    );
    let began = std::time::Instant::now();
    scheduler.run_until(async {}).await.unwrap();
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "shutdown should not wait for the timeout"
    );
    assert_eq!(
        saw_cancel.load(Ordering::SeqCst),
        1,
        "cancelled() must resolve at shutdown"
    );
    assert!(
        !provider.list_locks().await.unwrap()[0].held,
        "shutdown must release the lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_jobs_run_on_the_blocking_pool_with_context() {
    let fences = Arc::new(Mutex::new(Vec::new()));
    let f = fences.clone();
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([Job::blocking(
            "sync-job",
            Trigger::fixed_rate(Duration::from_millis(100)).unwrap(),
            move || {
                std::thread::sleep(Duration::from_millis(5));
                f.lock().unwrap().push(
                    JobContext::current()
                        .expect("context in a blocking body")
                        .fence(),
                );
            },
        )])
        .start()
        .await
        .unwrap();
    eventually("three fires", || fences.lock().unwrap().len() >= 3).await;
    scheduler.shutdown().await.unwrap();
    let fences = fences.lock().unwrap().clone();
    assert!(fences.len() >= 3, "{fences:?}");
    assert!(fences.windows(2).all(|w| w[1] > w[0]), "{fences:?}");
}

#[tokio::test]
async fn invalid_configuration_fails_at_start() {
    let err = Scheduler::builder().start().await.unwrap_err();
    assert!(err.to_string().contains("lock_provider"), "{err}");

    let long = "j".repeat(65);
    let err = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([Job::new(
            long.as_str(),
            Trigger::fixed_rate(Duration::from_secs(1)).unwrap(),
            || async {},
        )])
        .start()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains(&long) && err.to_string().contains("64 bytes"),
        "{err}"
    );

    let twice = || {
        Job::new(
            "same",
            Trigger::fixed_rate(Duration::from_secs(1)).unwrap(),
            || async {},
        )
    };
    let err = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([twice(), twice()])
        .start()
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("two jobs are named `same`"),
        "{err}"
    );

    let err = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .instance_id("")
        .start()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("instance id"), "{err}");
}

#[tokio::test]
async fn two_jobs_under_one_lock_name_are_refused_at_start_naming_both() {
    let at_most = Duration::from_secs(60);
    let shared = LockConfiguration::new("reports", at_most, Duration::ZERO).unwrap();
    let fired = Arc::new(AtomicUsize::new(0));
    let job = |name: &str| {
        let fired = fired.clone();
        Job::new(
            name,
            Trigger::fixed_rate(Duration::from_millis(50)).unwrap(),
            move || {
                fired.fetch_add(1, Ordering::SeqCst);
                async {}
            },
        )
        .with_lock(shared.clone())
    };
    let error = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([job("daily-report"), job("weekly-report")])
        .start()
        .await
        .expect_err("two jobs share the lock `reports`");
    let message = error.to_string();
    assert!(
        message.contains("jobs `daily-report` and `weekly-report` are both locked under `reports`"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(fired.load(Ordering::SeqCst), 0, "a refused scheduler fired");
}

/// Waits until `done` holds, checking every 10 ms, for at most 20 s: a loaded CI machine may be
/// slow to get there, but a scheduler that never does fails with `what`.
async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let reached = tokio::time::timeout(Duration::from_secs(20), async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(reached.is_ok(), "waited 20 s for {what}");
}

/// A job name with a control or bidi character, NUL or whitespace at its ends is refused by
/// `start()` and `add_job`, also when its lock has a safe name of its own, and the message
/// shows it escaped.
#[tokio::test]
async fn unsafe_job_names_are_refused_at_start_and_by_add_job() {
    let every_second = || Trigger::fixed_rate(Duration::from_secs(1)).unwrap();
    let safe_lock =
        || LockConfiguration::new("safe_lock", Duration::from_secs(60), Duration::ZERO).unwrap();
    for (name, why) in [
        ("nl\nbilling  free", "U+000A at byte 2"),
        ("\u{1b}[2J", "U+001B at byte 0"),
        ("\u{202e}x", "U+202E at byte 0"),
        ("a\0b", "U+0000 at byte 1"),
        ("   ", "only whitespace"),
        (" x", "start with whitespace"),
    ] {
        let err = Scheduler::builder()
            .lock_provider(InMemoryLockProvider::new())
            .jobs([Job::new(name, every_second(), || async {}).with_lock(safe_lock())])
            .start()
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("invalid job name") && err.contains(why),
            "{err}"
        );
        assert!(
            !err.chars()
                .any(|c| c.is_control() || lock_trigger::is_bidi_control(c)),
            "the message carries the raw name: {err:?}"
        );
        // The job's own name as its lock name: refused all the same.
        let err = Scheduler::builder()
            .lock_provider(InMemoryLockProvider::new())
            .jobs([Job::new(name, every_second(), || async {})])
            .start()
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains(why), "{err}");
    }
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([Job::new("fine", every_second(), || async {})])
        .start()
        .await
        .unwrap();
    let err = scheduler
        .add_job(Job::new("late\r\n", every_second(), || async {}).with_lock(safe_lock()))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("U+000D at byte 4"), "{err}");
    scheduler.shutdown().await.unwrap();
}
