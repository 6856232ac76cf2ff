//! How many bodies run at once on this instance: `max_concurrent_runs` for all jobs and
//! `group_limit` per group (`#[scheduled(group = "..")]`).
//!
//! An instance at its limit does not ask for the lock, so that an instance with room runs the
//! fire ("busy instances hand work on", xxl-job's busy-over route).

use std::collections::HashMap;
use std::sync::Arc;

use lock_core::LockError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{Job, SchedulerBuilder};

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

impl RunLimits {
    /// The semaphores for `jobs`, or why the limits are refused: a bound of 0 (nothing could
    /// ever run), or a group no job has (a typo would silently limit nothing). None when no
    /// limit is set: a job then pays nothing per fire.
    pub(super) fn permits<'a>(
        &self,
        jobs: impl Iterator<Item = &'a Job> + Clone,
    ) -> Result<Option<RunPermits>, LockError> {
        if self.max_concurrent_runs == Some(0) {
            return Err(LockError::InvalidConfiguration(
                "max_concurrent_runs(0) would never let a job run; give at least 1, or leave it \
                 unset for no limit"
                    .to_owned(),
            ));
        }
        let mut groups: HashMap<Arc<str>, Arc<Semaphore>> = HashMap::new();
        for (group, n) in &self.groups {
            if *n == 0 {
                return Err(LockError::InvalidConfiguration(format!(
                    "group_limit({group:?}, 0) would never let the group's jobs run; give at \
                     least 1, or remove the limit"
                )));
            }
            if !jobs.clone().any(|job| job.group() == Some(&**group)) {
                let mut known: Vec<&str> = jobs.clone().filter_map(Job::group).collect();
                known.sort_unstable();
                known.dedup();
                let known = match known.is_empty() {
                    true => "no job has a group".to_owned(),
                    false => format!("the jobs' groups are `{}`", known.join("`, `")),
                };
                return Err(LockError::InvalidConfiguration(format!(
                    "group_limit names group {group:?}, which no job has ({known})"
                )));
            }
            groups.insert(group.clone(), Arc::new(Semaphore::new(*n)));
        }
        if self.max_concurrent_runs.is_none() && groups.is_empty() {
            return Ok(None);
        }
        Ok(Some(RunPermits {
            all: self
                .max_concurrent_runs
                .map(|n| Arc::new(Semaphore::new(n))),
            groups,
        }))
    }
}

/// This instance's semaphores: one for every job, one per limited group.
pub(super) struct RunPermits {
    all: Option<Arc<Semaphore>>,
    groups: HashMap<Arc<str>, Arc<Semaphore>>,
}

impl RunPermits {
    /// The limits `job` is under; None when it is under none (it pays nothing per fire).
    pub(super) fn for_job(&self, job: &Job) -> Option<Arc<JobPermits>> {
        let group = job.group().and_then(|g| self.groups.get(g)).cloned();
        if self.all.is_none() && group.is_none() {
            return None;
        }
        Some(Arc::new(JobPermits {
            all: self.all.clone(),
            group,
        }))
    }
}

/// The semaphores one job's bodies take a permit of.
pub(super) struct JobPermits {
    all: Option<Arc<Semaphore>>,
    group: Option<Arc<Semaphore>>,
}

/// Room for one body, held for its whole run (retries included).
pub(super) struct Permit {
    _group: Option<OwnedSemaphorePermit>,
    _all: Option<OwnedSemaphorePermit>,
}

impl JobPermits {
    /// A permit if there is room now.
    pub(super) fn try_take(&self) -> Option<Permit> {
        let take = |s: &Option<Arc<Semaphore>>| match s {
            Some(s) => s.clone().try_acquire_owned().map(Some).ok(),
            None => Some(None),
        };
        // Both or none: a half-taken permit is given back when dropped here.
        let group = take(&self.group)?;
        let all = take(&self.all)?;
        Some(Permit {
            _group: group,
            _all: all,
        })
    }

    /// A permit once there is room. The group's first, then the instance's, always in this
    /// order: two fires never hold one each while waiting for the other's.
    pub(super) async fn take(&self) -> Permit {
        let take = |s: &Option<Arc<Semaphore>>| {
            let s = s.clone();
            async move {
                match s {
                    // Never closed.
                    Some(s) => s.acquire_owned().await.ok(),
                    None => None,
                }
            }
        };
        let group = take(&self.group).await;
        let all = take(&self.all).await;
        Permit {
            _group: group,
            _all: all,
        }
    }
}

/// The error a fire no instance had room for is recorded with.
pub(super) const EVERY_INSTANCE_BUSY: &str = "every instance busy";
