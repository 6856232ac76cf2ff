//! Manual runs: `Scheduler::trigger` fires a job now, on this instance, under its lock; a
//! claimed trigger request (`cluster.rs`) runs one with the request's parameters.
//!
//! The parameters reach the body through a task-local set around the request's fire
//! ([`with_requested_params`]): the executor builds the lease's context, and the attempts
//! (`attempts.rs`) put them in it before the first start row, so the body's
//! [`JobContext::params`](lock_core::JobContext::params) and the history row carry them, with
//! no new argument through the fire's path. Scheduled fires run outside it: no parameters.

use std::future::Future;

use super::{RunOutcome, Scheduler};
use lock_core::{FireKind, LockError, Params};

tokio::task_local! {
    /// The parameters of the trigger request whose fire runs in this task.
    static REQUESTED_PARAMS: Params;
}

/// Runs `fire` (a claimed trigger request's) with its `params` for the body's context.
pub(super) async fn with_requested_params<F: Future>(params: Params, fire: F) -> F::Output {
    if params.is_empty() {
        return fire.await;
    }
    REQUESTED_PARAMS.scope(params, fire).await
}

/// The parameters of the trigger request being run in this task, if any.
pub(super) fn requested_params() -> Option<Params> {
    REQUESTED_PARAMS.try_with(Params::clone).ok()
}

impl Scheduler {
    /// Runs the job named `name` once now, on this instance, under the job's lock, and returns
    /// what the run did; the job's status ([`jobs`](Self::jobs)) records it as its last
    /// outcome. The body sees [`FireKind::Manual`] and no
    /// [`scheduled_at`](lock_core::JobContext::scheduled_at).
    ///
    /// A manual run has **no slot**: it takes the lock as a direct call does (plain mutual
    /// exclusion, `lock_at_least_for` honoured), so it neither uses up the next scheduled slot
    /// nor is refused because a slot already ran. While another instance (or this one's
    /// scheduled fire) holds the lock, it returns [`RunOutcome::Skipped`].
    ///
    /// Fails when no job has that name, or after [`shutdown`](Self::shutdown).
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, JobContext, FireKind};
    /// use lock_scheduler::{Job, RunOutcome, Scheduler, Trigger};
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .jobs([Job::new("nightly_report", Trigger::cron("0 0 3 * * *")?, |ctx: JobContext| async move {
    ///         assert_eq!(ctx.fire_kind(), FireKind::Manual);
    ///         assert_eq!(ctx.scheduled_at(), None);
    ///     })])
    ///     .start()
    ///     .await?;
    /// assert_eq!(scheduler.trigger("nightly_report").await?, RunOutcome::Succeeded);
    /// assert!(scheduler.trigger("no_such_job").await.is_err());
    /// scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub async fn trigger(&self, name: &str) -> Result<RunOutcome, LockError> {
        if self.inner.stop.is_cancelled() {
            // Its body would start with `cancelled()` already resolved.
            return Err(LockError::InvalidConfiguration(format!(
                "Scheduler::trigger(`{name}`): the scheduler has shut down"
            )));
        }
        let runner = self.inner.jobs.runner(name).ok_or_else(|| {
            let known: Vec<String> = self
                .inner
                .jobs
                .states()
                .iter()
                .map(|s| s.name.to_string())
                .collect();
            LockError::InvalidConfiguration(format!(
                "Scheduler::trigger: no job named `{name}`; the jobs are: {}",
                known.join(", ")
            ))
        })?;
        Ok(runner.fire_as(None, FireKind::Manual).await)
    }
}
