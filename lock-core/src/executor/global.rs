//! The default executor: the one direct calls of `#[scheduler_lock]` functions use, process-wide
//! or scoped to one task (a test).

use std::sync::{Arc, RwLock};

use super::LockingTaskExecutor;

// An `Arc` so that a direct locked call costs one reference count, not a clone of every field.
static DEFAULT_EXECUTOR: RwLock<Option<Arc<LockingTaskExecutor>>> = RwLock::new(None);

tokio::task_local! {
    // Set by `with_default_executor`: wins over the process-wide one inside its future.
    static SCOPED_EXECUTOR: Arc<LockingTaskExecutor>;
}

/// Installs the executor that direct calls of `#[scheduler_lock]` functions use.
///
/// `SchedulerBuilder::start` installs its own executor when
/// none is installed yet (or the installed one belongs to a scheduler that has shut down), so
/// this is only needed when a program calls locked functions without a scheduler, or wants
/// another executor than the first scheduler's. A later call replaces the executor.
///
/// Tests that run in parallel should not share one process-wide executor (one test's
/// `lock_at_least_for` would make another's call skip): give each test its own with
/// [`with_default_executor`].
///
/// ```
/// use lock_core::{InMemoryLockProvider, LockingTaskExecutor};
/// lock_core::install_default_executor(LockingTaskExecutor::new(InMemoryLockProvider::new()));
/// assert!(lock_core::default_executor().is_some());
/// ```
pub fn install_default_executor(executor: LockingTaskExecutor) {
    *DEFAULT_EXECUTOR
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(Arc::new(executor));
}

/// Installs a starting scheduler's executor unless a live one is installed: a second
/// scheduler in the process does not take over the direct calls of the first. Returns
/// whether it was installed.
#[doc(hidden)] // For `lock-scheduler`'s `start()`; not part of the API.
pub fn install_scheduler_executor(executor: &LockingTaskExecutor) -> bool {
    let mut slot = DEFAULT_EXECUTOR
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    match slot.as_ref() {
        // A shut-down scheduler's executor starts every body cancelled: replace it.
        Some(current) if !current.shutdown_token().is_cancelled() => {
            tracing::warn!(
                installed = current.instance_id(),
                provider = %current.provider().describe(),
                starting = executor.instance_id(),
                "a default executor is installed already (by another scheduler or \
                 install_default_executor); direct calls of #[scheduler_lock] functions keep \
                 using it. Call lock_core::install_default_executor(scheduler.executor().clone()) \
                 to switch them to this scheduler"
            );
            false
        }
        _ => {
            *slot = Some(Arc::new(executor.clone()));
            true
        }
    }
}

/// The executor direct calls use here: the one [`with_default_executor`] set for the current
/// task, else the one installed by [`install_default_executor`] or a started scheduler.
pub fn default_executor() -> Option<LockingTaskExecutor> {
    default_executor_shared().map(|executor| (*executor).clone())
}

/// Runs `future` with `executor` as the default executor of every direct call of a
/// `#[scheduler_lock]` function made inside it (on this task; tasks it spawns do not inherit
/// it), whatever is installed process-wide.
///
/// Made for tests: each test gets its own locks, so parallel tests never skip each other's
/// calls, and no test depends on which one installed an executor first.
///
/// ```standalone_crate
/// use lock_core::{InMemoryLockProvider, LockingTaskExecutor, scheduler_lock, with_default_executor};
///
/// #[scheduler_lock(name = "rebuild_index", lock_at_least_for = "1h")]
/// async fn rebuild_index() -> Result<(), std::io::Error> {
///     Ok(())
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// // Two tests, each with an executor of its own: lock_at_least_for = 1h in the first does
/// // not make the second one's call skip.
/// for _ in 0..2 {
///     let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
///     with_default_executor(executor, async { rebuild_index().await.unwrap() }).await;
/// }
/// # });
/// ```
pub async fn with_default_executor<F: Future>(
    executor: LockingTaskExecutor,
    future: F,
) -> F::Output {
    SCOPED_EXECUTOR.scope(Arc::new(executor), future).await
}

pub(crate) fn default_executor_shared() -> Option<Arc<LockingTaskExecutor>> {
    if let Ok(scoped) = SCOPED_EXECUTOR.try_with(Arc::clone) {
        return Some(scoped);
    }
    DEFAULT_EXECUTOR
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}
