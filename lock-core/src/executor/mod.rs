//! Acquire, run, release: the locking executor.
//!
//! The executor's rooms: this module holds the public type and its `execute_*` entry points;
//! `acquire` takes the lock (or decides to skip), `lease` holds it (release on every path,
//! keep-alive), `blocking` bridges synchronous bodies and callers, and `global` keeps the
//! default executor that direct calls of `#[scheduler_lock]` functions use.

mod acquire;
mod ahead;
pub(crate) mod batch;
mod blocking;
mod global;
mod lease;
mod recover;

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{
    DEFAULT_MAX_SLOT_LEAD, FireKind, FireSlot, JobContext, LockConfiguration, LockError,
    LockProvider, MAX_DURATION, MAX_INSTANCE_ID_LEN, Refusal, default_instance_id,
};

use acquire::Acquired;
use ahead::AnswerTimes;
pub use ahead::MAX_GROWN_AHEAD;
pub use batch::DEFAULT_BATCH_WINDOW;
use batch::{Coalescer, RELEASE_WINDOWS, Release};
use blocking::{block_on, join_blocking};
pub(crate) use global::default_executor_shared;
pub use global::install_scheduler_executor;
pub use global::{default_executor, install_default_executor, with_default_executor};
use lease::{LeaseGuard, keep_alive};
use recover::OwnGrants;

/// What [`LockingTaskExecutor::execute_with_lock`] did with the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[must_use]
pub enum LockOutcome<T> {
    /// The lock was taken (or already held by the calling body) and the body ran.
    Executed(T),
    /// Somebody else held the lock or the slot already ran; the body did not run.
    Skipped,
}

impl<T> LockOutcome<T> {
    /// The body's output, if it ran.
    ///
    /// ```
    /// assert_eq!(lock_core::LockOutcome::Executed(3).executed(), Some(3));
    /// assert_eq!(lock_core::LockOutcome::<u8>::Skipped.executed(), None);
    /// ```
    pub fn executed(self) -> Option<T> {
        match self {
            LockOutcome::Executed(t) => Some(t),
            LockOutcome::Skipped => None,
        }
    }

    /// Whether the body ran.
    pub fn is_executed(&self) -> bool {
        matches!(self, LockOutcome::Executed(_))
    }
}

/// What one of the scheduler's fires did ([`LockingTaskExecutor::execute_fire`]): the body's
/// output, or why it did not run. [`LockOutcome`] is what it tells any other caller.
#[doc(hidden)] // For `lock-scheduler`; not part of the API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FireOutcome<T> {
    /// The lock was taken (or already held by the calling body) and the body ran.
    Executed(T),
    /// The provider refused the lock, for this reason and with what it learned of the holder
    /// (its `lock_until`, for a fire that waits for the lock: `overlap = "queue"`); the body
    /// did not run.
    Refused(Refusal),
    /// The lock was granted later than the slot's grace (`late_by` after the slot): given
    /// back at once, the body not run, the slot spent (missed).
    Missed {
        /// How long after the slot the grant came back.
        late_by: Duration,
    },
}

impl<T> From<FireOutcome<T>> for LockOutcome<T> {
    fn from(fired: FireOutcome<T>) -> Self {
        match fired {
            FireOutcome::Executed(out) => LockOutcome::Executed(out),
            FireOutcome::Refused(_) | FireOutcome::Missed { .. } => LockOutcome::Skipped,
        }
    }
}

/// Runs a future only while holding a named lock (ShedLock's `LockingTaskExecutor`).
///
/// `execute_with_lock` takes the lock without waiting (if another instance holds it the body
/// is skipped), runs the body with a [`JobContext`] set, extends the lease while the body runs
/// when keep-alive is on, and releases it afterwards, respecting `lock_at_least_for`. The lease
/// is released also when the body panics (the panic then continues) or when the returned future
/// is dropped mid-body.
///
/// Cloning is cheap and clones share the provider, instance id and shutdown signal.
///
/// ```
/// use lock_core::{InMemoryLockProvider, LockConfiguration, LockOutcome, LockingTaskExecutor};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new()).with_instance_id("billing-1")?;
/// let config = LockConfiguration::new("sync_bill", Duration::from_secs(60), Duration::from_secs(5))?;
/// let outcome = executor.execute_with_lock(&config, async { "bills generated" }).await?;
/// assert_eq!(outcome, LockOutcome::Executed("bills generated"));
/// // lock_at_least_for keeps the lock for 5 s after it was taken, so an immediate rerun is skipped.
/// assert_eq!(executor.execute_with_lock(&config, async { "again" }).await?, LockOutcome::Skipped);
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct LockingTaskExecutor {
    provider: Arc<dyn LockProvider>,
    instance_id: Arc<str>,
    shutdown: CancellationToken,
    defaults: LockDefaults,
    operation_timeout: Duration,
    max_slot_lead: Duration,
    // How long before its slot a scheduler's fire takes its lock at least; zero outside a
    // scheduler. Grown with the recent acquires' answer times (`ahead.rs`).
    acquire_ahead: Duration,
    answer_times: Arc<AnswerTimes>,
    // The runtime that synchronous locked calls from outside any runtime block on.
    runtime: Option<tokio::runtime::Handle>,
    // Grants seen and acquires in flight, so that a lost grant is told from any other.
    own_grants: OwnGrants,
    // Slotted acquires and releases due within the batch window, sent together (`batch.rs`);
    // `None` when the provider does not batch or batching is off.
    acquires: Option<Arc<Coalescer<crate::LockRequest>>>,
    releases: Option<Arc<Coalescer<Release>>>,
    batch_window: Duration,
}

/// The default [`LockingTaskExecutor::with_operation_timeout`]: how long one acquire, extend
/// or release may take before it counts as failed.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings a lock takes when its `#[scheduler_lock]` does not give them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockDefaults {
    /// `lock_at_most_for` of locks that set none: 30 minutes unless changed.
    pub lock_at_most_for: Duration,
    /// Keep-alive of locks that set none: off unless changed.
    pub keep_alive: bool,
}

impl Default for LockDefaults {
    fn default() -> Self {
        LockDefaults {
            lock_at_most_for: DEFAULT_LOCK_AT_MOST_FOR,
            keep_alive: false,
        }
    }
}

/// The default `lock_at_most_for`: long enough for most batch jobs, short enough that a
/// crashed holder blocks its job for at most half an hour.
pub const DEFAULT_LOCK_AT_MOST_FOR: Duration = Duration::from_secs(30 * 60);

impl std::fmt::Debug for LockingTaskExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockingTaskExecutor")
            .field("provider", &self.provider.describe())
            .field("instance_id", &self.instance_id)
            .finish()
    }
}

impl LockingTaskExecutor {
    /// An executor on `provider`, with the [default instance id](default_instance_id).
    pub fn new<P: LockProvider>(provider: P) -> Self {
        Self::from_shared(Arc::new(provider))
    }

    /// An executor on an already shared provider.
    pub fn from_shared(provider: Arc<dyn LockProvider>) -> Self {
        LockingTaskExecutor {
            provider,
            instance_id: default_instance_id().into(),
            shutdown: CancellationToken::new(),
            defaults: LockDefaults::default(),
            operation_timeout: DEFAULT_OPERATION_TIMEOUT,
            max_slot_lead: DEFAULT_MAX_SLOT_LEAD,
            acquire_ahead: Duration::ZERO,
            answer_times: Arc::default(),
            runtime: tokio::runtime::Handle::try_current().ok(),
            own_grants: OwnGrants::default(),
            acquires: None,
            releases: None,
            batch_window: Duration::ZERO,
        }
        .with_batch_window(DEFAULT_BATCH_WINDOW)
    }

    /// How long the first acquire (or release) of a batch waits for others of this executor
    /// to join it (default [`DEFAULT_BATCH_WINDOW`], 1 ms); `Duration::ZERO` turns batching off.
    ///
    /// With a provider that batches ([`LockProvider::max_batch`] above 1: PostgreSQL, MariaDB
    /// and MySQL, SQLite), the acquires of scheduled fires that come due within the window go
    /// to the database in one [`acquire_many`](LockProvider::acquire_many) round trip, and the
    /// releases in one [`release_many`](LockProvider::release_many): a thousand jobs due at
    /// the same second cost each instance a few statements instead of a thousand. Each fire
    /// keeps exactly the semantics of its own acquire. A release waits at most
    /// `RELEASE_WINDOWS` (5) windows, so a lock is held at most that much longer (5 ms at the
    /// default) than `max(its end, lock_at_least_for)`.
    /// Direct calls (no slot) are never batched.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockingTaskExecutor};
    /// use std::time::Duration;
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())
    ///     .with_batch_window(Duration::ZERO);
    /// assert_eq!(executor.batch_window(), Duration::ZERO);
    /// ```
    #[must_use]
    pub fn with_batch_window(mut self, window: Duration) -> Self {
        self.batch_window = window;
        self.acquires = Coalescer::new(&self.provider, window);
        self.releases = Coalescer::new(&self.provider, window.saturating_mul(RELEASE_WINDOWS));
        self
    }

    /// The batch window (zero: batching off).
    pub fn batch_window(&self) -> Duration {
        self.batch_window
    }

    /// Replaces the defaults for locks whose `#[scheduler_lock]` leaves `lock_at_most_for` or
    /// `keep_alive` unset.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockDefaults, LockingTaskExecutor};
    /// use std::time::Duration;
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new()).with_defaults(LockDefaults {
    ///     lock_at_most_for: Duration::from_secs(60),
    ///     keep_alive: true,
    /// });
    /// assert!(executor.defaults().keep_alive);
    /// ```
    #[must_use]
    pub fn with_defaults(mut self, defaults: LockDefaults) -> Self {
        self.defaults = defaults;
        self
    }

    /// The defaults for locks that leave settings unset.
    pub fn defaults(&self) -> LockDefaults {
        self.defaults
    }

    /// Bounds every provider call (default [`DEFAULT_OPERATION_TIMEOUT`], 10 s).
    ///
    /// A database behind a link that drops packets does not answer and does not fail either,
    /// until TCP gives up minutes later. Bounded, an acquire fails with
    /// [`LockError::Timeout`] within this timeout, the read-back of a lost grant included (the
    /// fire is skipped, the next one tries again; a scheduled fire's late grant is refused by
    /// the database, see [`LockRequest::give_up_at`](crate::LockRequest::give_up_at)), a release is
    /// logged as failed (the lease then ends at `lock_at_most_for`), and a keep-alive
    /// extension that has not succeeded by the time the lease would end counts as a lost lock,
    /// so [`JobContext::cancelled`] resolves before another instance can take over.
    ///
    /// A timeout above [`MAX_DURATION`] (1000 years; e.g. `Duration::MAX` for "never") is cut
    /// to it.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockingTaskExecutor};
    /// use std::time::Duration;
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())
    ///     .with_operation_timeout(Duration::from_secs(3));
    /// assert_eq!(executor.operation_timeout(), Duration::from_secs(3));
    /// ```
    #[must_use]
    pub fn with_operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = timeout.min(MAX_DURATION);
        self
    }

    /// The bound on each provider call.
    pub fn operation_timeout(&self) -> Duration {
        self.operation_timeout
    }

    /// How far ahead of the provider's clock a slot may be (default
    /// [`DEFAULT_MAX_SLOT_LEAD`], 5 s): each acquire carries it
    /// ([`LockRequest::max_slot_lead`](crate::LockRequest::max_slot_lead)) and the provider
    /// refuses a later slot, so no instance can spend a slot the database has not reached.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockingTaskExecutor};
    /// use std::time::Duration;
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())
    ///     .with_max_slot_lead(Duration::from_secs(2));
    /// assert_eq!(executor.max_slot_lead(), Duration::from_secs(2));
    /// ```
    #[must_use]
    pub fn with_max_slot_lead(mut self, lead: Duration) -> Self {
        self.max_slot_lead = lead.min(MAX_DURATION);
        self
    }

    /// How far ahead of the provider's clock a slot may be.
    pub fn max_slot_lead(&self) -> Duration {
        self.max_slot_lead
    }

    /// Sets how long before its slot a scheduler's fire takes its lock
    /// (`SchedulerBuilder::acquire_ahead`).
    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn with_acquire_ahead(mut self, ahead: Duration) -> Self {
        self.acquire_ahead = ahead.min(MAX_DURATION);
        self
    }

    /// How long before its slot a scheduler's cron or fixed-rate fire takes its lock now:
    /// `SchedulerBuilder::acquire_ahead` (zero for an executor outside a scheduler), or, when
    /// that is not zero and this executor's slotted acquires of the last one to two minutes
    /// took longer, the slowest of their answers and half again, grown by at most
    /// [`MAX_GROWN_AHEAD`]. Never more than half the [`max_slot_lead`](Self::max_slot_lead),
    /// so the database never refuses an early acquire as a slot too far ahead.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockingTaskExecutor};
    /// use std::time::Duration;
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    /// assert_eq!(executor.acquire_ahead(), Duration::ZERO);
    /// ```
    pub fn acquire_ahead(&self) -> Duration {
        self.answer_times
            .ahead(self.acquire_ahead, Instant::now())
            .min(self.max_slot_lead / 2)
    }

    /// Replaces the instance id written to `locked_by` (1 to 255 bytes). Make it unique per
    /// live process: release and extend trust it to tell this instance's leases from others',
    /// and an acquire that finds a lease in this id that no executor of this process holds
    /// (a grant its sender gave up on) releases it by fence and asks again.
    pub fn with_instance_id(mut self, id: impl Into<Arc<str>>) -> Result<Self, LockError> {
        let id = id.into();
        if id.is_empty() || id.len() > MAX_INSTANCE_ID_LEN {
            return Err(LockError::InvalidConfiguration(format!(
                "instance id {id:?} must be 1 to {MAX_INSTANCE_ID_LEN} bytes"
            )));
        }
        self.instance_id = id;
        Ok(self)
    }

    /// The instance id written to `locked_by`.
    pub fn instance_id(&self) -> &str {
        &self.instance_id
    }

    /// The provider.
    pub fn provider(&self) -> &Arc<dyn LockProvider> {
        &self.provider
    }

    /// Resolves every running body's [`JobContext::cancelled`]; later bodies start cancelled.
    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn shutdown_token(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Runs `body` if the lock named in `config` can be taken now; skips it otherwise.
    ///
    /// Inside a body already holding the same lock name, `body` runs directly (reentrancy).
    /// A provider error at acquire returns `Err` and the body does not run; an error at release
    /// is logged (the lease then ends at `lock_at_most_for`) and the body's output is returned.
    pub async fn execute_with_lock<F: Future>(
        &self,
        config: &LockConfiguration,
        body: F,
    ) -> Result<LockOutcome<F::Output>, LockError> {
        self.execute_in_slot(config, None, body).await
    }

    /// Like [`execute_with_lock`](Self::execute_with_lock), for one scheduled fire: the lock is
    /// granted only if `slot` has not run yet under this name, and the body's
    /// [`JobContext::scheduled_at`] returns it.
    ///
    /// ```
    /// use chrono::Utc;
    /// use lock_core::{FireSlot, InMemoryLockProvider, LockConfiguration, LockOutcome, LockingTaskExecutor};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    /// let config = LockConfiguration::new("tick", Duration::from_secs(60), Duration::ZERO)?;
    /// let slot = Some(FireSlot::new(Utc::now()));
    /// assert!(executor.execute_in_slot(&config, slot, async {}).await?.is_executed());
    /// // Same slot again, lock free: refused, it already ran.
    /// assert_eq!(executor.execute_in_slot(&config, slot, async {}).await?, LockOutcome::Skipped);
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    ///
    /// The body's [`JobContext::fire_kind`] is [`FireKind::Scheduled`] with a slot and
    /// [`FireKind::Manual`] without.
    pub async fn execute_in_slot<F: Future>(
        &self,
        config: &LockConfiguration,
        slot: Option<FireSlot>,
        body: F,
    ) -> Result<LockOutcome<F::Output>, LockError> {
        let fired = self
            .execute_fire(config, slot, FireKind::of_slot(slot), None, None, body)
            .await?;
        Ok(fired.into())
    }

    /// [`execute_in_slot`](Self::execute_in_slot) with the body's fire kind given: the
    /// scheduler's fires (whose timer loop boxes each fire, so an idle loop stays small).
    ///
    /// `due`: a scheduled fire's slot on the monotonic clock (when the database's clock
    /// reaches it). The lock may be decided before it (the scheduler's acquire-ahead); the body
    /// starts no earlier, and the fire's lag is measured from it (`acquire.rs`). `grace`: how
    /// long after `due` the body may still start (the job's `misfire_grace`); a grant that
    /// comes back later is given back and the fire is [`FireOutcome::Missed`].
    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub async fn execute_fire<F: Future>(
        &self,
        config: &LockConfiguration,
        slot: Option<FireSlot>,
        kind: FireKind,
        due: Option<Instant>,
        grace: Option<Duration>,
        body: F,
    ) -> Result<FireOutcome<F::Output>, LockError> {
        match self.acquire(config, slot, due).await? {
            Acquired::Reentrant => Ok(FireOutcome::Executed(body.await)),
            Acquired::Skipped(refusal) => Ok(FireOutcome::Refused(refusal)),
            Acquired::Lease(mut guard, ctx) => {
                let ctx = ctx.for_fire(kind, config.shard());
                let ctx = match self.at_slot(config, (due, grace), &mut guard, ctx).await {
                    Ok(ctx) => ctx,
                    Err(late_by) => return Ok(FireOutcome::Missed { late_by }),
                };
                guard.started = Instant::now();
                guard.linger_until = lingering(config, due);
                let out = self
                    .run_holding(config, &ctx, guard, ctx.clone().scope(body))
                    .await;
                Ok(FireOutcome::Executed(out))
            }
        }
    }

    /// Runs a synchronous `body` on tokio's blocking pool under the lock, with
    /// [`JobContext::current`] working inside it.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, JobContext, LockConfiguration, LockingTaskExecutor};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    /// let config = LockConfiguration::new("export", Duration::from_secs(60), Duration::ZERO)?;
    /// let fence = executor
    ///     .execute_blocking_in_slot(&config, None, || JobContext::current().unwrap().fence())
    ///     .await?;
    /// assert_eq!(fence.executed(), Some(1));
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub async fn execute_blocking_in_slot<F, T>(
        &self,
        config: &LockConfiguration,
        slot: Option<FireSlot>,
        body: F,
    ) -> Result<LockOutcome<T>, LockError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let fired = self
            .execute_blocking_fire(config, slot, FireKind::of_slot(slot), None, None, body)
            .await?;
        Ok(fired.into())
    }

    /// [`execute_blocking_in_slot`](Self::execute_blocking_in_slot) with the body's fire kind
    /// and the slot's `due` instant and `grace` given (as [`execute_fire`](Self::execute_fire)).
    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub async fn execute_blocking_fire<F, T>(
        &self,
        config: &LockConfiguration,
        slot: Option<FireSlot>,
        kind: FireKind,
        due: Option<Instant>,
        grace: Option<Duration>,
        body: F,
    ) -> Result<FireOutcome<T>, LockError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let ctx = match self.acquire(config, slot, due).await? {
            Acquired::Reentrant => JobContext::current(),
            Acquired::Skipped(refusal) => return Ok(FireOutcome::Refused(refusal)),
            Acquired::Lease(mut guard, ctx) => {
                let ctx = ctx.for_fire(kind, config.shard());
                let ctx = match self.at_slot(config, (due, grace), &mut guard, ctx).await {
                    Ok(ctx) => ctx,
                    Err(late_by) => return Ok(FireOutcome::Missed { late_by }),
                };
                guard.started = Instant::now();
                guard.linger_until = lingering(config, due);
                let run = ctx.clone();
                let task = tokio::task::spawn_blocking(move || run.enter_blocking(body));
                let out = self
                    .run_holding(config, &ctx, guard, join_blocking(task))
                    .await;
                return Ok(FireOutcome::Executed(out));
            }
        };
        // Reentrant: keep the caller's context visible on the blocking thread.
        let task = tokio::task::spawn_blocking(move || match ctx {
            Some(ctx) => ctx.enter_blocking(body),
            None => body(),
        });
        Ok(FireOutcome::Executed(join_blocking(task).await))
    }

    /// Runs a synchronous `body` on the calling thread under the lock, blocking the thread
    /// while the lock is taken and released (a direct call of a synchronous
    /// `#[scheduler_lock]` function).
    ///
    /// Works from a multi-thread runtime's worker and from threads outside any runtime (then
    /// on the runtime the executor was created in); panics on a current-thread runtime, where
    /// blocking would deadlock.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockConfiguration, LockingTaskExecutor};
    /// use std::time::Duration;
    ///
    /// let runtime = tokio::runtime::Runtime::new().unwrap();
    /// let executor = runtime.block_on(async { LockingTaskExecutor::new(InMemoryLockProvider::new()) });
    /// let config = LockConfiguration::new("cleanup", Duration::from_secs(60), Duration::ZERO)?;
    /// // From a plain thread: the lock is taken on the executor's runtime.
    /// let out = std::thread::spawn(move || executor.execute_sync(&config, || 7)).join().unwrap()?;
    /// assert_eq!(out.executed(), Some(7));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn execute_sync<T>(
        &self,
        config: &LockConfiguration,
        body: impl FnOnce() -> T,
    ) -> Result<LockOutcome<T>, LockError> {
        let runtime = self.runtime.as_ref();
        let (mut guard, ctx) = match block_on(runtime, self.acquire(config, None, None))? {
            Acquired::Reentrant => return Ok(LockOutcome::Executed(body())),
            Acquired::Skipped(_) => return Ok(LockOutcome::Skipped),
            Acquired::Lease(guard, ctx) => (guard, ctx),
        };
        let keep_alive = config.keep_alive().then(|| {
            let task = keep_alive(self.provider.clone(), ctx.clone(), config, &guard);
            match tokio::runtime::Handle::try_current()
                .ok()
                .or_else(|| runtime.cloned())
            {
                Some(handle) => handle.spawn(task),
                None => unreachable!("block_on above already required a runtime"),
            }
        });
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| ctx.enter_blocking(body)));
        if let Some(task) = keep_alive {
            task.abort();
        }
        block_on(runtime, guard.release());
        match result {
            Ok(out) => Ok(LockOutcome::Executed(out)),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Drives `body` (with keep-alive if configured) and releases the lease afterwards,
    /// re-raising a panic of the body after the release.
    async fn run_holding<T>(
        &self,
        config: &LockConfiguration,
        ctx: &JobContext,
        mut guard: LeaseGuard,
        body: impl Future<Output = T>,
    ) -> T {
        let body = AssertUnwindSafe(body).catch_unwind();
        let result = if config.keep_alive() {
            let keep_alive = keep_alive(self.provider.clone(), ctx.clone(), config, &guard);
            tokio::select! {
                biased;
                out = body => out,
                never = keep_alive => match never {},
            }
        } else {
            body.await
        };
        guard.release().await;
        match result {
            Ok(out) => out,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// Until when a scheduled fire's release may wait for the others of its burst: its slot plus
/// the lock's release linger; none without a slot or a linger.
fn lingering(config: &LockConfiguration, due: Option<Instant>) -> Option<Instant> {
    let linger = config.release_linger();
    due.filter(|_| !linger.is_zero())
        .map(|due| later(due, linger))
}

/// `at + duration` without overflow: a deadline past what the clock can count is as good as
/// never, so it saturates about 30 years ahead (as tokio's own far-future deadline does).
/// `at + duration`, or far in the future where that overflows the clock.
pub fn later(at: tokio::time::Instant, duration: Duration) -> tokio::time::Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 24 * 3600);
    at.checked_add(duration)
        .or_else(|| at.checked_add(FAR))
        .unwrap_or(at)
}

/// Runs one provider call sent at `sent`, turning "no answer by `deadline`" into
/// [`LockError::Timeout`]: the one place every acquire, extend and release is bounded.
async fn bounded<T>(
    operation: &'static str,
    lock: &str,
    sent: tokio::time::Instant,
    deadline: tokio::time::Instant,
    call: impl Future<Output = Result<T, LockError>>,
) -> Result<T, LockError> {
    tokio::time::timeout_at(deadline, call)
        .await
        .unwrap_or_else(|_| {
            Err(LockError::Timeout {
                operation,
                lock: lock.to_owned(),
                after: deadline.saturating_duration_since(sent),
            })
        })
}
