//! Jobs receive what they need as parameters: `State<T>` registered with
//! `SchedulerBuilder::state`, the fire's `JobContext`, and custom `FromJob` extractors. What a
//! job needs is checked at `start()`, before any job fires.
//!
//! One test function: the registered jobs and the default executor are the binary's, so the
//! refused starts and the running scheduler go in sequence.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::{InMemoryLockProvider, JobContext, LockError};
use lock_scheduler::{
    ExtractError, FromJob, Job, Scheduler, State, StateMap, Trigger, scheduled, scheduler_lock,
};

/// Every body run, by any job of this binary.
static FIRED: AtomicUsize = AtomicUsize::new(0);

/// Stands for a connection pool: what the bodies saw goes in `seen`.
#[derive(Clone)]
struct Pool {
    url: &'static str,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Pool {
    fn record(&self, what: String) {
        FIRED.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push(what);
    }
}

#[derive(Clone)]
struct Tenants(Vec<&'static str>);

/// A custom extractor: the tenant for this fire, from the registered `Tenants`.
struct Tenant(&'static str);

impl FromJob for Tenant {
    fn check(state: &StateMap) -> Result<(), ExtractError> {
        match state.contains::<Tenants>() {
            true => Ok(()),
            false => Err(ExtractError::new(
                "the registered Tenants: add .state(Tenants(..))",
            )),
        }
    }
    fn from_job(ctx: &JobContext, state: &StateMap) -> Result<Self, ExtractError> {
        let tenants = &state.get::<Tenants>().unwrap().0;
        Ok(Tenant(tenants[ctx.fence() as usize % tenants.len()]))
    }
}

#[scheduled(fixed_rate = "100ms")]
#[scheduler_lock(name = "ext-async")]
async fn with_state(State(pool): State<Pool>, ctx: JobContext) {
    pool.record(format!("async {} {}", ctx.lock_name(), pool.url));
}

#[scheduler_lock(name = "ext-sync")]
#[scheduled(fixed_rate = "100ms")]
fn sync_with_state(
    ctx: JobContext,
    pool: State<Pool>,
    Tenant(tenant): Tenant,
) -> Result<(), String> {
    pool.0
        .record(format!("sync {} {} {tenant}", ctx.lock_name(), pool.0.url));
    Ok(())
}

fn pool() -> Pool {
    Pool {
        url: "postgres://db/app",
        seen: Arc::default(),
    }
}

fn message(result: Result<Scheduler, LockError>) -> String {
    match result {
        Ok(_) => panic!("start() should have failed"),
        Err(error) => error.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_get_registered_state_and_context_and_missing_state_refuses_to_start() {
    // Nothing registered: every job and every missing type is named, and nothing starts.
    let refused = message(
        Scheduler::builder()
            .lock_provider(InMemoryLockProvider::new())
            .start()
            .await,
    );
    assert_eq!(
        refused,
        "invalid configuration: \
         job ext-async needs State<Pool>, which was not registered: add .state(pool) to the builder; \
         job ext-sync needs State<Pool>, which was not registered: add .state(pool) to the builder; \
         job ext-sync needs the registered Tenants: add .state(Tenants(..))"
    );

    // One type twice is refused.
    let refused = message(
        Scheduler::builder()
            .lock_provider(InMemoryLockProvider::new())
            .state(pool())
            .state(pool())
            .state(Tenants(vec!["acme"]))
            .start()
            .await,
    );
    assert!(
        refused.contains("registered twice with .state(..)"),
        "{refused}"
    );
    assert!(refused.contains("extractors::Pool"), "{refused}");

    // A run-time job is checked the same way.
    let runtime_job = Job::new(
        "ext-runtime",
        Trigger::fixed_rate(Duration::from_millis(100)).unwrap(),
        |State(pool): State<Pool>, ctx: JobContext| async move {
            pool.record(format!("runtime {} {}", ctx.lock_name(), pool.url));
        },
    );
    let refused = message(
        Scheduler::builder()
            .lock_provider(InMemoryLockProvider::new())
            .jobs([runtime_job.clone()])
            .start()
            .await,
    );
    assert_eq!(
        refused,
        "invalid configuration: job ext-runtime needs State<Pool>, which was not registered: add .state(pool) to the builder"
    );

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        FIRED.load(Ordering::SeqCst),
        0,
        "a refused scheduler fired a job"
    );

    // With the state registered, every job runs with it.
    let pool = pool();
    let jobs = lock_scheduler::registered_jobs()
        .unwrap()
        .into_iter()
        .chain([runtime_job]);
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .state(pool.clone())
        .state(Tenants(vec!["acme"]))
        .jobs(jobs)
        .start()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(450)).await;
    scheduler.shutdown().await.unwrap();
    let seen = pool.seen.lock().unwrap().clone();
    for expected in [
        "async ext-async postgres://db/app",
        "sync ext-sync postgres://db/app acme",
        "runtime ext-runtime postgres://db/app",
    ] {
        assert!(
            seen.iter().any(|s| s == expected),
            "{expected:?} not in {seen:?}"
        );
    }
    // The history's housekeeping job (history is on by default) fires hourly: not yet here.
    let jobs = scheduler.jobs();
    for job in jobs
        .iter()
        .filter(|job| job.name != lock_scheduler::HOUSEKEEPING_JOB)
    {
        // Cancelled: a fire granted ahead of its slot as shutdown began runs at its slot with
        // the shutdown's cancelled() resolved, as any body then running.
        assert!(
            matches!(
                job.last_outcome,
                Some(lock_scheduler::RunOutcome::Succeeded | lock_scheduler::RunOutcome::Cancelled)
            ),
            "{job:?}"
        );
    }
}
