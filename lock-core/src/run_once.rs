//! Run once across the cluster: a start-up task (a data migration, a cache warm-up) keyed by a
//! name and a version, run by one instance, recorded only when it succeeds.
//!
//! Built on [`LockProvider`]'s ordinary operations, so every provider supports it, on a lock
//! table that keeps slots (a table with ShedLock's four columns only has no `last_fire`:
//! [`LockProvider::check_once_per_slot`] refuses it before the task runs):
//!
//! - `NAME@VERSION` is the **run lock**: a slot-less lease (plain mutual exclusion, kept alive
//!   while the task runs) that one caller at a time holds while it checks and runs the task;
//! - `NAME@VERSION:done` is the **done marker**: after the task succeeded, the winner (still
//!   holding the run lock) takes and at once releases it with a fixed slot, so its row's
//!   `last_fire` is set. The provider's once-per-slot rule makes the mark permanent and
//!   idempotent, and [`LockProvider::read_lock`] reads it.
//!
//! A caller that finds the run lock held waits, polling, until the holder finishes (then it
//! finds the mark: already done), fails (then it takes the lock and runs the task itself), or
//! the wait bound passes (timed out).

use std::time::Duration;

use chrono::{TimeZone, Utc};

use crate::{
    AcquireOutcome, FireSlot, LockConfiguration, LockError, LockOutcome, LockRequest,
    LockingTaskExecutor, MAX_LOCK_NAME_LEN, RefusalReason,
};

/// The default [`RunOnce::wait_at_most`]: 5 minutes.
pub const DEFAULT_RUN_ONCE_WAIT: Duration = Duration::from_secs(5 * 60);

/// The default [`RunOnce::lease`]: 60 seconds, kept alive while the task runs.
pub const DEFAULT_RUN_ONCE_LEASE: Duration = Duration::from_secs(60);

/// How often a waiting caller looks again.
const POLL: Duration = Duration::from_millis(200);

/// The done marker's `last_fire`. A fixed instant in the past: no clock can put it ahead of the
/// database's now, and `lockctl list` shows it as a date no scheduled slot has.
fn done_slot() -> FireSlot {
    FireSlot::new(Utc.with_ymd_and_hms(2000, 1, 1, 0, 0, 0).unwrap())
}

/// What [`RunOnce::run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum RunOnceOutcome<T, E> {
    /// The task ran here and succeeded; it is recorded as done.
    Ran(T),
    /// The task ran here and failed; nothing is recorded, so the next caller (here or on
    /// another instance) runs it again.
    Failed(E),
    /// The task had succeeded before (here or elsewhere); it did not run.
    AlreadyDone,
    /// Another instance was running the task for longer than the wait bound; it did not run
    /// here and its result is unknown.
    TimedOut,
}

/// A run-once task being configured; from [`LockingTaskExecutor::run_once`].
#[derive(Debug)]
#[must_use]
pub struct RunOnce<'a> {
    executor: &'a LockingTaskExecutor,
    name: String,
    version: String,
    wait: Duration,
    lease: Duration,
}

impl LockingTaskExecutor {
    /// A task run once across every instance sharing this executor's lock table: the first
    /// caller runs it, the others wait for it and learn it is done; a failure is not recorded,
    /// so the next caller retries. A new `version` is a new task (e.g. `"v2"` of a migration).
    ///
    /// It uses two rows of the lock table, `NAME@VERSION` and `NAME@VERSION:done` (each at most
    /// 64 bytes); [`run`](RunOnce::run) fails if a name is longer.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockingTaskExecutor, RunOnceOutcome};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    /// let migrate = || async { Ok::<_, String>("3 tables migrated") };
    /// let first = executor.run_once("migrate_users", "v3").wait_at_most(Duration::from_secs(60)).run(migrate).await?;
    /// assert_eq!(first, RunOnceOutcome::Ran("3 tables migrated"));
    /// let again = executor.run_once("migrate_users", "v3").run(migrate).await?;
    /// assert_eq!(again, RunOnceOutcome::AlreadyDone);
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn run_once(&self, name: impl Into<String>, version: impl Into<String>) -> RunOnce<'_> {
        RunOnce {
            executor: self,
            name: name.into(),
            version: version.into(),
            wait: DEFAULT_RUN_ONCE_WAIT,
            lease: DEFAULT_RUN_ONCE_LEASE,
        }
    }
}

impl RunOnce<'_> {
    /// How long a caller waits for another instance running the task before it gives up with
    /// [`RunOnceOutcome::TimedOut`] (default [`DEFAULT_RUN_ONCE_WAIT`], 5 minutes). Zero: try
    /// once, do not wait.
    pub fn wait_at_most(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// The run lock's lease (default [`DEFAULT_RUN_ONCE_LEASE`], 60 s), kept alive while the
    /// task runs: if the instance running it dies, the others can take over after at most
    /// this long.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Runs `task` unless it is done already or another instance is running it (then waits
    /// for that one, bounded by [`wait_at_most`](Self::wait_at_most)).
    ///
    /// `Err` when the lock table could not be asked or cannot keep the done marker (a table
    /// with ShedLock's four columns only: the error names it and the statement that adds
    /// `last_fire`; the task did not run), or when the task succeeded but recording it failed (it then runs again on the next caller: write tasks
    /// that tolerate a rerun, as any migration should).
    pub async fn run<F, Fut, T, E>(self, task: F) -> Result<RunOnceOutcome<T, E>, LockError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let key = format!("{}@{}", self.name, self.version);
        let done = format!("{key}:done");
        check_name(&done)?;
        // A table without `last_fire` cannot keep the done marker: the task would run again
        // at every call, so say so before it runs at all.
        bounded(
            self.executor,
            "check",
            &done,
            self.executor.provider().check_once_per_slot(),
        )
        .await?;
        let run_lock =
            LockConfiguration::new(key.as_str(), self.lease, Duration::ZERO)?.with_keep_alive(true);
        let executor = self.executor;
        let deadline = tokio::time::Instant::now() + self.wait;
        let mut task = Some(task);
        loop {
            if is_done(executor, &done).await? {
                return Ok(RunOnceOutcome::AlreadyDone);
            }
            let attempt = executor
                .execute_with_lock(&run_lock, async {
                    // Checked again under the lock: a holder that just finished has marked it.
                    if is_done(executor, &done).await? {
                        return Ok(RunOnceOutcome::AlreadyDone);
                    }
                    let task = task.take().expect("the task runs at most once per call");
                    match task().await {
                        Ok(out) => {
                            mark_done(executor, &done).await?;
                            tracing::info!(task = ?key, "run-once task succeeded and is recorded as done");
                            Ok(RunOnceOutcome::Ran(out))
                        }
                        Err(error) => {
                            tracing::warn!(task = ?key, "run-once task failed; not recorded, the next caller runs it again");
                            Ok(RunOnceOutcome::Failed(error))
                        }
                    }
                })
                .await?;
            match attempt {
                LockOutcome::Executed(outcome) => return outcome,
                LockOutcome::Skipped => {}
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                tracing::warn!(task = ?key, wait = ?self.wait, "run-once task still running elsewhere at the wait bound; not run here");
                return Ok(RunOnceOutcome::TimedOut);
            }
            tokio::time::sleep(POLL.min(deadline - now)).await;
        }
    }
}

fn check_name(done: &str) -> Result<(), LockError> {
    if done.len() > MAX_LOCK_NAME_LEN {
        return Err(LockError::InvalidConfiguration(format!(
            "run_once: the lock name `{done}` is {} bytes, over {MAX_LOCK_NAME_LEN}; shorten \
             the task's name or version",
            done.len()
        )));
    }
    Ok(())
}

async fn is_done(executor: &LockingTaskExecutor, done: &str) -> Result<bool, LockError> {
    let record = bounded(executor, "read", done, executor.provider().read_lock(done)).await?;
    Ok(record.and_then(|r| r.last_fire).is_some())
}

async fn mark_done(executor: &LockingTaskExecutor, done: &str) -> Result<(), LockError> {
    let provider = executor.provider();
    let request = LockRequest {
        name: done.into(),
        locked_by: executor.instance_id().into(),
        lock_at_most_for: Duration::from_secs(60),
        slot: Some(done_slot()),
        max_slot_lead: crate::DEFAULT_MAX_SLOT_LEAD,
        give_up_at: None,
    };
    match bounded(executor, "acquire", done, provider.acquire(&request)).await? {
        AcquireOutcome::Acquired(lease) => {
            bounded(
                executor,
                "release",
                done,
                provider.release(&lease, Duration::ZERO),
            )
            .await?;
            Ok(())
        }
        // Marked already (an earlier holder whose lease ran out while it still worked), or
        // being marked by it right now; a provider that cannot tell says `Unknown`: read it.
        AcquireOutcome::Refused(refusal) => {
            if refusal.reason == RefusalReason::SlotAlreadyRun || is_done(executor, done).await? {
                return Ok(());
            }
            Err(LockError::InvalidConfiguration(format!(
                "run_once: the done marker `{done}` could not be written: {:?} (held by {:?})",
                refusal.reason, refusal.locked_by
            )))
        }
    }
}

/// One provider call, bounded by the executor's operation timeout.
async fn bounded<T>(
    executor: &LockingTaskExecutor,
    operation: &'static str,
    lock: &str,
    call: impl Future<Output = Result<T, LockError>>,
) -> Result<T, LockError> {
    let after = executor.operation_timeout();
    tokio::time::timeout(after, call).await.unwrap_or_else(|_| {
        Err(LockError::Timeout {
            operation,
            lock: lock.to_owned(),
            after,
        })
    })
}
