//! Run-once tasks given to the builder: run by `start()` under the scheduler's own executor
//! (so its lock rows carry the scheduler's instance id) before any job's first fire.
//!
//! Decisions, and why:
//! - **Before the first fire, not beside it.** A job that needs a migrated table must not
//!   fire before the migration: `start()` finishes every task (here, or by learning another
//!   instance did) before it starts any job loop.
//! - **A failure fails `start()`.** A task that failed or is still running elsewhere at the
//!   wait bound leaves the jobs' preconditions unknown: nothing fires, and the error names
//!   the task and keeps its error as the source.

use std::future::Future;
use std::pin::Pin;

use super::SchedulerBuilder;
use lock_core::{BoxError, LockError, LockingTaskExecutor, RunOnceOutcome};

type TaskFuture = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;

/// One task given to [`SchedulerBuilder::run_once`].
pub(super) struct StartupTask {
    name: String,
    version: String,
    task: Box<dyn FnOnce() -> TaskFuture + Send>,
}

impl SchedulerBuilder {
    /// A task run once across the cluster before any job's first fire (a migration the jobs
    /// need, a cache warm-up), by [`LockingTaskExecutor::run_once`] under this scheduler's
    /// executor: its lock rows (`NAME@VERSION`, `NAME@VERSION:done`) carry this scheduler's
    /// instance id.
    ///
    /// [`start`](Self::start) runs the tasks in the order given, each to its end: the first
    /// instance runs it, the others wait for it (up to 5 minutes) and learn it is done; a task
    /// done before (same name and version) does not run again. A task that fails, or is still
    /// running elsewhere after the wait, fails `start()` with
    /// [`LockError::RunOnceFailed`] (its error as the source) and no job fires. A new
    /// `version` is a new task. Needs a lock table that keeps slots (not ShedLock's four
    /// columns alone: `start()` then fails and says how to add them).
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::{Job, Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .run_once("migrate_users", "v3", || async {
    ///         // ALTER TABLE users ...
    ///         Ok::<_, std::io::Error>(())
    ///     })
    ///     .jobs([Job::new("report", Trigger::fixed_rate(Duration::from_secs(60))?, || async {})])
    ///     .start()
    ///     .await?; // the migration has finished here; "report" fires after it
    /// scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn run_once<F, Fut, T, E>(
        mut self,
        name: impl Into<String>,
        version: impl Into<String>,
        task: F,
    ) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        self.run_once.push(StartupTask {
            name: name.into(),
            version: version.into(),
            task: Box::new(move || {
                Box::pin(async move { task().await.map(drop).map_err(Into::into) })
            }),
        });
        self
    }
}

/// Runs every task to its end, in order; the first that did not finish fails start.
pub(super) async fn run_all(
    executor: &LockingTaskExecutor,
    tasks: Vec<StartupTask>,
) -> Result<(), LockError> {
    for StartupTask {
        name,
        version,
        task,
    } in tasks
    {
        let key = format!("{name}@{version}");
        let once = executor.run_once(name, version);
        let failed = |source: BoxError| LockError::RunOnceFailed {
            task: key.clone(),
            source,
        };
        match once.run(task).await? {
            RunOnceOutcome::Ran(()) | RunOnceOutcome::AlreadyDone => {}
            RunOnceOutcome::Failed(error) => return Err(failed(error)),
            RunOnceOutcome::TimedOut => {
                return Err(failed(
                    format!(
                        "another instance was still running it after {:?} (the wait bound)",
                        lock_core::DEFAULT_RUN_ONCE_WAIT
                    )
                    .into(),
                ));
            }
        }
    }
    Ok(())
}
