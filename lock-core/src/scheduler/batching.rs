//! The scheduler's switch for batching (see [`LockingTaskExecutor::with_batch_window`]).

use std::time::Duration;

use super::SchedulerBuilder;
#[cfg(doc)]
use crate::LockingTaskExecutor;

impl SchedulerBuilder {
    /// How long the first fire of a batch waits for the others due at the same instant before
    /// their acquires go to the database together (default
    /// [`DEFAULT_BATCH_WINDOW`](crate::DEFAULT_BATCH_WINDOW), 1 ms); `Duration::ZERO` sends
    /// every acquire and release on its own. See
    /// [`LockingTaskExecutor::with_batch_window`].
    ///
    /// ```
    /// # use lock_core::{InMemoryLockProvider, Scheduler};
    /// # use std::time::Duration;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .batch_window(Duration::ZERO)
    ///     .jobs([])
    ///     .start()
    ///     .await?;
    /// assert_eq!(scheduler.executor().batch_window(), Duration::ZERO);
    /// # scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn batch_window(mut self, window: Duration) -> Self {
        self.batch_window = Some(window);
        self
    }
}
