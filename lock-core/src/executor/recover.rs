//! Late and lost grants: an acquire that committed in the store but whose answer never
//! reached us (the operation timeout fired first, the connection died before the reply, a
//! driver retried and was refused by its own first attempt).
//!
//! Left alone, such a grant spends the slot and holds the lock for nobody until
//! `lock_at_most_for`. Three defences, in order:
//! - **Refused at the source.** A scheduler's fire tells the store when its sender gives up
//!   ([`LockRequest::give_up_at`], on the database's clock: `slot + (deadline - due)`), and the
//!   store refuses a grant it decides after that ([`RefusalReason::TooLate`](crate::RefusalReason::TooLate)),
//!   writing nothing. Direct calls (no slot, or no `due` instant) send no deadline.
//! - **Adopted.** After an error whose effect is unknown, or a refusal naming this instance
//!   as the holder for this very slot (a driver's retry refused by its own first attempt),
//!   the executor reads the row back, within the same deadline as the acquire (so a failed
//!   acquire is reported within the operation timeout, read-back included; when no time is
//!   left there is no read-back). It adopts the lease when the row is this request's grant:
//!   held by this instance, for this slot, with a fence this executor has never been granted
//!   while no other acquire of the name by this executor is in flight, and with the shape of a
//!   grant nobody released or extended yet (`lock_until - locked_at` is exactly the
//!   `lock_at_most_for` asked). A row that is ours because this slot already RAN (released,
//!   but `lock_at_least_for` keeps it held) fails the fence or the shape test and is never
//!   adopted.
//! - **Released by its own instance.** Where a late grant can still happen (no deadline sent,
//!   or a reply lost after the commit), and where a body's release was lost (the database
//!   went away between the body's end and the release's commit), the next acquire of the
//!   name by this instance finds a lease in its own name that nobody in this process holds:
//!   refused naming this instance, the row is held by this instance id with a fence that no
//!   executor of this process holds now ([`HeldLeases`], shared by every executor of the
//!   process, since they may share an instance id), with the shape of an untouched grant, and
//!   no other acquire of the name by this instance id is in flight. It releases that lease by
//!   fence at once, keeping the job's `lock_at_least_for` from the lease's start (so a lease
//!   already released that way is left as it is), warns naming the lock and fence, and asks
//!   again once. Instance ids are unique per process (`hostname:pid:random`; a user-set id
//!   must be unique per live process), so such a lease is held by nobody alive.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use chrono::TimeDelta;
use tokio::time::Instant;

use crate::{
    AcquireOutcome, FireSlot, Lease, LockError, LockRecord, LockRequest, MAX_DURATION,
    RefusalReason,
};

use super::{LockingTaskExecutor, bounded, later};

/// Names remembered before the memory is cleared: direct calls may use unbounded sets of lock
/// names; forgetting only weakens the fence test, the shape test still holds.
const REMEMBERED_NAMES: usize = 4096;

/// A map that forgets its idle entries once it grows past a bound: at least
/// [`REMEMBERED_NAMES`], and twice what the last clearing kept. Doubling keeps the clearing
/// amortized O(1) per insert: with a fixed bound, 10,000 jobs whose acquires are all in flight
/// at one second (none forgettable) scanned the whole map on every acquire, a tenth of a
/// burst's CPU.
struct Forgetting<K, V> {
    map: HashMap<K, V, foldhash::fast::RandomState>,
    bound: usize,
}

impl<K: std::hash::Hash + Eq, V: Default> Forgetting<K, V> {
    fn new() -> Self {
        Forgetting {
            map: HashMap::default(),
            bound: REMEMBERED_NAMES,
        }
    }

    /// The entry of `key`, inserted if new; first, when a new key would pass the bound, the
    /// entries `idle` says may go are forgotten.
    fn entry(&mut self, key: K, idle: impl Fn(&V) -> bool) -> &mut V {
        if self.map.len() >= self.bound && !self.map.contains_key(&key) {
            self.map.retain(|_, value| !idle(value));
            self.bound = REMEMBERED_NAMES.max(self.map.len() * 2);
        }
        self.map.entry(key).or_default()
    }
}

/// What this executor (and its clones) knows of its own grants, per lock name: the highest
/// fence it was granted, and how many of its acquires are in flight.
///
/// A row read back with a fence at or below the highest is a grant this executor has seen
/// (running now, or run and released). While another acquire of the same name is in flight,
/// a grant read back may be that one's, whose answer is on its way: neither is adopted.
#[derive(Clone)]
pub(super) struct OwnGrants(Arc<Mutex<Forgetting<Arc<str>, Known>>>);

impl Default for OwnGrants {
    fn default() -> Self {
        OwnGrants(Arc::new(Mutex::new(Forgetting::new())))
    }
}

#[derive(Default)]
struct Known {
    highest_fence: Option<u64>,
    in_flight: u32,
}

/// One acquire in flight (see [`OwnGrants::begin`]); ends when dropped, also when the call is
/// cancelled.
pub(super) struct InFlight {
    grants: OwnGrants,
    name: Arc<str>,
    locked_by: Arc<str>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(known) = self.grants.lock().map.get_mut(&self.name) {
            known.in_flight = known.in_flight.saturating_sub(1);
        }
        HeldLeases::update(&self.locked_by, &self.name, |known| {
            known.in_flight = known.in_flight.saturating_sub(1);
        });
    }
}

impl OwnGrants {
    fn lock(&self) -> std::sync::MutexGuard<'_, Forgetting<Arc<str>, Known>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts an acquire of `name` by `locked_by` as in flight (in this executor and in the
    /// process) until the returned guard is dropped.
    pub(super) fn begin(&self, locked_by: &Arc<str>, name: &Arc<str>) -> InFlight {
        self.lock()
            .entry(name.clone(), |k: &Known| k.in_flight == 0)
            .in_flight += 1;
        HeldLeases::update(locked_by, name, |known| known.in_flight += 1);
        InFlight {
            grants: self.clone(),
            name: name.clone(),
            locked_by: locked_by.clone(),
        }
    }

    /// Records a grant of `fence` on `name` (granted or adopted).
    pub(super) fn saw(&self, name: &Arc<str>, fence: u64) {
        let mut known = self.lock();
        let known = known.entry(name.clone(), |k: &Known| k.in_flight == 0);
        known.highest_fence = Some(known.highest_fence.map_or(fence, |f| f.max(fence)));
    }

    /// Whether a grant of `fence` on `name` may be a lost one of the single acquire in flight.
    fn may_be_lost(&self, name: &str, fence: u64) -> bool {
        self.lock().map.get(name).is_some_and(|known| {
            known.in_flight == 1 && known.highest_fence.is_none_or(|highest| fence > highest)
        })
    }
}

/// The leases of this process, per (instance id, lock name), shared by all its executors:
/// which fences are held now (granted or adopted, not yet released), the highest fence ever
/// granted here, and how many acquires are in flight.
///
/// A lease in this instance's name whose fence no executor of the process was ever granted,
/// while no other acquire of the name is in flight, was granted to nobody alive: an orphan.
/// Bounded like [`OwnGrants`]: past [`REMEMBERED_NAMES`] entries, those with nothing held or
/// in flight are forgotten. That weakens only the fence test; the shape test still tells a
/// released lease (kept by `lock_at_least_for`) from an untouched grant, unless
/// `lock_at_least_for` equals `lock_at_most_for`.
pub(super) struct HeldLeases;

#[derive(Default)]
struct Held {
    fences: Vec<u64>,
    in_flight: u32,
}

type HeldKey = (Arc<str>, Arc<str>);

static HELD: LazyLock<Mutex<Forgetting<HeldKey, Held>>> =
    LazyLock::new(|| Mutex::new(Forgetting::new()));

impl HeldLeases {
    fn update<T>(locked_by: &Arc<str>, name: &Arc<str>, change: impl FnOnce(&mut Held) -> T) -> T {
        let mut held = HELD.lock().unwrap_or_else(|p| p.into_inner());
        let key = (locked_by.clone(), name.clone());
        change(held.entry(key, |h: &Held| h.in_flight == 0 && h.fences.is_empty()))
    }

    /// `lease` is held by an executor of this process.
    pub(super) fn hold(lease: &Lease) {
        let fence = lease.fence();
        Self::update(&lease.locked_by_shared(), lease.shared_name(), |held| {
            held.fences.push(fence);
        });
    }

    /// `lease` is held no more (released, or given up).
    pub(super) fn let_go(lease: &Lease) {
        let fence = lease.fence();
        Self::update(&lease.locked_by_shared(), lease.shared_name(), |held| {
            if let Some(at) = held.fences.iter().position(|&f| f == fence) {
                held.fences.swap_remove(at);
            }
        });
    }

    /// Whether a lease of `fence` on `name` in the name of `locked_by` is held by nobody in
    /// this process while only the one acquire asking now is in flight: never granted here (a
    /// late grant), or granted and ended here with its release lost (the database went away
    /// between the body's end and the release's commit).
    fn is_orphan(locked_by: &Arc<str>, name: &Arc<str>, fence: u64) -> bool {
        Self::update(locked_by, name, |held| {
            held.in_flight == 1 && !held.fences.contains(&fence)
        })
    }
}

/// What [`LockingTaskExecutor::recover_lost_grant`] made of an acquire's answer.
pub(super) struct Recovered {
    /// The outcome: as answered, or the adopted lease of a lost grant.
    pub(super) result: Result<AcquireOutcome, LockError>,
    /// An orphan lease in this instance's name was released: ask once more.
    pub(super) orphan_released: bool,
}

impl LockingTaskExecutor {
    /// `result` of an acquire for `request`, or the lease of a grant it committed but whose
    /// answer was lost. Reads the row only after an error whose effect is unknown, or a
    /// refusal naming this instance as the holder; never after a clean refusal by another
    /// holder, so a losing acquire still costs one round trip. The read-back shares the
    /// acquire's `deadline`: past it there is no read-back, and the error is reported as it is.
    ///
    /// A row held in this instance's name that is no lost grant of this request and that no
    /// executor of this process holds is an orphan (see the module's docs): it is released
    /// by fence, and `orphan_released` tells the caller to ask again once.
    pub(super) async fn recover_lost_grant(
        &self,
        request: &LockRequest,
        result: Result<AcquireOutcome, LockError>,
        deadline: Instant,
        lock_at_least_for: Duration,
    ) -> Recovered {
        let slot = request.slot.map(FireSlot::instant);
        let (may_hide_a_grant, may_be_orphan) = match &result {
            Err(LockError::Timeout { .. } | LockError::Provider { .. }) => (true, false),
            // A clean refusal naming this instance: for this slot, the grant of a retry by the
            // driver (adopted: asking again would be refused, the slot is spent); without a
            // slot, or for another slot, a lease decided before this request, so never this
            // request's own grant (released if it is an orphan, then asked for again).
            Ok(AcquireOutcome::Refused(refusal))
                if refusal.locked_by.as_deref() == Some(&*request.locked_by) =>
            {
                (
                    slot.is_some() && refusal.last_fire == slot,
                    refusal.reason == RefusalReason::Held,
                )
            }
            Ok(AcquireOutcome::Refused(_) | AcquireOutcome::Acquired(_)) | Err(_) => (false, false),
        };
        let as_answered = |result| Recovered {
            result,
            orphan_released: false,
        };
        if !(may_hide_a_grant || may_be_orphan) || Instant::now() >= deadline {
            return as_answered(result);
        }
        let sent = Instant::now();
        let read = bounded(
            "read",
            &request.name,
            sent,
            deadline,
            self.provider.read_lock(&request.name),
        )
        .await;
        match read {
            Ok(Some(record)) if may_hide_a_grant && self.is_lost_grant(&record, request) => {
                let lease = Lease::granted(request, record.fence);
                // Held to what an answered acquire is held to (Redis: replicas acknowledged
                // it); a grant not confirmed is released by the provider and not adopted. The
                // confirmation shares the acquire's deadline.
                let sent = Instant::now();
                let confirm = self.provider.confirm_grant(&lease);
                if let Err(error) = bounded("confirm", &request.name, sent, deadline, confirm).await
                {
                    return as_answered(Err(error));
                }
                tracing::warn!(
                    lock = &*request.name,
                    fence = record.fence,
                    slot = ?slot,
                    outcome = ?result.as_ref().map_err(|e| e.to_string()),
                    "the acquire's answer was lost but its grant committed; adopting the lease"
                );
                as_answered(Ok(AcquireOutcome::Acquired(lease)))
            }
            Ok(Some(record)) if may_be_orphan && is_orphan(&record, request) => {
                let orphan_released = self
                    .release_orphan(request, &record, lock_at_least_for)
                    .await;
                Recovered {
                    result,
                    orphan_released,
                }
            }
            Ok(_) => as_answered(result),
            Err(error) => {
                tracing::debug!(
                    lock = &*request.name,
                    error = &error as &dyn std::error::Error,
                    "reading the lock back after a lost acquire failed"
                );
                as_answered(result)
            }
        }
    }

    /// Releases the orphan lease `record` (in this instance's name, held by nobody in this
    /// process) by fence, keeping the job's `lock_at_least_for` from the lease's start (as the
    /// body's own release would have: an orphan may be a lease whose body ran and whose
    /// release was lost, and releasing a lease already released that way changes nothing);
    /// whether it was released.
    async fn release_orphan(
        &self,
        request: &LockRequest,
        record: &LockRecord,
        lock_at_least_for: Duration,
    ) -> bool {
        let orphan = Lease::granted(
            &LockRequest {
                slot: None,
                ..request.clone()
            },
            record.fence,
        );
        tracing::warn!(
            lock = &*request.name,
            fence = record.fence,
            locked_by = &*request.locked_by,
            lock_until = %record.lock_until,
            "found a lease in this instance's name that nobody in this process holds (a grant \
             decided after its sender gave up, or a release that was lost); releasing it by fence"
        );
        let sent = Instant::now();
        let released = bounded(
            "release",
            &request.name,
            sent,
            later(sent, self.operation_timeout),
            self.provider.release(&orphan, lock_at_least_for),
        )
        .await;
        match released {
            Ok(released) => released,
            Err(error) => {
                tracing::warn!(
                    lock = &*request.name,
                    fence = record.fence,
                    error = &error as &dyn std::error::Error,
                    "releasing the orphan lease failed; it ends at its lock_at_most_for"
                );
                false
            }
        }
    }

    fn is_lost_grant(&self, record: &LockRecord, request: &LockRequest) -> bool {
        record.held
            && record.locked_by == *request.locked_by
            && request
                .slot
                .is_none_or(|slot| record.last_fire == Some(slot.instant()))
            && self.own_grants.may_be_lost(&request.name, record.fence)
            && untouched(record, request.lock_at_most_for)
    }
}

/// Whether `record`, read back after a refusal naming this instance, is an orphan: held in this
/// instance's name, with the shape of a grant nobody released or extended, a fence granted to
/// no executor of this process, and no other acquire of the name in flight here.
fn is_orphan(record: &LockRecord, request: &LockRequest) -> bool {
    record.held
        && record.locked_by == *request.locked_by
        && untouched(record, request.lock_at_most_for)
        && HeldLeases::is_orphan(&request.locked_by, &request.name, record.fence)
}

/// Whether the row has the shape of a grant of `at_most` that nobody released or extended:
/// `lock_until - locked_at` is `at_most` (as providers store it: whole milliseconds, rounded
/// up, at most [`MAX_DURATION`]). A release sets `lock_until` to `max(now, locked_at +
/// lock_at_least_for)`, an extension to `now + at_most`; both change the difference.
fn untouched(record: &LockRecord, at_most: Duration) -> bool {
    let asked = at_most.min(MAX_DURATION);
    let Ok(whole_ms) = i64::try_from(asked.as_millis()) else {
        return false;
    };
    let floor = TimeDelta::milliseconds(whole_ms);
    let ceil = if asked.subsec_nanos().is_multiple_of(1_000_000) {
        floor
    } else {
        floor + TimeDelta::milliseconds(1)
    };
    let lease = record.lock_until - record.locked_at;
    floor <= lease && lease <= ceil
}

#[cfg(test)]
mod tests {
    use super::{Forgetting, REMEMBERED_NAMES};

    #[test]
    fn idle_entries_are_forgotten_past_the_bound_and_busy_ones_double_it() {
        let mut map: Forgetting<usize, u32> = Forgetting::new();
        // Busy entries (non-zero) cannot go: the bound doubles instead of scanning per insert.
        for key in 0..REMEMBERED_NAMES + 1 {
            *map.entry(key, |v| *v == 0) = 1;
        }
        assert_eq!(map.map.len(), REMEMBERED_NAMES + 1);
        assert_eq!(map.bound, REMEMBERED_NAMES * 2);
        // Once idle, they go at the next insert past the new bound; the busy one stays.
        for value in map.map.values_mut() {
            *value = 0;
        }
        *map.entry(0, |v| *v == 0) = 1;
        for key in REMEMBERED_NAMES + 1..REMEMBERED_NAMES * 2 {
            map.entry(key, |v| *v == 0);
        }
        assert_eq!(map.map.len(), REMEMBERED_NAMES * 2);
        map.entry(usize::MAX, |v| *v == 0);
        assert_eq!(map.map.len(), 2, "the busy entry and the new one");
        assert_eq!(map.bound, REMEMBERED_NAMES);
    }
}
