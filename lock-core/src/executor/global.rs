//! The default executor: the one direct calls of `#[scheduler_lock]` functions use.

use std::sync::{Arc, RwLock};

use super::LockingTaskExecutor;

// An `Arc` so that a direct locked call costs one reference count, not a clone of every field.
static DEFAULT_EXECUTOR: RwLock<Option<Arc<LockingTaskExecutor>>> = RwLock::new(None);

/// Installs the executor that direct calls of `#[scheduler_lock]` functions use.
///
/// [`SchedulerBuilder::start`](crate::SchedulerBuilder::start) installs its own executor, so
/// this is only needed when a program calls locked functions without a scheduler. A later call
/// replaces the executor.
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

/// The executor installed by [`install_default_executor`] or the last started scheduler.
pub fn default_executor() -> Option<LockingTaskExecutor> {
    default_executor_shared().map(|executor| (*executor).clone())
}

pub(crate) fn default_executor_shared() -> Option<Arc<LockingTaskExecutor>> {
    DEFAULT_EXECUTOR
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .clone()
}
