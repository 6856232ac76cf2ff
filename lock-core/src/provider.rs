//! The provider contract: how a lease is taken, extended and released in some shared store.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};

use crate::LockError;

/// The scheduled instant of one fire of a job, in UTC, truncated to milliseconds (the
/// precision of the lock table's `TIMESTAMP(3)` columns).
///
/// Every instance computes the same slot for the same fire, whatever its own clock says, so
/// the lock table can remember the last slot run (`last_fire`) and refuse it a second time.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use lock_core::FireSlot;
///
/// let at = Utc.with_ymd_and_hms(2026, 11, 29, 1, 5, 0).unwrap() + chrono::TimeDelta::microseconds(1_999);
/// let slot = FireSlot::new(at);
/// assert_eq!(slot.instant().timestamp_subsec_micros(), 1_000);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FireSlot(DateTime<Utc>);

impl FireSlot {
    /// A slot at `instant`, truncated to whole milliseconds.
    pub fn new(instant: DateTime<Utc>) -> Self {
        let ms = instant
            .duration_trunc(TimeDelta::milliseconds(1))
            .unwrap_or(instant);
        FireSlot(ms)
    }

    /// A slot from milliseconds since the Unix epoch.
    ///
    /// ```
    /// let slot = lock_core::FireSlot::from_unix_millis(1_700_000_000_123).unwrap();
    /// assert_eq!(slot.unix_millis(), 1_700_000_000_123);
    /// ```
    pub fn from_unix_millis(ms: i64) -> Option<Self> {
        DateTime::from_timestamp_millis(ms).map(FireSlot)
    }

    /// The slot's instant (UTC, millisecond precision).
    pub fn instant(self) -> DateTime<Utc> {
        self.0
    }

    /// Milliseconds since the Unix epoch.
    pub fn unix_millis(self) -> i64 {
        self.0.timestamp_millis()
    }
}

impl fmt::Display for FireSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.format("%Y-%m-%dT%H:%M:%S%.3fZ"))
    }
}

/// One attempt to take a lock, as handed to [`LockProvider::acquire`].
///
/// Cloning is cheap: the strings are shared.
#[derive(Clone, Debug)]
pub struct LockRequest {
    /// The lock name (already validated: 1 to 64 bytes).
    pub name: Arc<str>,
    /// Who asks: the instance id, written to `locked_by`.
    pub locked_by: Arc<str>,
    /// The lease lasts `db_now + lock_at_most_for` unless extended or released.
    pub lock_at_most_for: Duration,
    /// The scheduled slot of this fire, if any. When set, the lock may only be taken if the
    /// row's `last_fire` is NULL or earlier than the slot, and `last_fire` is then set to it.
    /// `None` (direct calls, fixed-delay jobs) means plain mutual exclusion.
    pub slot: Option<FireSlot>,
    /// How far ahead of the provider's own now `slot` may be (default
    /// [`DEFAULT_MAX_SLOT_LEAD`]). A later slot is refused with
    /// [`RefusalReason::SlotInFuture`] and nothing is written, so an instance whose clock runs
    /// ahead can never claim (and spend) slots that the database has not reached yet.
    pub max_slot_lead: Duration,
    /// The instant, on the provider's clock (the database's), after which the sender will have
    /// given up waiting for the answer (its operation timeout has passed).
    ///
    /// A provider decides the acquire against its own current time at the moment of the
    /// decision (not at the start of its transaction) and, past this instant, refuses with
    /// [`RefusalReason::TooLate`] writing nothing: no lease, no `last_fire`. A grant nobody
    /// waits for any more would hold the lock for nobody until `lock_at_most_for`.
    ///
    /// The executor sets it for a scheduler's fire, whose slot it knows on both clocks; direct
    /// calls and requests built by hand send `None` (no deadline: a late grant can still
    /// happen, and is then released by its own instance at its next acquire of the name).
    pub give_up_at: Option<DateTime<Utc>>,
}

/// The default [`LockRequest::max_slot_lead`]: the scheduler fires by its estimate of the
/// database's clock (error: half a round trip), so a correct fire is never more than
/// milliseconds ahead; five seconds leaves room for a refresh that has not yet seen a step of
/// the database clock, and is still short enough that a wrong slot is never written.
pub const DEFAULT_MAX_SLOT_LEAD: Duration = Duration::from_secs(5);

/// A lock held by this instance: what release and extend need to prove ownership.
///
/// Release and extend match the row's `name`, `locked_by` and, where the table has the column,
/// `fence`, so a lease that expired and was taken again (even by this same instance, for a
/// later fire) is never released or extended by a stale holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    name: Arc<str>,
    locked_by: Arc<str>,
    fence: u64,
    slot: Option<FireSlot>,
}

impl Lease {
    /// The lease granted for `request` with fencing token `fence`. Called by providers.
    ///
    /// ```
    /// use lock_core::{DEFAULT_MAX_SLOT_LEAD, Lease, LockRequest};
    /// use std::time::Duration;
    /// let request = LockRequest {
    ///     name: "job".into(),
    ///     locked_by: "host:1:abcd".into(),
    ///     lock_at_most_for: Duration::from_secs(10),
    ///     slot: None,
    ///     max_slot_lead: DEFAULT_MAX_SLOT_LEAD,
    ///     give_up_at: None,
    /// };
    /// let lease = Lease::granted(&request, 7);
    /// assert_eq!((lease.name(), lease.fence()), ("job", 7));
    /// ```
    pub fn granted(request: &LockRequest, fence: u64) -> Self {
        Lease {
            name: request.name.clone(),
            locked_by: request.locked_by.clone(),
            fence,
            slot: request.slot,
        }
    }

    /// The lock name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lock name, shared.
    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// The owner, shared.
    pub(crate) fn locked_by_shared(&self) -> Arc<str> {
        self.locked_by.clone()
    }

    /// The owner written to `locked_by`.
    pub fn locked_by(&self) -> &str {
        &self.locked_by
    }

    /// The fencing token: strictly increasing per lock name across all instances (0 on a
    /// table without the `fence` column).
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The slot this lease was taken for, if any.
    pub fn slot(&self) -> Option<FireSlot> {
        self.slot
    }
}

/// Why an acquire did not grant the lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalReason {
    /// Another lease (maybe this instance's own, for another fire) has not expired yet.
    Held,
    /// The lease is free but this slot, or a later one, has already run.
    SlotAlreadyRun,
    /// The provider could not tell which of the two (it did not read the row).
    Unknown,
    /// The slot is more than [`LockRequest::max_slot_lead`] ahead of the provider's clock: the
    /// claiming instance's idea of the time is ahead of the database's. Nothing was written.
    SlotInFuture,
    /// The provider decided the acquire after the request's [`LockRequest::give_up_at`]: its
    /// sender no longer waits for the answer, so a grant would be held by nobody. Nothing was
    /// written.
    TooLate,
}

/// What a refused acquire learned about the current holder, for the `skipped` event.
///
/// Providers fill it from the same round trip as the refused acquire where they can do so
/// without writing; fields they could not learn are `None`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// Why the lock was not granted.
    pub reason: RefusalReason,
    /// Who holds (or last held) the lock.
    pub locked_by: Option<String>,
    /// Until when, by the provider's clock.
    pub lock_until: Option<DateTime<Utc>>,
    /// The last slot run under this name.
    pub last_fire: Option<DateTime<Utc>>,
    /// The provider's clock when it refused, where the reply carried it (always for
    /// [`RefusalReason::SlotInFuture`], so the warning can say how far ahead the slot was).
    pub database_now: Option<DateTime<Utc>>,
}

impl Refusal {
    /// A refusal that knows nothing but its reason.
    pub fn new(reason: RefusalReason) -> Self {
        Refusal {
            reason,
            locked_by: None,
            lock_until: None,
            last_fire: None,
            database_now: None,
        }
    }

    /// The refusal of a slot more than the request's lead ahead of `database_now`.
    ///
    /// ```
    /// use lock_core::{Refusal, RefusalReason};
    /// let refusal = Refusal::slot_in_future(chrono::Utc::now());
    /// assert_eq!(refusal.reason, RefusalReason::SlotInFuture);
    /// ```
    pub fn slot_in_future(database_now: DateTime<Utc>) -> Self {
        Refusal {
            database_now: Some(database_now),
            ..Refusal::new(RefusalReason::SlotInFuture)
        }
    }

    /// The refusal of a request decided after its [`LockRequest::give_up_at`].
    ///
    /// ```
    /// use lock_core::{Refusal, RefusalReason};
    /// let refusal = Refusal::too_late(chrono::Utc::now());
    /// assert_eq!(refusal.reason, RefusalReason::TooLate);
    /// ```
    pub fn too_late(database_now: DateTime<Utc>) -> Self {
        Refusal {
            database_now: Some(database_now),
            ..Refusal::new(RefusalReason::TooLate)
        }
    }
}

impl LockRequest {
    /// Whether this request's slot is more than its lead ahead of `now` (the provider's clock):
    /// the check every provider's acquire applies, here for providers that decide in Rust.
    ///
    /// ```
    /// use chrono::{TimeDelta, Utc};
    /// use lock_core::{DEFAULT_MAX_SLOT_LEAD, FireSlot, LockRequest};
    /// use std::time::Duration;
    /// let now = Utc::now();
    /// let request = |ahead: i64| LockRequest {
    ///     name: "job".into(),
    ///     locked_by: "me".into(),
    ///     lock_at_most_for: Duration::from_secs(10),
    ///     slot: Some(FireSlot::new(now + TimeDelta::seconds(ahead))),
    ///     max_slot_lead: DEFAULT_MAX_SLOT_LEAD,
    ///     give_up_at: None,
    /// };
    /// assert!(!request(5).slot_too_far_ahead(now));
    /// assert!(request(6).slot_too_far_ahead(now));
    /// ```
    pub fn slot_too_far_ahead(&self, now: DateTime<Utc>) -> bool {
        let lead = TimeDelta::from_std(self.max_slot_lead).unwrap_or(TimeDelta::MAX);
        match (self.slot, now.checked_add_signed(lead)) {
            (Some(slot), Some(limit)) => slot.instant() > limit,
            _ => false,
        }
    }

    /// Whether `now` (the provider's clock at the moment of the decision) is past this
    /// request's [`give_up_at`](Self::give_up_at): the check every provider's acquire applies
    /// before granting, here for providers that decide in Rust.
    ///
    /// ```
    /// use chrono::{TimeDelta, Utc};
    /// use lock_core::testkit::request;
    /// use std::time::Duration;
    /// let now = Utc::now();
    /// let mut asked = request(&"job".into(), "me", Duration::from_secs(10), None);
    /// assert!(!asked.too_late(now));
    /// asked.give_up_at = Some(now - TimeDelta::milliseconds(1));
    /// assert!(asked.too_late(now));
    /// ```
    pub fn too_late(&self, now: DateTime<Utc>) -> bool {
        self.give_up_at.is_some_and(|give_up_at| now > give_up_at)
    }
}

/// The result of [`LockProvider::acquire`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcquireOutcome {
    /// The lock is ours until released, extended or expired.
    Acquired(Lease),
    /// Somebody else holds it, or this slot already ran.
    Refused(Refusal),
}

/// One row of the lock table, as shown to operators by [`LockProvider::list_locks`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockRecord {
    /// The lock name.
    pub name: String,
    /// When the current (or last) lease ends.
    pub lock_until: DateTime<Utc>,
    /// When the current (or last) lease was taken.
    pub locked_at: DateTime<Utc>,
    /// Who took it.
    pub locked_by: String,
    /// The last fencing token handed out (0 without the `fence` column).
    pub fence: u64,
    /// The last slot run (None without the `last_fire` column or for slot-less locks).
    pub last_fire: Option<DateTime<Utc>>,
    /// Whether the lease is still in force, by the provider's clock (`lock_until > now`).
    pub held: bool,
}

/// A store of named leases shared by every instance of a service: a database table, or memory.
///
/// The trait is object-safe (`Arc<dyn LockProvider>` works) and every method takes all times
/// from the provider's own clock (for databases, the database server's), never from the
/// caller's: a request carries durations and a slot, not "now".
///
/// Implementations must guarantee, for one lock name:
/// - **exclusion**: at most one unexpired lease at a time;
/// - **expiry**: a lease ends `lock_at_most_for` after it was taken or last extended;
/// - **owner check**: [`extend`](Self::extend) and [`release`](Self::release) only touch a row
///   whose `name`, `locked_by` and `fence` match the lease;
/// - **fencing**: each grant increments the row's `fence` and returns it;
/// - **once per slot**: a request with a slot is granted only if `last_fire` is NULL or earlier,
///   and then sets `last_fire`;
/// - **no future slot**: a request whose slot is more than its `max_slot_lead` ahead of the
///   provider's now is refused ([`RefusalReason::SlotInFuture`]) and writes nothing;
/// - **no late grant**: a request decided (by the provider's clock at the moment of the
///   decision) after its `give_up_at` is refused ([`RefusalReason::TooLate`]) and writes
///   nothing;
/// - **no silent loss**: a row deleted by hand is recreated by the next acquire.
///
/// The conformance suite in `lock_core::testkit` (feature `testkit`) checks all of these.
///
/// A new backend follows the checklist "Adding a provider" in the [crate docs](crate): this
/// trait, the SQL provider kit `lock-sql`, `conformance_tests!`, the
/// `lock_providers::open` registry and the fault-test backend.
///
/// ```
/// use lock_core::{AcquireOutcome, InMemoryLockProvider, LockProvider, LockRequest};
/// use std::{sync::Arc, time::Duration};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let provider: Arc<dyn LockProvider> = Arc::new(InMemoryLockProvider::new());
/// let request = LockRequest {
///     name: "sync_bill".into(),
///     locked_by: "instance-a".into(),
///     lock_at_most_for: Duration::from_secs(30),
///     slot: None,
///     max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
///     give_up_at: None,
/// };
/// let AcquireOutcome::Acquired(lease) = provider.acquire(&request).await? else { panic!() };
/// // A second acquire is refused while the lease is held ...
/// assert!(matches!(provider.acquire(&request).await?, AcquireOutcome::Refused(_)));
/// // ... and granted again after release.
/// assert!(provider.release(&lease, Duration::ZERO).await?);
/// assert!(matches!(provider.acquire(&request).await?, AcquireOutcome::Acquired(_)));
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
#[async_trait]
pub trait LockProvider: Send + Sync + 'static {
    /// Tries to take the lock described by `request`; never waits for a holder.
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError>;

    /// Decides many acquires at once: one outcome per request, in the order given, each exactly
    /// what [`acquire`](Self::acquire) would have answered for it alone (held, slot already run,
    /// slot too far ahead, fence incremented, missing row created).
    ///
    /// An `Err` applies to the whole batch: any of the requests may or may not have been
    /// granted (the executor then reads each lock back, as after a lost single reply). A
    /// provider that batches decides the requests in one round trip and locks their rows in
    /// one global order (by name), so that two instances' batches on overlapping names cannot
    /// deadlock; a request that loses still writes nothing. The names of one batch are
    /// distinct. The default loops over `acquire`, for providers without batching; they keep
    /// [`max_batch`](Self::max_batch) at 1, so the executor never sends them a batch.
    ///
    /// ```
    /// use lock_core::{AcquireOutcome, InMemoryLockProvider, LockProvider, testkit::request};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let provider = InMemoryLockProvider::new();
    /// let requests = [
    ///     request(&"a".into(), "me", Duration::from_secs(30), None),
    ///     request(&"b".into(), "me", Duration::from_secs(30), None),
    /// ];
    /// let outcomes = provider.acquire_many(&requests).await?;
    /// assert!(outcomes.iter().all(|o| matches!(o, AcquireOutcome::Acquired(_))));
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        crate::batching::acquire_each(self, requests).await
    }

    /// [`acquire_many`](Self::acquire_many), telling each outcome to `decided` (with its
    /// request's index) as soon as it is final, rather than all at the end: a provider that
    /// decides a batch in steps (PostgreSQL: first the rows it can lock at once, then those it
    /// waits for) hands the first step's grants over before the second, so that their bodies
    /// do not wait for other instances' transactions. On `Ok`, every request was told exactly
    /// once; an `Err` applies to the requests not told yet. The default tells every outcome of
    /// `acquire_many` when it returns.
    ///
    /// ```
    /// use lock_core::{AcquireOutcome, InMemoryLockProvider, LockProvider, testkit::request};
    /// use std::sync::Mutex;
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let provider = InMemoryLockProvider::new();
    /// let requests = [
    ///     request(&"a".into(), "me", Duration::from_secs(30), None),
    ///     request(&"a".into(), "me", Duration::from_secs(30), None),
    /// ];
    /// let told = Mutex::new(Vec::new());
    /// provider
    ///     .acquire_many_each(&requests, &|at, outcome| told.lock().unwrap().push((at, outcome)))
    ///     .await?;
    /// let told = told.into_inner().unwrap();
    /// assert!(matches!(told[..], [(0, AcquireOutcome::Acquired(_)), (1, AcquireOutcome::Refused(_))]));
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    async fn acquire_many_each(
        &self,
        requests: &[LockRequest],
        decided: &(dyn Fn(usize, AcquireOutcome) + Send + Sync),
    ) -> Result<(), LockError> {
        for (at, outcome) in self.acquire_many(requests).await?.into_iter().enumerate() {
            decided(at, outcome);
        }
        Ok(())
    }

    /// Ends many leases at once: one result per lease, in the order given, each exactly what
    /// [`release`](Self::release) would have answered (`lock_until = max(now, locked_at +
    /// lock_at_least_for)` of its own pair; owner- and fence-checked). An `Err` applies to the
    /// whole batch. The default loops over `release`.
    async fn release_many(&self, leases: &[(Lease, Duration)]) -> Result<Vec<bool>, LockError> {
        let mut released = Vec::with_capacity(leases.len());
        for (lease, at_least) in leases {
            released.push(self.release(lease, *at_least).await?);
        }
        Ok(released)
    }

    /// How many requests one [`acquire_many`](Self::acquire_many) or
    /// [`release_many`](Self::release_many) call decides in one round trip. The default, 1,
    /// means the provider does not batch: the executor then sends every acquire and release on
    /// its own, exactly as before batching existed.
    fn max_batch(&self) -> usize {
        1
    }

    /// Pushes the lease's end to `now + lock_at_most_for`, if the lease is still ours and has
    /// not expired. Returns `false` when it was not (the lease is lost).
    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError>;

    /// Ends the lease: `lock_until = max(now, locked_at + lock_at_least_for)`. Returns `false`
    /// when the row no longer belonged to this lease (nothing was changed).
    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError>;

    /// Every row of the lock table, sorted by name.
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError>;

    /// One lock's row, or `None` when there is no such lock.
    ///
    /// The executor reads it back after an acquire whose reply was lost (a timeout, a dropped
    /// connection, a driver's retry that was refused by its own first attempt), to find a
    /// grant that committed for it and adopt it instead of leaving the slot spent and the lock
    /// held by nobody. The default implementation picks the row out of
    /// [`list_locks`](Self::list_locks); a provider with an index on the name should read
    /// that one row.
    ///
    /// ```
    /// use lock_core::{AcquireOutcome, InMemoryLockProvider, LockProvider, LockRequest};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let provider = InMemoryLockProvider::new();
    /// let request = LockRequest {
    ///     name: "report".into(),
    ///     locked_by: "instance-a".into(),
    ///     lock_at_most_for: Duration::from_secs(30),
    ///     slot: None,
    ///     max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
    ///     give_up_at: None,
    /// };
    /// let AcquireOutcome::Acquired(lease) = provider.acquire(&request).await? else { panic!() };
    /// let record = provider.read_lock("report").await?.expect("the row exists");
    /// assert_eq!((record.locked_by.as_str(), record.fence, record.held), ("instance-a", lease.fence(), true));
    /// assert_eq!(provider.read_lock("other").await?, None);
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        Ok(self
            .list_locks()
            .await?
            .into_iter()
            .find(|record| record.name == name))
    }

    /// Ends a lock whatever its owner (an operator's action): sets `lock_until = now` and
    /// returns the row as it was before, or `None` when there is no such lock. `last_fire` and
    /// `fence` are kept, so once-per-slot and fencing still hold afterwards.
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError>;

    /// Ends a poisoned `last_fire`: sets it to `min(last_fire, now)` and returns the row as it
    /// was before, or `None` when there is no such lock (an operator's repair, `lockctl
    /// reset-slot NAME --force`).
    ///
    /// A `last_fire` in the future (written by an older version from a host whose clock was
    /// ahead) makes every instance skip the job until the database reaches it; afterwards the
    /// next slot runs. A `last_fire` in the past is left as it is, so no slot that already ran
    /// can run again. The default implementation says the provider cannot do it.
    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        Err(LockError::InvalidConfiguration(format!(
            "{} cannot reset the slot of lock {name:?}",
            self.describe()
        )))
    }

    /// The provider's current time: the same clock every statement compares leases and slots
    /// with (for a database, the server's; `SELECT` of the expression its statements use).
    ///
    /// The scheduler reads it a few times at start and then periodically, to fire by the
    /// database's clock whatever the host's says. The default, for providers whose store is
    /// on this host (like SQLite and the in-memory provider), is the host's clock.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockProvider};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let now = InMemoryLockProvider::new().database_time().await?;
    /// assert!((chrono::Utc::now() - now).num_seconds().abs() < 5);
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        Ok(Utc::now())
    }

    /// Fails when this store cannot keep once per slot: a lock table with ShedLock's four
    /// columns only has no `last_fire`, so a slot is granted every time. The error names the
    /// table and the statement (or `ensure_schema()`) that adds the column.
    ///
    /// Features that depend on a remembered slot call it before they act: [`run_once`]
    /// (whose done marker is a `last_fire`) would otherwise run its task at every call. The
    /// default, for stores that always keep slots, is `Ok`.
    ///
    /// [`run_once`]: crate::LockingTaskExecutor::run_once
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockProvider};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// InMemoryLockProvider::new().check_once_per_slot().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    async fn check_once_per_slot(&self) -> Result<(), LockError> {
        Ok(())
    }

    /// Confirms a grant the executor found by reading the row back after an acquire whose
    /// answer was lost, before it adopts it (see [`read_lock`](Self::read_lock)). A provider
    /// whose grants must be acknowledged before a body runs (Redis with replica
    /// acknowledgements: `WAIT`) checks it here, as its `acquire` does; on `Err` the lease is
    /// not adopted, and the provider has released it (by its fence) if it could. The default,
    /// for stores whose committed grant is durable as it is, is `Ok`.
    async fn confirm_grant(&self, lease: &Lease) -> Result<(), LockError> {
        let _ = lease;
        Ok(())
    }

    /// The pairs of distinct `names` that this store would keep in one row: names are meant
    /// to compare byte for byte, but a MySQL/MariaDB table made by ShedLock's DDL has a `name`
    /// column whose collation ignores case and trailing spaces (`Report`, `report `). The
    /// scheduler refuses to start such jobs, naming both; a provider that may find such a
    /// table also warns, with the `ALTER TABLE` that makes the column compare bytes. The
    /// default, for stores that compare bytes, finds none.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockProvider};
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let pairs = InMemoryLockProvider::new().names_sharing_a_row(&["Report", "report"]).await?;
    /// assert!(pairs.is_empty());
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    async fn names_sharing_a_row(
        &self,
        names: &[&str],
    ) -> Result<Vec<(String, String)>, LockError> {
        let _ = names;
        Ok(Vec::new())
    }

    /// A short description for logs and errors, e.g. `postgres table public.shedlock`.
    fn describe(&self) -> String;
}

#[async_trait]
impl<P: LockProvider + ?Sized> LockProvider for Arc<P> {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        (**self).acquire(request).await
    }
    async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        (**self).acquire_many(requests).await
    }
    async fn acquire_many_each(
        &self,
        requests: &[LockRequest],
        decided: &(dyn Fn(usize, AcquireOutcome) + Send + Sync),
    ) -> Result<(), LockError> {
        (**self).acquire_many_each(requests, decided).await
    }
    async fn release_many(&self, leases: &[(Lease, Duration)]) -> Result<Vec<bool>, LockError> {
        (**self).release_many(leases).await
    }
    fn max_batch(&self) -> usize {
        (**self).max_batch()
    }
    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        (**self).extend(lease, lock_at_most_for).await
    }
    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        (**self).release(lease, lock_at_least_for).await
    }
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        (**self).list_locks().await
    }
    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        (**self).read_lock(name).await
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        (**self).force_unlock(name).await
    }
    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        (**self).reset_slot(name).await
    }
    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        (**self).database_time().await
    }
    async fn check_once_per_slot(&self) -> Result<(), LockError> {
        (**self).check_once_per_slot().await
    }
    async fn confirm_grant(&self, lease: &Lease) -> Result<(), LockError> {
        (**self).confirm_grant(lease).await
    }
    async fn names_sharing_a_row(
        &self,
        names: &[&str],
    ) -> Result<Vec<(String, String)>, LockError> {
        (**self).names_sharing_a_row(names).await
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
}
