//! How many bodies run at once on this instance: `max_concurrent_runs` for all jobs and
//! `group_limit` per group (`#[scheduled(group = "..")]`).
//!
//! An instance at its limit does not ask for the lock, so that an instance with room runs the
//! fire ("busy instances hand work on", xxl-job's busy-over route).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lock_cluster::{RunEnd, RunStart, RunState};
use lock_core::{FireKind, FireOutcome, FireSlot, JobContext, LockError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::runner::JobRunner;
use super::shards::SHARD_TAKEOVER_DELAY;
use super::status::RunOutcome;
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
    fn try_take(&self) -> Option<Permit> {
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
    async fn take(&self) -> Permit {
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

impl JobRunner {
    /// Room for this fire's body, or the fire's outcome without it.
    ///
    /// A scheduled slot with no room now is left to the instances with room: this one waits
    /// the hand-off delay ([`SHARD_TAKEOVER_DELAY`], at most a quarter of the period: the
    /// others have asked for the lock by then, and the slot is still young) for a permit, then
    /// asks for the slot's lock anyway. Granted, nobody with room ran it: the fire is recorded
    /// as missed ("every instance busy") and the lock given back, the body not run. Refused,
    /// another instance ran it. Every other fire (manual, catch-up, queued) waits for room.
    pub(super) async fn permit_for(
        &self,
        permits: &JobPermits,
        slot: Option<FireSlot>,
        kind: FireKind,
    ) -> Result<Permit, RunOutcome> {
        if let Some(permit) = permits.try_take() {
            return Ok(permit);
        }
        let slot = match slot {
            Some(slot) if kind == FireKind::Scheduled => slot,
            _ => {
                return tokio::select! {
                    biased;
                    _ = self.stop.cancelled() => Err(RunOutcome::Skipped),
                    permit = permits.take() => Ok(permit),
                };
            }
        };
        self.config.metrics().busy_handed_on();
        let period = self
            .job
            .trigger()
            .next_slot(slot.instant())
            .and_then(|next| (next.instant() - slot.instant()).to_std().ok())
            .unwrap_or(Duration::MAX);
        let delay = SHARD_TAKEOVER_DELAY.min(period / 4);
        tokio::select! {
            biased;
            _ = self.stop.cancelled() => return Err(RunOutcome::Skipped),
            permit = permits.take() => return Ok(permit),
            _ = tokio::time::sleep(delay) => {}
        }
        Err(self.record_busy(slot).await)
    }

    /// Takes `slot`'s lock without running the body and records the fire as missed.
    async fn record_busy(&self, slot: FireSlot) -> RunOutcome {
        let store = self
            .ops
            .as_ref()
            .filter(|ops| ops.keeps_history())
            .map(|ops| ops.provider().clone());
        let name = self.history_name().into_owned();
        let instance = self.executor.instance_id().to_owned();
        let record = async move {
            let (Some(store), Some(ctx)) = (store, JobContext::current()) else {
                return;
            };
            let Some(store) = store.cluster() else {
                return;
            };
            let run = RunStart {
                job: name,
                slot: ctx.scheduled_at(),
                fire_kind: FireKind::Scheduled,
                instance_id: instance,
                fence: ctx.fence(),
                attempt: 1,
                params: Default::default(),
            };
            let written = async {
                let id = store.run_started(&run).await?;
                store
                    .run_ended(&RunEnd::new(
                        id,
                        RunState::Missed,
                        Some(EVERY_INSTANCE_BUSY),
                    ))
                    .await
            };
            if let Err(error) = written.await {
                tracing::warn!(
                    job = run.job,
                    error = &error as &dyn std::error::Error,
                    "the missed fire (every instance busy) was not written to the history"
                );
            }
        };
        let fired = self
            .executor
            .execute_fire(
                &self.config,
                Some(slot),
                FireKind::Scheduled,
                None,
                None,
                record,
            )
            .await;
        match fired {
            Ok(FireOutcome::Executed(())) => {
                tracing::warn!(
                    job = self.job.name(),
                    %slot,
                    "slot missed: every instance was busy (at max_concurrent_runs or its group's \
                     limit), none had room to run it"
                );
                RunOutcome::Skipped
            }
            Ok(_) => RunOutcome::Skipped,
            Err(error) => RunOutcome::LockFailed(error.to_string()),
        }
    }
}
