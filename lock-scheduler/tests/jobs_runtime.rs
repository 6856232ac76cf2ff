//! The programming model around jobs: manual runs, fire kinds, jobs added and removed while
//! the scheduler runs, and direct calls with an executor scoped to one test.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_cluster::ClusterProvider;
use lock_core::{
    FireKind, InMemoryLockProvider, JobContext, JobError, LockConfiguration, LockingTaskExecutor,
    scheduler_lock, with_default_executor,
};
use lock_scheduler::testing::TestFire;
use lock_scheduler::{Job, RunOutcome, Scheduler, State, Trigger};
use test_support::process::eventually;

/// Bounds every wait on the scheduler: far above a 50 ms fire period on a loaded machine.
const WAIT: Duration = Duration::from_secs(20);

type Kinds = Arc<Mutex<Vec<(FireKind, bool)>>>;

fn recording_job(name: &str, trigger: Trigger, kinds: Kinds) -> Job {
    Job::new(name.to_owned(), trigger, move |ctx: JobContext| {
        let kinds = kinds.clone();
        async move {
            kinds
                .lock()
                .unwrap()
                .push((ctx.fire_kind(), ctx.scheduled_at().is_some()));
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trigger_runs_a_job_now_as_a_manual_fire_without_a_slot() {
    let kinds: Kinds = Arc::default();
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([
            // Never fires by itself in this test: every run below is manual.
            recording_job(
                "yearly",
                Trigger::cron("0 0 0 1 1 *").unwrap(),
                kinds.clone(),
            ),
        ])
        .start()
        .await
        .unwrap();
    assert_eq!(
        scheduler.trigger("yearly").await.unwrap(),
        RunOutcome::Succeeded
    );
    assert_eq!(
        scheduler.trigger("yearly").await.unwrap(),
        RunOutcome::Succeeded
    );
    assert_eq!(
        *kinds.lock().unwrap(),
        [(FireKind::Manual, false), (FireKind::Manual, false)]
    );
    let status = &scheduler.jobs()[0];
    assert_eq!(status.last_outcome, Some(RunOutcome::Succeeded));
    assert!(!status.running);
    let error = scheduler.trigger("monthly").await.unwrap_err().to_string();
    assert!(
        error.contains("no job named `monthly`") && error.contains("yearly"),
        "{error}"
    );
    scheduler.shutdown().await.unwrap();
    let error = scheduler.trigger("yearly").await.unwrap_err().to_string();
    assert!(error.contains("shut down"), "{error}");
    assert_eq!(
        kinds.lock().unwrap().len(),
        2,
        "a trigger after shutdown ran the body"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_fire_is_skipped_while_another_instance_holds_the_lock() {
    let provider: Arc<dyn ClusterProvider> = Arc::new(InMemoryLockProvider::new());
    let ran = Arc::new(AtomicUsize::new(0));
    let counted = ran.clone();
    let job = Job::new("report", Trigger::cron("0 0 0 1 1 *").unwrap(), move || {
        let ran = counted.clone();
        async move {
            ran.fetch_add(1, Ordering::SeqCst);
        }
    });
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id("this-one")
        .jobs([job])
        .start()
        .await
        .unwrap();
    let other = LockingTaskExecutor::from_shared(provider)
        .with_instance_id("other")
        .unwrap();
    let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO).unwrap();
    // On a task of its own: inside `other`'s body the call would be reentrant.
    let manual = scheduler.clone();
    let outcome = other
        .execute_with_lock(&config, async move {
            tokio::spawn(async move { manual.trigger("report").await.unwrap() })
                .await
                .unwrap()
        })
        .await
        .unwrap();
    assert_eq!(outcome.executed(), Some(RunOutcome::Skipped));
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "the body ran while another held the lock"
    );
    scheduler.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_fires_are_scheduled_fires() {
    let kinds: Kinds = Arc::default();
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([
            recording_job(
                "rate",
                Trigger::fixed_rate(Duration::from_millis(50)).unwrap(),
                kinds.clone(),
            ),
            recording_job(
                "delay",
                Trigger::fixed_delay(Duration::from_millis(50)).unwrap(),
                kinds.clone(),
            ),
        ])
        .start()
        .await
        .unwrap();
    eventually(WAIT, "fires of both jobs", || {
        let kinds = kinds.lock().unwrap().clone();
        async move {
            (kinds.contains(&(FireKind::Scheduled, true))
                && kinds.contains(&(FireKind::Scheduled, false)))
            .then_some(())
        }
    })
    .await;
    scheduler.shutdown().await.unwrap();
    assert!(
        kinds
            .lock()
            .unwrap()
            .iter()
            .all(|(kind, _)| *kind == FireKind::Scheduled),
        "{:?}",
        kinds.lock().unwrap()
    );
}

/// Counts each tenant's fires.
#[derive(Clone, Default)]
struct Fires(Arc<Mutex<HashMap<String, usize>>>);

impl Fires {
    fn of(&self, tenant: &str) -> usize {
        self.0.lock().unwrap().get(tenant).copied().unwrap_or(0)
    }
}

fn tenant_job(tenant: &str) -> Job {
    let tenant = tenant.to_owned();
    Job::new(
        format!("invoice:{tenant}"),
        Trigger::fixed_rate(Duration::from_millis(50)).unwrap(),
        move |State(fires): State<Fires>| {
            let tenant = tenant.clone();
            async move {
                *fires.0.lock().unwrap().entry(tenant).or_default() += 1;
            }
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_tenant_jobs_are_added_and_removed_while_running() {
    let fires = Fires::default();
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .no_history() // the job list below is the tenants' alone, without housekeeping
        .state(fires.clone())
        .jobs([tenant_job("acme"), tenant_job("globex")])
        .start()
        .await
        .unwrap();
    eventually(WAIT, "acme and globex firing", || {
        let ok = fires.of("acme") >= 2 && fires.of("globex") >= 2;
        async move { ok.then_some(()) }
    })
    .await;

    let last = scheduler.remove_job("invoice:globex").await.unwrap();
    assert_eq!(last.name, "invoice:globex");
    assert!(!last.running, "remove_job returns once the job has stopped");
    let globex_at_removal = fires.of("globex");
    scheduler.add_job(tenant_job("initech")).await.unwrap();

    let names: Vec<String> = scheduler.jobs().into_iter().map(|j| j.name).collect();
    assert_eq!(names, ["invoice:acme", "invoice:initech"]);
    // The added job fires, and acme keeps firing meanwhile: at least 2 periods pass, in which
    // a removed globex would have fired twice.
    let acme_then = fires.of("acme");
    eventually(WAIT, "initech firing and acme firing on", || {
        let ok = fires.of("initech") >= 2 && fires.of("acme") >= acme_then + 2;
        async move { ok.then_some(()) }
    })
    .await;
    assert_eq!(fires.of("globex"), globex_at_removal, "a removed job fired");
    scheduler.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn add_job_checks_what_start_checks() {
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([tenant_job("acme")])
        .start()
        .await
        .expect_err("start refuses a job needing unregistered state");
    assert!(
        scheduler.to_string().contains("State<Fires>"),
        "{scheduler}"
    );

    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .no_history() // counted below: the added jobs alone
        .jobs([])
        .start()
        .await
        .unwrap();
    let error = scheduler
        .add_job(tenant_job("acme"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("job invoice:acme needs State<Fires>, which was not registered"),
        "{error}"
    );
    let every_minute = || Trigger::cron("0 * * * * *").unwrap();
    scheduler
        .add_job(Job::new("a", every_minute(), || async {}))
        .await
        .unwrap();
    let error = scheduler
        .add_job(Job::new("a", every_minute(), || async {}))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("two jobs are named `a`"), "{error}");
    let lock_a = LockConfiguration::new("a", Duration::from_secs(60), Duration::ZERO).unwrap();
    let error = scheduler
        .add_job(Job::new("b", every_minute(), || async {}).with_lock(lock_a))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("jobs `a` and `b` are both locked under `a`"),
        "{error}"
    );
    let far = every_minute().with_initial_delay(Duration::from_secs(2_000 * 365 * 24 * 3600));
    let error = scheduler
        .add_job(Job::new("c", far, || async {}))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("job `c`"), "{error}");
    assert_eq!(scheduler.jobs().len(), 1, "a refused job is not added");
    let error = scheduler.remove_job("b").await.unwrap_err().to_string();
    assert!(error.contains("no job named `b`"), "{error}");

    scheduler.shutdown().await.unwrap();
    let error = scheduler
        .add_job(Job::new("d", every_minute(), || async {}))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("shut down"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remove_job_lets_a_running_body_finish() {
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = Arc::new(Mutex::new(Some(started_tx)));
    let finished = Arc::new(AtomicUsize::new(0));
    let done = finished.clone();
    let job = Job::new(
        "slow",
        Trigger::fixed_rate(Duration::from_millis(10)).unwrap(),
        move |ctx: JobContext| {
            let (started_tx, done) = (started_tx.clone(), done.clone());
            async move {
                if let Some(tx) = started_tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
                assert!(
                    !ctx.is_cancelled(),
                    "removal does not cancel a running body"
                );
                done.fetch_add(1, Ordering::SeqCst);
            }
        },
    );
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([job])
        .start()
        .await
        .unwrap();
    tokio::time::timeout(WAIT, started_rx)
        .await
        .expect("the body starts")
        .unwrap();
    let status = tokio::time::timeout(WAIT, scheduler.remove_job("slow"))
        .await
        .expect("remove_job returns once the body finished")
        .unwrap();
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "remove_job returned before the body finished"
    );
    assert_eq!(status.last_outcome, Some(RunOutcome::Succeeded));
    scheduler.shutdown().await.unwrap();
}

#[derive(Clone)]
struct Seen(Arc<Mutex<Option<(u64, String, FireKind)>>>);

#[tokio::test]
async fn a_job_body_runs_with_a_test_context_and_no_database() {
    let seen = Seen(Arc::default());
    let job = Job::new(
        "sweep",
        Trigger::cron("0 0 * * * *").unwrap(),
        |State(seen): State<Seen>, ctx: JobContext| async move {
            lock_core::assert_locked();
            *seen.0.lock().unwrap() =
                Some((ctx.fence(), ctx.lock_name().to_owned(), ctx.fire_kind()));
            Err::<(), _>("boom")
        },
    );
    let result = TestFire::new()
        .fence(77)
        .manual()
        .state(seen.clone())
        .run_job(&job)
        .await;
    assert_eq!(result, Err(JobError::new("boom")));
    assert_eq!(
        *seen.0.lock().unwrap(),
        Some((77, "sweep".to_owned(), FireKind::Manual))
    );
    let error = TestFire::new().run_job(&job).await.unwrap_err();
    assert!(
        error.message().contains("job sweep needs State<Seen>"),
        "{error}"
    );
}

#[scheduler_lock(name = "jobs_runtime_rebuild", lock_at_least_for = "1h")]
async fn rebuild(calls: Arc<AtomicUsize>) {
    calls.fetch_add(1, Ordering::SeqCst);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_calls_with_scoped_executors_do_not_skip_each_other() {
    let calls = Arc::new(AtomicUsize::new(0));
    let tests = (0..4).map(|_| {
        let calls = calls.clone();
        tokio::spawn(async move {
            let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
            with_default_executor(executor, rebuild(calls)).await;
        })
    });
    for test in tests {
        test.await.unwrap();
    }
    assert_eq!(calls.load(Ordering::SeqCst), 4, "a scoped call was skipped");
    // One shared executor: lock_at_least_for = 1h makes every later call skip, which is what
    // parallel tests sharing the process-wide executor ran into.
    let shared = LockingTaskExecutor::new(InMemoryLockProvider::new());
    for _ in 0..2 {
        with_default_executor(shared.clone(), rebuild(calls.clone())).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_blocking_job_body_sees_its_test_context_on_the_blocking_pool() {
    let job = Job::blocking(
        "export",
        Trigger::cron("0 0 * * * *").unwrap(),
        |ctx: JobContext| -> Result<(), String> {
            let current = JobContext::current().ok_or("no context on the blocking thread")?;
            match (ctx.fence(), current.lock_name(), ctx.scheduled_at()) {
                (5, "export", Some(_)) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    );
    let at = chrono::Utc::now();
    let result = TestFire::new()
        .fence(5)
        .scheduled_at(at)
        .run_job(&job)
        .await;
    assert_eq!(result, Ok(()));
    let error = TestFire::new().fence(6).run_job(&job).await.unwrap_err();
    let message = error.message();
    assert!(message.contains("6") && message.contains("None"), "{error}");
}

/// A body's retry path, tested without a scheduler: `TestFire::attempt` reaches
/// `JobContext::attempt` through `run_job` and `run`.
#[tokio::test]
async fn a_test_fire_sets_the_attempt_its_body_reads() {
    let job = Job::new(
        "import",
        Trigger::cron("0 0 * * * *").unwrap(),
        |ctx: JobContext| async move {
            if ctx.attempt() == 1 {
                Err::<(), _>("first attempt: the feed was not ready")
            } else {
                Ok(())
            }
        },
    );
    assert!(
        TestFire::new().run_job(&job).await.is_err(),
        "attempt 1 by default"
    );
    assert_eq!(TestFire::new().attempt(2).run_job(&job).await, Ok(()));
    let attempt = TestFire::new()
        .attempt(3)
        .run(async { JobContext::current().unwrap().attempt() })
        .await;
    assert_eq!(attempt, 3);
}
