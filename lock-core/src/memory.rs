//! A provider that keeps leases in this process's memory.

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use tokio::time::Instant;

use crate::{
    AcquireOutcome, FireSlot, Lease, LockError, LockProvider, LockRecord, LockRequest,
    MAX_DURATION, Refusal, RefusalReason, validate_lock_name,
};

/// Leases in process memory, with the full semantics of the database providers (owner check,
/// fencing, once-per-slot, `lock_at_least_for`) on a monotonic clock.
///
/// Use it for tests, for a single process whose jobs must not overlap, or for several
/// `Scheduler`s in one process. It does not coordinate separate processes:
/// use a database provider for that.
///
/// ```
/// use lock_core::{InMemoryLockProvider, LockConfiguration, LockOutcome, LockingTaskExecutor};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
/// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
/// let outcome = executor.execute_with_lock(&config, async { 40 + 2 }).await?;
/// assert_eq!(outcome, LockOutcome::Executed(42));
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
#[derive(Debug)]
pub struct InMemoryLockProvider {
    rows: Mutex<HashMap<String, Row>>,
    // Maps the monotonic clock to wall time for `list_locks`.
    epoch: Instant,
    epoch_wall: DateTime<Utc>,
    /// What layers above keep beside these locks, by type (`lock-cluster`'s in-memory
    /// cluster tables).
    attachments: Attachments,
}

/// Values of other crates' types kept with a provider, one per type, shared by its users.
#[derive(Default)]
struct Attachments(Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>);

impl std::fmt::Debug for Attachments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Attachments")
    }
}

#[derive(Debug, Clone)]
struct Row {
    lock_until: Instant,
    locked_at: Instant,
    locked_by: Arc<str>,
    fence: u64,
    last_fire: Option<FireSlot>,
}

impl Default for InMemoryLockProvider {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryLockProvider {
    /// An empty lock table.
    pub fn new() -> Self {
        InMemoryLockProvider {
            rows: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
            epoch_wall: Utc::now(),
            attachments: Attachments::default(),
        }
    }

    /// The value of type `T` kept with this provider, created with `T::default()` at the first
    /// call: state a layer above keeps beside these locks for every user of the provider (the
    /// in-memory cluster tables of `lock-cluster`).
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    ///
    /// let provider = InMemoryLockProvider::new();
    /// provider.attachment::<AtomicU32>().fetch_add(1, Ordering::Relaxed);
    /// assert_eq!(provider.attachment::<AtomicU32>().load(Ordering::Relaxed), 1);
    /// ```
    pub fn attachment<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut attachments = self.attachments.0.lock().unwrap_or_else(|p| p.into_inner());
        let value = attachments
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()))
            .clone();
        value
            .downcast::<T>()
            .unwrap_or_else(|_| unreachable!("attachments are keyed by their type"))
    }

    fn rows(&self) -> MutexGuard<'_, HashMap<String, Row>> {
        // A panic while holding this lock cannot leave a row half-written (every update is a
        // single assignment), so a poisoned lock is still consistent.
        self.rows
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn wall(&self, at: Instant) -> DateTime<Utc> {
        let offset = if at >= self.epoch {
            TimeDelta::from_std(at - self.epoch).unwrap_or(TimeDelta::MAX)
        } else {
            -TimeDelta::from_std(self.epoch - at).unwrap_or(TimeDelta::MAX)
        };
        self.epoch_wall + offset
    }

    fn record(&self, name: &str, row: &Row, now: Instant) -> LockRecord {
        LockRecord {
            name: name.to_owned(),
            lock_until: self.wall(row.lock_until),
            locked_at: self.wall(row.locked_at),
            locked_by: row.locked_by.to_string(),
            fence: row.fence,
            last_fire: row.last_fire.map(FireSlot::instant),
            held: row.lock_until > now,
        }
    }
}

/// `at + duration`, the duration cut to [`MAX_DURATION`] as the database providers cut it
/// (so `Duration::MAX` holds for 1000 years instead of overflowing the clock).
fn after(at: Instant, duration: Duration) -> Instant {
    at + duration.min(MAX_DURATION)
}

fn owns(row: &Row, lease: &Lease) -> bool {
    &*row.locked_by == lease.locked_by() && row.fence == lease.fence()
}

#[async_trait]
impl LockProvider for InMemoryLockProvider {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        validate_lock_name(&request.name)?;
        let now = Instant::now();
        // This provider's clock is the host's: the same one `database_time` reports.
        if request.slot.is_some() && request.slot_too_far_ahead(self.wall(now)) {
            return Ok(AcquireOutcome::Refused(Refusal::slot_in_future(
                self.wall(now),
            )));
        }
        let mut rows = self.rows();
        // Decided now, under the table's lock: past the sender's deadline nothing is written.
        let decided_at = self.wall(Instant::now());
        if request.too_late(decided_at) {
            return Ok(AcquireOutcome::Refused(Refusal::too_late(decided_at)));
        }
        if let Some(row) = rows.get_mut(&*request.name) {
            let refusal = if row.lock_until > now {
                Some(RefusalReason::Held)
            } else if matches!((row.last_fire, request.slot), (Some(last), Some(slot)) if last >= slot)
            {
                Some(RefusalReason::SlotAlreadyRun)
            } else {
                None
            };
            if let Some(reason) = refusal {
                return Ok(AcquireOutcome::Refused(Refusal {
                    reason,
                    locked_by: Some(row.locked_by.to_string()),
                    lock_until: Some(self.wall(row.lock_until)),
                    last_fire: row.last_fire.map(FireSlot::instant),
                    database_now: Some(self.wall(now)),
                }));
            }
            row.fence += 1;
            row.locked_at = now;
            row.lock_until = after(now, request.lock_at_most_for);
            row.locked_by = request.locked_by.clone();
            if request.slot.is_some() {
                row.last_fire = request.slot;
            }
            return Ok(AcquireOutcome::Acquired(Lease::granted(request, row.fence)));
        }
        rows.insert(
            request.name.to_string(),
            Row {
                lock_until: after(now, request.lock_at_most_for),
                locked_at: now,
                locked_by: request.locked_by.clone(),
                fence: 1,
                last_fire: request.slot,
            },
        );
        Ok(AcquireOutcome::Acquired(Lease::granted(request, 1)))
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        let now = Instant::now();
        let mut rows = self.rows();
        match rows.get_mut(lease.name()) {
            Some(row) if owns(row, lease) && row.lock_until > now => {
                row.lock_until = after(now, lock_at_most_for);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        let now = Instant::now();
        let mut rows = self.rows();
        match rows.get_mut(lease.name()) {
            Some(row) if owns(row, lease) => {
                row.lock_until = now.max(after(row.locked_at, lock_at_least_for));
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        let now = Instant::now();
        let rows = self.rows();
        let mut records: Vec<_> = rows
            .iter()
            .map(|(name, row)| self.record(name, row, now))
            .collect();
        records.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(records)
    }

    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let now = Instant::now();
        let rows = self.rows();
        Ok(rows.get(name).map(|row| self.record(name, row, now)))
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let now = Instant::now();
        let mut rows = self.rows();
        Ok(rows.get_mut(name).map(|row| {
            let before = self.record(name, row, now);
            row.lock_until = now;
            before
        }))
    }

    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let now = Instant::now();
        let wall_now = FireSlot::new(self.wall(now));
        let mut rows = self.rows();
        Ok(rows.get_mut(name).map(|row| {
            let before = self.record(name, row, now);
            row.last_fire = row.last_fire.map(|last| last.min(wall_now));
            before
        }))
    }

    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        Ok(self.wall(Instant::now()))
    }

    fn describe(&self) -> String {
        "in-memory lock table".to_owned()
    }
}
