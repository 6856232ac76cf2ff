//! What a locked body can learn about the lock it runs under.

use std::cell::RefCell;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::{Lease, LockError};
pub use lock_trigger::Params;

tokio::task_local! {
    static CURRENT: JobContext;
}

thread_local! {
    // Set while a synchronous body runs on the blocking pool, where task-locals are not visible.
    static CURRENT_BLOCKING: RefCell<Option<JobContext>> = const { RefCell::new(None) };
}

/// The lock a body is running under: name, fencing token, slot, owner, and a cancellation
/// signal.
///
/// It is set (task-local) for exactly as long as a locked body runs, so code anywhere below the
/// job can read it without threading it through arguments:
///
/// ```
/// use lock_core::{InMemoryLockProvider, JobContext, LockConfiguration, LockingTaskExecutor};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
/// let config = LockConfiguration::new("sync_bill", Duration::from_secs(60), Duration::ZERO)?;
/// assert!(JobContext::current().is_none());
/// executor
///     .execute_with_lock(&config, async {
///         let ctx = JobContext::current().expect("inside a locked body");
///         assert_eq!(ctx.lock_name(), "sync_bill");
///         assert_eq!(ctx.fence(), 1);
///     })
///     .await?;
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
#[derive(Clone, Debug)]
pub struct JobContext {
    inner: Arc<ContextInner>,
}

#[derive(Debug)]
struct ContextInner {
    lease: Lease,
    cancel: CancellationToken,
    fire_kind: FireKind,
    /// Which attempt of the run this is (1 unless the job retries).
    attempt: AtomicU32,
    /// The shard (index, total) this run is, for a sharded or broadcast job.
    shard: Option<(u32, u32)>,
    /// A manual run's parameters; empty for every other fire.
    params: Params,
}

/// Why a body runs: a scheduled fire, a catch-up run of a missed slot, or a manual run.
///
/// A fire of the scheduler's timer is `Scheduled`; `Scheduler::trigger`,
/// a direct call of a `#[scheduler_lock]` function and
/// [`LockingTaskExecutor::execute_with_lock`](crate::LockingTaskExecutor::execute_with_lock)
/// are `Manual`; `CatchUp` is a run of a slot missed while no instance was up.
///
/// ```
/// use lock_core::{FireKind, InMemoryLockProvider, JobContext, LockConfiguration, LockingTaskExecutor};
/// use std::time::Duration;
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
/// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
/// let ctx = executor
///     .execute_with_lock(&config, async { JobContext::current().expect("inside the lock") })
///     .await?
///     .executed()
///     .expect("the lock was free");
/// // A locked call outside a scheduler is a manual run.
/// assert_eq!(ctx.fire_kind(), FireKind::Manual);
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FireKind {
    /// A fire at one of the trigger's instants.
    Scheduled,
    /// A run of a slot that was missed (e.g. while every instance was down).
    CatchUp,
    /// A run asked for by code or an operator, outside the trigger's instants.
    Manual,
    /// A run started by its parents' success (`#[scheduled(after = ..)]`), with their slot.
    Dependency,
    /// A fire that found the previous run still holding the lock and waited for it to end
    /// (`overlap = "queue"`).
    Queued,
    /// A fire that told the previous run to stop and ran once its lock was free
    /// (`overlap = "replace"`).
    Replacing,
}

impl FireKind {
    /// What the executor's public entry points report: a slot is a scheduled fire, no slot a
    /// manual run.
    pub(crate) fn of_slot(slot: Option<crate::FireSlot>) -> Self {
        if slot.is_some() {
            FireKind::Scheduled
        } else {
            FireKind::Manual
        }
    }
}

impl JobContext {
    pub(crate) fn new(lease: Lease, cancel: CancellationToken) -> Self {
        Self::with_kind(lease, cancel, FireKind::Manual)
    }

    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn with_kind(lease: Lease, cancel: CancellationToken, fire_kind: FireKind) -> Self {
        JobContext {
            inner: Arc::new(ContextInner {
                lease,
                cancel,
                fire_kind,
                attempt: AtomicU32::new(1),
                shard: None,
                params: Params::new(),
            }),
        }
    }

    /// The same context for a fire of `kind` running `shard` (the executor builds a context
    /// before it knows who asked for the lock).
    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn for_fire(self, kind: FireKind, shard: Option<(u32, u32)>) -> Self {
        if self.inner.fire_kind == kind && self.inner.shard == shard {
            return self;
        }
        JobContext {
            inner: Arc::new(ContextInner {
                lease: self.inner.lease.clone(),
                cancel: self.inner.cancel.clone(),
                fire_kind: kind,
                attempt: AtomicU32::new(1),
                shard,
                params: self.inner.params.clone(),
            }),
        }
    }

    /// The same context carrying a manual run's `params`.
    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn with_params(self, params: Params) -> Self {
        if params.is_empty() && self.inner.params.is_empty() {
            return self;
        }
        JobContext {
            inner: Arc::new(ContextInner {
                lease: self.inner.lease.clone(),
                cancel: self.inner.cancel.clone(),
                fire_kind: self.inner.fire_kind,
                attempt: AtomicU32::new(self.inner.attempt.load(Ordering::Relaxed)),
                shard: self.inner.shard,
                params,
            }),
        }
    }

    /// The manual run's parameters (`lockctl trigger NAME --param key=value`, the dashboard's
    /// trigger form); empty on every other fire.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, JobContext, LockConfiguration, LockingTaskExecutor};
    /// use std::time::Duration;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    /// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
    /// let empty = executor
    ///     .execute_with_lock(&config, async {
    ///         JobContext::current().expect("inside the lock").params().is_empty()
    ///     })
    ///     .await?
    ///     .executed()
    ///     .expect("the lock was free");
    /// assert!(empty, "a direct call has no parameters");
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn params(&self) -> &Params {
        &self.inner.params
    }

    /// The shard this run processes, `(index, total)`: for a job with `shards = N`, one of
    /// `0..N` (each runs once per slot somewhere in the cluster); for a `broadcast` job, this
    /// instance's rank among the live instances and their number. `None` for any other run.
    /// Process your share of the work by it, e.g. the rows with `id % total = index`.
    ///
    /// ```
    /// use lock_core::{FireKind, InMemoryLockProvider, JobContext, LockConfiguration, LockingTaskExecutor};
    /// use std::time::Duration;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    /// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
    /// let ctx = executor
    ///     .execute_with_lock(&config, async { JobContext::current().expect("inside the lock") })
    ///     .await?
    ///     .executed()
    ///     .expect("the lock was free");
    /// assert_eq!(ctx.shard(), None);
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn shard(&self) -> Option<(u32, u32)> {
        self.inner.shard
    }

    /// The context of the locked body this code runs in, or `None` outside one.
    pub fn current() -> Option<JobContext> {
        CURRENT
            .try_with(JobContext::clone)
            .ok()
            .or_else(|| CURRENT_BLOCKING.with(|c| c.borrow().clone()))
    }

    /// The lock's name.
    pub fn lock_name(&self) -> &str {
        self.inner.lease.name()
    }

    /// The fencing token of this lease: strictly greater than any token handed out before for
    /// this lock name. Store it with the body's writes and refuse writes carrying a smaller
    /// one, and a paused former holder can never overwrite the new holder's work.
    pub fn fence(&self) -> u64 {
        self.inner.lease.fence()
    }

    /// The scheduled instant this fire belongs to (`None` for direct calls and fixed-delay jobs).
    pub fn scheduled_at(&self) -> Option<DateTime<Utc>> {
        self.inner.lease.slot().map(|s| s.instant())
    }

    /// Why this body runs: a scheduled fire, a catch-up run, or a manual run
    /// (`Scheduler::trigger`, a direct call).
    pub fn fire_kind(&self) -> FireKind {
        self.inner.fire_kind
    }

    /// Which attempt of this run the body is: 1 for the first, 2 for the first retry, and so
    /// on (a job with `#[scheduler_lock(retries = N)]` or `Job::with_retries`
    /// is run again under the same lease and slot when it fails). Always 1 outside retries.
    ///
    /// ```
    /// use lock_core::{FireKind, InMemoryLockProvider, JobContext, LockConfiguration, LockingTaskExecutor};
    /// use std::time::Duration;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    /// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
    /// let ctx = executor
    ///     .execute_with_lock(&config, async { JobContext::current().expect("inside the lock") })
    ///     .await?
    ///     .executed()
    ///     .expect("the lock was free");
    /// assert_eq!(ctx.attempt(), 1);
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn attempt(&self) -> u32 {
        self.inner.attempt.load(Ordering::Relaxed)
    }

    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn set_attempt(&self, attempt: u32) {
        self.inner.attempt.store(attempt, Ordering::Relaxed);
    }

    /// The id of the instance holding the lock (`locked_by`).
    pub fn instance_id(&self) -> &str {
        self.inner.lease.locked_by()
    }

    /// Resolves when the body should stop: the lease was lost (a keep-alive extension failed)
    /// or the scheduler is shutting down.
    ///
    /// ```no_run
    /// # async fn work() {}
    /// # async fn body() {
    /// let ctx = lock_core::JobContext::current().unwrap();
    /// tokio::select! {
    ///     _ = work() => {}
    ///     _ = ctx.cancelled() => tracing::warn!("lock lost or shutting down; stopping early"),
    /// }
    /// # }
    /// ```
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await
    }

    /// Whether [`cancelled`](Self::cancelled) has resolved.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn cancel_token(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn lease(&self) -> &Lease {
        &self.inner.lease
    }

    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub async fn scope<F: Future>(self, fut: F) -> F::Output {
        CURRENT.scope(self, fut).await
    }

    /// Runs `f` with this context visible to [`JobContext::current`] on the current thread
    /// (for synchronous bodies on the blocking pool).
    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn enter_blocking<R>(self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<JobContext>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let prev = self.0.take();
                CURRENT_BLOCKING.with(|c| *c.borrow_mut() = prev);
            }
        }
        let prev = CURRENT_BLOCKING.with(|c| c.borrow_mut().replace(self));
        let _restore = Restore(prev);
        f()
    }
}

/// Panics unless called inside a locked body (ShedLock's `LockAssert.assertLocked()`).
///
/// Put it at the top of code that must never run unlocked, for example a function that is
/// only correct when called from a `#[scheduler_lock]` job.
///
/// ```should_panic
/// lock_core::assert_locked(); // panics: not inside a locked body
/// ```
#[track_caller]
pub fn assert_locked() {
    if JobContext::current().is_none() {
        panic!(
            "lock_core::assert_locked: this code must run inside a locked body \
             (a #[scheduler_lock] function or LockingTaskExecutor::execute_with_lock), but no lock is held"
        );
    }
}

impl FireKind {
    /// As stored in the history: `scheduled`, `catch_up`, `manual`, `dependency`, `queued`,
    /// `replacing`.
    ///
    /// ```
    /// assert_eq!(lock_core::FireKind::CatchUp.as_str(), "catch_up");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            FireKind::Scheduled => "scheduled",
            FireKind::CatchUp => "catch_up",
            FireKind::Manual => "manual",
            FireKind::Dependency => "dependency",
            FireKind::Queued => "queued",
            FireKind::Replacing => "replacing",
        }
    }
}

impl FromStr for FireKind {
    type Err = LockError;
    fn from_str(s: &str) -> Result<Self, LockError> {
        match s {
            "scheduled" => Ok(FireKind::Scheduled),
            "catch_up" => Ok(FireKind::CatchUp),
            "manual" => Ok(FireKind::Manual),
            "dependency" => Ok(FireKind::Dependency),
            "queued" => Ok(FireKind::Queued),
            "replacing" => Ok(FireKind::Replacing),
            other => Err(LockError::InvalidConfiguration(format!(
                "unknown fire kind {other:?} in an operations table"
            ))),
        }
    }
}
