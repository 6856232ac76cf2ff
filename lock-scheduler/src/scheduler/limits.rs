//! How many bodies run at once on this instance: `max_concurrent_runs` for all jobs and
//! `group_limit` per group (`#[scheduled(group = "..")]`).
//!
//! An instance at its limit does not ask for the lock, so that an instance with room runs the
//! fire ("busy instances hand work on", xxl-job's busy-over route).

use std::sync::Arc;

use super::SchedulerBuilder;

/// The limits as the builder collected them.
#[derive(Clone, Debug, Default)]
pub(super) struct RunLimits {
    /// At most this many bodies at once on this instance; None: no limit.
    pub(super) max_concurrent_runs: Option<usize>,
    /// Each group's bound, in the order given (a group named twice: the last wins).
    pub(super) groups: Vec<(Arc<str>, usize)>,
}

impl SchedulerBuilder {
    /// At most `n` job bodies run at once on this instance (every job, async and sync
    /// alike). At its limit the instance does not ask for a fire's lock, so an instance with
    /// room runs it; when every instance is full, the fire is recorded as missed ("every
    /// instance busy"). The default is no limit.
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::Scheduler;
    ///
    /// let builder = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .max_concurrent_runs(4);
    /// # let _ = builder;
    /// ```
    pub fn max_concurrent_runs(mut self, n: usize) -> Self {
        self.limits.max_concurrent_runs = Some(n);
        self
    }

    /// At most `n` bodies of the jobs in `group` (`#[scheduled(group = "..")]`,
    /// [`Job::with_group`](crate::Job::with_group)) run at once on this instance; as
    /// [`max_concurrent_runs`](Self::max_concurrent_runs), an instance at the group's limit
    /// leaves the group's fires to the others.
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::Scheduler;
    ///
    /// let builder = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .group_limit("reports", 2);
    /// # let _ = builder;
    /// ```
    pub fn group_limit(mut self, group: impl Into<Arc<str>>, n: usize) -> Self {
        self.limits.groups.push((group.into(), n));
        self
    }
}
