//! Testing jobs without a database: run a job's body once with a made-up [`JobContext`].
//!
//! [`TestFire`] builds the context a body would see at a fire (fencing token, slot, fire kind,
//! instance id, cancellation) and the state its parameters are extracted from, then runs a
//! [`Job`]'s body once with them, with no lock and no provider:
//!
//! ```standalone_crate
//! use chrono::{TimeZone, Utc};
//! use lock_scheduler::testing::{TestFire, registered_job};
//! use lock_core::JobContext;
//! use lock_scheduler::{State, scheduled, scheduler_lock};
//!
//! #[derive(Clone)]
//! struct Ledger(std::sync::Arc<std::sync::Mutex<Vec<String>>>);
//!
//! #[scheduled(cron = "0 0 2 * * *")]
//! #[scheduler_lock(name = "close_day")]
//! async fn close_day(State(ledger): State<Ledger>, ctx: JobContext) -> Result<(), String> {
//!     let day = ctx.scheduled_at().ok_or("not a scheduled fire")?;
//!     ledger.0.lock().unwrap().push(format!("{} closed with fence {}", day.date_naive(), ctx.fence()));
//!     Ok(())
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let ledger = Ledger(Default::default());
//! let job = registered_job("close_day").expect("linked into the test binary");
//! TestFire::new()
//!     .fence(42)
//!     .scheduled_at(Utc.with_ymd_and_hms(2026, 3, 1, 2, 0, 0).unwrap())
//!     .state(ledger.clone())
//!     .run_job(&job)
//!     .await?;
//! assert_eq!(*ledger.0.lock().unwrap(), ["2026-03-01 closed with fence 42"]);
//!
//! // A manual fire has no slot: this body refuses it, and its error is its message.
//! let manual = TestFire::new().manual().state(ledger).run_job(&job).await;
//! assert_eq!(manual.unwrap_err().message(), "not a scheduled fire");
//! # Ok::<(), lock_core::JobError>(()) }).unwrap();
//! ```
//!
//! Code that reads [`JobContext::current`] deep down is tested with [`TestFire::run`], and
//! direct calls of `#[scheduler_lock]` functions with an executor of the test's own
//! ([`with_default_executor`](lock_core::with_default_executor)) on an
//! [`InMemoryLockProvider`](lock_core::InMemoryLockProvider).

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use lock_core::{FireKind, FireSlot, JobContext, JobError, Lease, LockRequest};

use crate::{Job, StateMap};

/// One made-up fire: the [`JobContext`] a body sees, and the state its parameters come from.
///
/// Defaults: the job's own lock name (`"test"` for [`context`](Self::context) and
/// [`run`](Self::run)), fence 1, no slot, [`FireKind::Scheduled`], instance id `"test"`, not
/// attempt 1, not cancelled, no state.
///
/// ```
/// use lock_scheduler::testing::TestFire;
/// use lock_core::{FireKind, JobContext};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let fence = TestFire::new()
///     .lock_name("export")
///     .fence(9)
///     .run(async { JobContext::current().unwrap().fence() })
///     .await;
/// assert_eq!(fence, 9);
/// let ctx = TestFire::new().manual().cancelled().context();
/// assert_eq!((ctx.fire_kind(), ctx.is_cancelled()), (FireKind::Manual, true));
/// # });
/// ```
#[derive(Debug, Default)]
#[must_use]
pub struct TestFire {
    lock_name: Option<Arc<str>>,
    fence: Option<u64>,
    slot: Option<FireSlot>,
    kind: Option<FireKind>,
    instance_id: Option<Arc<str>>,
    cancelled: bool,
    shard: Option<(u32, u32)>,
    attempt: Option<u32>,
    state: StateMap,
    /// Types given to `state` twice: refused by `run_job`, as `start()` refuses them.
    state_twice: Vec<&'static str>,
}

impl TestFire {
    /// A fire with the defaults above.
    pub fn new() -> Self {
        TestFire::default()
    }

    /// The lock name the context reports.
    pub fn lock_name(mut self, name: impl Into<Arc<str>>) -> Self {
        self.lock_name = Some(name.into());
        self
    }

    /// The fencing token ([`JobContext::fence`]).
    pub fn fence(mut self, fence: u64) -> Self {
        self.fence = Some(fence);
        self
    }

    /// The slot ([`JobContext::scheduled_at`]).
    pub fn scheduled_at(mut self, at: DateTime<Utc>) -> Self {
        self.slot = Some(FireSlot::new(at));
        self
    }

    /// The fire kind ([`JobContext::fire_kind`]).
    pub fn fire_kind(mut self, kind: FireKind) -> Self {
        self.kind = Some(kind);
        self
    }

    /// A manual run, as [`Scheduler::trigger`](crate::Scheduler::trigger) makes: kind
    /// [`FireKind::Manual`], no slot.
    pub fn manual(mut self) -> Self {
        self.kind = Some(FireKind::Manual);
        self.slot = None;
        self
    }

    /// The instance id ([`JobContext::instance_id`]).
    pub fn instance_id(mut self, id: impl Into<Arc<str>>) -> Self {
        self.instance_id = Some(id.into());
        self
    }

    /// The shard `(index, total)` ([`JobContext::shard`]), as a sharded or broadcast job's
    /// fire has it.
    ///
    /// ```
    /// let ctx = lock_scheduler::testing::TestFire::new().shard(2, 4).context();
    /// assert_eq!(ctx.shard(), Some((2, 4)));
    /// ```
    pub fn shard(mut self, index: u32, total: u32) -> Self {
        self.shard = Some((index, total));
        self
    }

    /// The attempt ([`JobContext::attempt`]), as a job with `retries` sees it on its retries:
    /// 1 for the first run, 2 for the first retry, and so on. The retry path of a body
    /// (what it does differently when it runs again) is tested with it.
    ///
    /// ```
    /// use lock_core::JobContext;
    /// use lock_scheduler::testing::TestFire;
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let resumed = TestFire::new()
    ///     .attempt(2)
    ///     .run(async { JobContext::current().unwrap().attempt() > 1 })
    ///     .await;
    /// assert!(resumed);
    /// # });
    /// ```
    ///
    /// # Panics
    ///
    /// When `attempt` is 0: attempts count from 1.
    pub fn attempt(mut self, attempt: u32) -> Self {
        assert!(
            attempt >= 1,
            "TestFire::attempt({attempt}): attempts count from 1"
        );
        self.attempt = Some(attempt);
        self
    }

    /// Starts the body with [`JobContext::cancelled`] already resolved (lease lost or
    /// shutting down), to test that it stops early.
    pub fn cancelled(mut self) -> Self {
        self.cancelled = true;
        self
    }

    /// Registers `value` for [`State<T>`](crate::State) parameters, as
    /// [`SchedulerBuilder::state`](crate::SchedulerBuilder::state) does.
    pub fn state<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        if self.state.insert(value).is_err() {
            self.state_twice.push(std::any::type_name::<T>());
        }
        self
    }

    /// The context a body of this fire sees.
    pub fn context(&self) -> JobContext {
        self.context_for("test")
    }

    fn context_for(&self, default_name: &str) -> JobContext {
        let name = self
            .lock_name
            .clone()
            .unwrap_or_else(|| default_name.into());
        let request = LockRequest {
            name,
            locked_by: self.instance_id.clone().unwrap_or_else(|| "test".into()),
            lock_at_most_for: lock_core::DEFAULT_LOCK_AT_MOST_FOR,
            slot: self.slot,
            max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
            give_up_at: None,
        };
        let cancel = CancellationToken::new();
        if self.cancelled {
            cancel.cancel();
        }
        let lease = Lease::granted(&request, self.fence.unwrap_or(1));
        let ctx = JobContext::with_kind(lease, cancel, FireKind::Manual)
            .for_fire(self.kind.unwrap_or(FireKind::Scheduled), self.shard);
        ctx.set_attempt(self.attempt.unwrap_or(1));
        ctx
    }

    /// Runs `future` with this fire's context visible to [`JobContext::current`] (and to
    /// [`assert_locked`](lock_core::assert_locked)).
    pub async fn run<F: Future>(self, future: F) -> F::Output {
        self.context().scope(future).await
    }

    /// Runs `job`'s body once with this fire's context and state, with no lock taken.
    ///
    /// `Ok(())` when it returned `()` or `Ok(())`; otherwise its error by its message chain,
    /// as the scheduler logs it and the run history keeps it (an `anyhow` error's contexts
    /// and cause, `"outer: inner: root"`, with no backtrace). A panic of the body continues
    /// in the caller. Fails without running the body when its parameters need state this
    /// fire lacks, with `start()`'s message.
    pub async fn run_job(self, job: &Job) -> Result<(), JobError> {
        if !self.state_twice.is_empty() {
            return Err(JobError::new(format!(
                "registered twice with .state(..): {}",
                self.state_twice.join(", ")
            )));
        }
        let missing: Vec<String> = job
            .missing_state(&self.state)
            .into_iter()
            .map(|need| format!("job {} needs {need}", job.name()))
            .collect();
        if !missing.is_empty() {
            return Err(JobError::new(missing.join("; ")));
        }
        let ctx = self.context_for(job.lock_name());
        job.run_body(ctx, Arc::new(self.state)).await
    }
}

/// The `#[scheduled]` job linked into this binary whose lock name (its `name = ".."`) or job
/// name (its function's path, e.g. `billing::close_day`) is `name`, or `None`.
///
/// Panics if a registered job's trigger is invalid, which the macro rules out.
pub fn registered_job(name: &str) -> Option<Job> {
    crate::registered_jobs()
        .expect("#[scheduled] triggers are checked at compile time")
        .into_iter()
        .find(|job| job.lock_name() == name || job.name() == name)
}
