//! What the macros' expansions do at run time, against the in-memory provider installed as
//! the default executor: locked calls, reentrancy, skips, synchronous functions, and the
//! registry the scheduler reads.
//!
//! Every test uses its own lock names, because the executor (like a real program's) is shared
//! by all tests of this binary. Locked functions return `()` or `Result<(), E>`, so bodies
//! report what they saw through `Seen`.

use std::sync::Mutex;
use std::time::Duration;

use lock_core::{
    AcquireOutcome, FireSlot, InMemoryLockProvider, JobContext, JobError, LockRequest,
    LockingTaskExecutor,
};
use lock_scheduler::__private::{
    CronSpec, JobBody, ScheduledJob, TriggerKind, TriggerSpec, inventory,
};
use lock_scheduler::{StateMap, scheduled, scheduler_lock};

/// Installs one executor for the whole binary (the first test to run installs it).
fn executor() -> LockingTaskExecutor {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())
            .with_instance_id("macros-runtime-test")
            .expect("valid instance id");
        lock_core::install_default_executor(executor);
    });
    lock_core::default_executor().expect("installed above")
}

/// Takes `name` as another instance would, for `at_most`.
async fn hold_elsewhere(name: &str, at_most: Duration) {
    let request = LockRequest {
        name: name.into(),
        locked_by: "another-instance".into(),
        lock_at_most_for: at_most,
        slot: None,
        max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
        give_up_at: None,
    };
    let outcome = executor().provider().acquire(&request).await.unwrap();
    assert!(
        matches!(outcome, AcquireOutcome::Acquired(_)),
        "{outcome:?}"
    );
}

/// What locked bodies observed: (lock name, fence, scheduled slot in Unix ms).
struct Seen(Mutex<Vec<(String, u64, Option<i64>)>>);

impl Seen {
    const fn new() -> Self {
        Seen(Mutex::new(Vec::new()))
    }

    /// Records the current job context; panics outside a locked body.
    fn record(&self) {
        let ctx = JobContext::current().expect("the body runs under its lock");
        let slot = ctx.scheduled_at().map(|at| at.timestamp_millis());
        self.0
            .lock()
            .unwrap()
            .push((ctx.lock_name().to_owned(), ctx.fence(), slot));
    }

    fn take(&self) -> Vec<(String, u64, Option<i64>)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

// --- direct calls of async functions ---------------------------------------------------------

static DIRECT: Seen = Seen::new();

#[scheduler_lock(name = "rt-direct", lock_at_most_for = "1m")]
async fn direct(step: u32) -> Result<(), String> {
    DIRECT.record();
    if step == 0 {
        return Err("step 0 fails".to_owned());
    }
    Ok(())
}

#[tokio::test]
async fn a_direct_call_runs_the_body_under_the_lock_with_a_growing_fence() {
    executor();
    direct(1).await.unwrap();
    direct(2).await.unwrap();
    // The body's own error comes back unchanged.
    assert_eq!(direct(0).await, Err("step 0 fails".to_owned()));
    assert_eq!(
        DIRECT.take(),
        [
            ("rt-direct".to_owned(), 1, None),
            ("rt-direct".to_owned(), 2, None),
            ("rt-direct".to_owned(), 3, None),
        ]
    );
    assert!(
        JobContext::current().is_none(),
        "the context ends with the body"
    );
}

#[scheduler_lock(name = "rt-named")]
async fn named() {
    let ctx = JobContext::current().unwrap();
    assert_eq!(ctx.lock_name(), "rt-named");
}

#[tokio::test]
async fn the_body_runs_under_the_written_name() {
    executor();
    named().await;
}

// --- reentrancy --------------------------------------------------------------------------------

static REENTRANT: Seen = Seen::new();

#[scheduler_lock(name = "rt-reentrant")]
async fn outer_job() {
    REENTRANT.record();
    inner_step().await;
    inner_sync_step();
}

#[scheduler_lock(name = "rt-reentrant")]
async fn inner_step() {
    REENTRANT.record();
}

#[scheduler_lock(name = "rt-reentrant")]
fn inner_sync_step() {
    REENTRANT.record();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_nested_call_under_the_same_name_is_reentrant() {
    executor();
    outer_job().await;
    // One acquire: the nested calls ran in the outer lease, with its fence.
    let seen = REENTRANT.take();
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert!(
        seen.iter()
            .all(|(name, fence, _)| name == "rt-reentrant" && *fence == 1)
    );
}

// --- skipped calls -------------------------------------------------------------------------

static HELD: Seen = Seen::new();

#[scheduler_lock(name = "rt-held")]
async fn held_elsewhere() -> anyhow::Result<()> {
    HELD.record();
    anyhow::bail!("the body must not run while another instance holds the lock")
}

#[scheduler_lock(name = "rt-held-sync")]
fn held_elsewhere_sync() {
    HELD.record();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_while_another_owner_holds_the_lock_is_skipped() {
    executor();
    hold_elsewhere("rt-held", Duration::from_secs(60)).await;
    hold_elsewhere("rt-held-sync", Duration::from_secs(60)).await;
    // Skipped: `Ok(())` / `()`, and the body did not run.
    held_elsewhere().await.unwrap();
    held_elsewhere_sync();
    assert!(HELD.take().is_empty());
}

static AT_LEAST: Seen = Seen::new();

#[scheduler_lock(
    name = "rt-at-least",
    lock_at_most_for = "1h",
    lock_at_least_for = "1h"
)]
async fn at_least_an_hour() {
    AT_LEAST.record();
}

#[tokio::test]
async fn lock_at_least_for_keeps_the_lock_after_the_body() {
    executor();
    at_least_an_hour().await;
    at_least_an_hour().await; // skipped: the lease lasts an hour after it was taken
    assert_eq!(AT_LEAST.take(), [("rt-at-least".to_owned(), 1, None)]);
}

static PANICKED: Seen = Seen::new();

#[scheduler_lock(name = "rt-panics")]
async fn panics_once(panic: bool) {
    PANICKED.record();
    assert!(!panic, "the body panicked");
}

#[tokio::test]
async fn a_panicking_body_releases_the_lock() {
    executor();
    let panicked = tokio::spawn(panics_once(true)).await.unwrap_err();
    assert!(panicked.is_panic());
    panics_once(false).await;
    let fences: Vec<u64> = PANICKED
        .take()
        .into_iter()
        .map(|(_, fence, _)| fence)
        .collect();
    assert_eq!(fences, [1, 2]);
}

// --- synchronous functions -----------------------------------------------------------------

static SYNC: Seen = Seen::new();

#[scheduler_lock(name = "rt-sync", lock_at_most_for = "1m")]
fn sync_locked(values: &[u32]) -> std::io::Result<()> {
    SYNC.record();
    if values.is_empty() {
        return Err(std::io::Error::other("no values"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_sync_locked_fn_works_from_spawn_blocking_and_from_a_worker_thread() {
    executor();
    tokio::task::spawn_blocking(|| sync_locked(&[1]))
        .await
        .unwrap()
        .unwrap();
    // Directly on a multi-thread runtime's worker: the lock is taken with block_in_place.
    sync_locked(&[2]).unwrap();
    assert_eq!(sync_locked(&[]).unwrap_err().to_string(), "no values");
    let fences: Vec<u64> = SYNC.take().into_iter().map(|(_, fence, _)| fence).collect();
    assert_eq!(fences, [1, 2, 3]);
}

// --- the registry ------------------------------------------------------------------------------

static BILL: Seen = Seen::new();

#[scheduled(cron = "0 5 1 * * *", zone = "Asia/Shanghai")]
#[scheduler_lock(
    name = "rt-sync-bill",
    lock_at_most_for = "30m",
    lock_at_least_for = "10s",
    keep_alive = true
)]
async fn sync_bill() {
    BILL.record();
}

static CLEANUP: Seen = Seen::new();

#[scheduler_lock(name = "rt-cleanup")]
#[scheduled(fixed_delay = "5s", initial_delay = "1s")]
fn cleanup() -> Result<(), String> {
    CLEANUP.record();
    Err("disk full".to_owned())
}

#[scheduled(fixed_rate = "1h 30m", name = "rt-hourly-and-a-half")]
async fn hourly_and_a_half() {}

/// The registered job `name`: a job is registered under its lock's name.
fn registered(name: &str) -> &'static ScheduledJob {
    inventory::iter::<ScheduledJob>
        .into_iter()
        .find(|job| job.name == name)
        .unwrap_or_else(|| panic!("{name} is not registered"))
}

#[test]
fn scheduled_functions_are_registered_with_trigger_and_lock() {
    assert_eq!(inventory::iter::<ScheduledJob>.into_iter().count(), 3);

    let bill = registered("rt-sync-bill");
    assert_eq!(
        bill.trigger,
        TriggerSpec::new(TriggerKind::Cron(CronSpec {
            expr: "0 5 1 * * *",
            zone: Some("Asia/Shanghai")
        }))
    );
    assert_eq!(bill.lock.spec.name, "rt-sync-bill");
    assert_eq!(
        bill.lock.spec.lock_at_most_for,
        Some(Duration::from_millis(30 * 60 * 1000))
    );
    assert_eq!(
        bill.lock.spec.lock_at_least_for,
        Duration::from_millis(10_000)
    );
    assert_eq!(bill.lock.spec.keep_alive, Some(true));
    assert!(matches!(bill.body, JobBody::Async(_)));

    let cleanup = registered("rt-cleanup");
    assert_eq!(
        cleanup.trigger,
        TriggerSpec {
            initial_delay: Duration::from_millis(1_000),
            ..TriggerSpec::new(TriggerKind::FixedDelay {
                delay: Duration::from_millis(5_000)
            })
        }
    );
    assert_eq!(cleanup.lock.spec.name, "rt-cleanup");
    assert!(matches!(cleanup.body, JobBody::Blocking(_)));

    let rate = registered("rt-hourly-and-a-half");
    assert_eq!(
        rate.trigger,
        TriggerSpec::new(TriggerKind::FixedRate {
            period: Duration::from_millis(5_400_000)
        })
    );
    // `#[scheduled]` alone: its own `name`, the executor's at_most, no at_least.
    assert_eq!(rate.lock.spec.name, "rt-hourly-and-a-half");
    assert_eq!(rate.lock.spec.lock_at_most_for, None);
    assert_eq!(rate.lock.spec.lock_at_least_for, Duration::ZERO);
    assert_eq!(rate.lock.spec.keep_alive, None);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_registered_body_runs_under_the_schedulers_lock_with_the_slot() {
    let executor = executor();
    let bill = registered("rt-sync-bill");
    let config = bill.lock.configuration(&executor).unwrap();
    assert!(config.keep_alive());
    assert_eq!(config.lock_at_most_for(), Duration::from_secs(30 * 60));
    let JobBody::Async(body) = bill.body else {
        panic!("sync_bill is async")
    };
    let slot = FireSlot::from_unix_millis(1_780_000_000_000).unwrap();
    let state = std::sync::Arc::new(StateMap::default());
    let outcome = executor
        .execute_in_slot(&config, Some(slot), body(&state))
        .await
        .unwrap();
    assert_eq!(outcome.executed(), Some(Ok(())));
    // The body ran once, in the slot; the scheduler's lock is the function's own lock.
    assert_eq!(
        BILL.take(),
        [("rt-sync-bill".to_owned(), 1, Some(1_780_000_000_000))]
    );
    // The same slot again is refused (it already ran) even though the lock is free.
    let again = executor
        .execute_in_slot(&config, Some(slot), body(&state))
        .await
        .unwrap();
    assert!(!again.is_executed());

    // The synchronous job's body reports its error to the scheduler by its message.
    let cleanup = registered("rt-cleanup");
    let config = cleanup.lock.configuration(&executor).unwrap();
    let JobBody::Blocking(body) = cleanup.body else {
        panic!("cleanup is sync")
    };
    let outcome = executor
        .execute_blocking_in_slot(&config, None, move || body(&state))
        .await
        .unwrap();
    assert_eq!(outcome.executed(), Some(Err(JobError::new("disk full"))));
    assert_eq!(CLEANUP.take(), [("rt-cleanup".to_owned(), 1, None)]);

    // A direct call of a scheduled function takes the same lock: `lock_at_least_for = "10s"`
    // still holds it after the scheduled run, so the call is skipped.
    sync_bill().await;
    assert!(BILL.take().is_empty());
}
