//! The scheduler's settings for bursts: batching (see
//! [`LockingTaskExecutor::with_batch_window`]) and the acquire-ahead.

use std::time::Duration;

use super::SchedulerBuilder;
#[cfg(doc)]
use lock_core::LockingTaskExecutor;

impl SchedulerBuilder {
    /// How long the first fire of a batch waits for the others due at the same instant before
    /// their acquires go to the database together (default
    /// [`DEFAULT_BATCH_WINDOW`](lock_core::DEFAULT_BATCH_WINDOW), 1 ms); `Duration::ZERO` sends
    /// every acquire and release on its own. See
    /// [`LockingTaskExecutor::with_batch_window`].
    ///
    /// ```
    /// # use lock_core::InMemoryLockProvider;
    /// # use lock_scheduler::Scheduler;
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

    /// How long before its slot a cron or fixed-rate fire takes its lock (default
    /// [`DEFAULT_ACQUIRE_AHEAD`], 100 ms; `Duration::ZERO` asks at the slot).
    ///
    /// Deciding a lock takes a round trip, and a thousand jobs due at one instant take tens of
    /// milliseconds more to wake and be decided in their batch. Asked ahead, the lock is
    /// decided by the time the slot comes, and the body starts at the slot (by the
    /// database's clock, as always), not that much later. Quartz calls this its
    /// fire-ahead window.
    ///
    /// - The body never starts before its slot; a fire whose lock is decided late starts at
    ///   once, but never later than its trigger's `misfire_grace` (default one period) after
    ///   the slot: a later grant is given back and the slot is missed.
    /// - `ahead` is a floor: while the database took longer to answer this instance's slotted
    ///   acquires in the last one to two minutes, fires ask that long and half again ahead,
    ///   up to [`MAX_GROWN_AHEAD`](lock_core::MAX_GROWN_AHEAD) (a burst of 10,000 jobs on a
    ///   loaded database is decided in hundreds of milliseconds). Zero asks at the slot and
    ///   does not grow.
    /// - The database still decides the slot: an acquire for a slot more than
    ///   [`max_slot_lead`](Self::max_slot_lead) ahead of its clock is refused, so the ahead is
    ///   capped at half of that (2.5 s by default); for each job at half its
    ///   `lock_at_most_for`, so that a body starts with most of its lease left; and for each
    ///   fire at half the time since the previous slot, so that a fast fixed rate does not ask
    ///   while its previous run still holds the lock.
    /// - A fire refused ahead of its slot because a lease is still held (a previous run that
    ///   ends just before the slot, or its `lock_at_least_for`) asks once more at the slot:
    ///   asking early never loses a slot. A refusal that shows the slot already ran (another
    ///   instance won it ahead) is final.
    /// - The lease starts when it is granted, so `lock_at_most_for` and `lock_at_least_for`
    ///   count from up to this much before the body's start.
    /// - A fire granted before shutdown begins still runs at its slot (the slot is taken, and
    ///   only this body can run it), with its `cancelled()` already resolved by that
    ///   shutdown, exactly like any body running when shutdown began; the shutdown waits for
    ///   it as for those, so a body that honours `cancelled()` ends at once and its lease is
    ///   released. A fire still waiting to ask again when shutdown begins does not ask.
    ///
    /// ```
    /// # use lock_core::InMemoryLockProvider;
    /// # use lock_scheduler::Scheduler;
    /// # use std::time::Duration;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .acquire_ahead(Duration::from_millis(250))
    ///     .jobs([])
    ///     .start()
    ///     .await?;
    /// assert_eq!(scheduler.executor().acquire_ahead(), Duration::from_millis(250));
    /// # scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn acquire_ahead(mut self, ahead: Duration) -> Self {
        self.acquire_ahead = Some(ahead);
        self
    }
}

/// The default [`SchedulerBuilder::acquire_ahead`]: a round trip and a burst's batch (4
/// instances x 1,000 jobs due at one second decide in 40-90 ms on a loaded 2-core host, see
/// BENCHMARKS.md), with room to spare, and still short against any lease. A floor: the ahead
/// grows while the database answers slower.
pub const DEFAULT_ACQUIRE_AHEAD: Duration = Duration::from_millis(100);
