//! Lost grants: an acquire that committed in the store but whose answer never reached us (the
//! operation timeout fired after the commit, the connection died before the reply, a driver
//! retried and was refused by its own first attempt).
//!
//! Left alone, such a grant spends the slot and holds the lock for nobody until
//! `lock_at_most_for`. After such an outcome the executor reads the row back and adopts the
//! lease when the row is this request's grant: held by this instance, for this slot, with a
//! fence this executor has never been granted while no other acquire of the name by this
//! executor is in flight, and with the shape of a grant nobody released or extended yet
//! (`lock_until - locked_at` is exactly the `lock_at_most_for` asked). A row that is ours
//! because this slot already RAN (released, but `lock_at_least_for` keeps it held) fails the
//! fence or the shape test and is never adopted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::TimeDelta;

use crate::{AcquireOutcome, FireSlot, Lease, LockError, LockRecord, LockRequest, MAX_DURATION};

use super::{LockingTaskExecutor, bounded, later};

/// Names remembered before the memory is cleared: direct calls may use unbounded sets of lock
/// names; forgetting only weakens the fence test, the shape test still holds.
const REMEMBERED_NAMES: usize = 4096;

/// What this executor (and its clones) knows of its own grants, per lock name: the highest
/// fence it was granted, and how many of its acquires are in flight.
///
/// A row read back with a fence at or below the highest is a grant this executor has seen
/// (running now, or run and released). While another acquire of the same name is in flight,
/// a grant read back may be that one's, whose answer is on its way: neither is adopted.
#[derive(Clone, Default)]
pub(super) struct OwnGrants(Arc<Mutex<HashMap<Arc<str>, Known>>>);

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
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(known) = self.grants.lock().get_mut(&self.name) {
            known.in_flight = known.in_flight.saturating_sub(1);
        }
    }
}

impl OwnGrants {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Known>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts an acquire of `name` as in flight until the returned guard is dropped.
    pub(super) fn begin(&self, name: &Arc<str>) -> InFlight {
        let mut known = self.lock();
        if known.len() >= REMEMBERED_NAMES && !known.contains_key(name) {
            known.retain(|_, k| k.in_flight > 0);
        }
        known.entry(name.clone()).or_default().in_flight += 1;
        InFlight {
            grants: self.clone(),
            name: name.clone(),
        }
    }

    /// Records a grant of `fence` on `name`.
    pub(super) fn saw(&self, name: &Arc<str>, fence: u64) {
        let mut known = self.lock();
        let known = known.entry(name.clone()).or_default();
        known.highest_fence = Some(known.highest_fence.map_or(fence, |f| f.max(fence)));
    }

    /// Whether a grant of `fence` on `name` may be a lost one of the single acquire in flight.
    fn may_be_lost(&self, name: &str, fence: u64) -> bool {
        self.lock().get(name).is_some_and(|known| {
            known.in_flight == 1 && known.highest_fence.is_none_or(|highest| fence > highest)
        })
    }
}

impl LockingTaskExecutor {
    /// `result` of an acquire for `request`, or the lease of a grant it committed but whose
    /// answer was lost. Reads the row only after an error whose effect is unknown, or a
    /// refusal naming this instance (and this slot) as the holder; never after a clean
    /// refusal by another holder, so a losing acquire still costs one round trip.
    pub(super) async fn recover_lost_grant(
        &self,
        request: &LockRequest,
        result: Result<AcquireOutcome, LockError>,
    ) -> Result<AcquireOutcome, LockError> {
        let slot = request.slot.map(FireSlot::instant);
        let may_hide_a_grant = match &result {
            Err(LockError::Timeout { .. } | LockError::Provider { .. }) => true,
            Ok(AcquireOutcome::Refused(refusal)) => {
                refusal.locked_by.as_deref() == Some(&*request.locked_by)
                    && (slot.is_none() || refusal.last_fire == slot)
            }
            Ok(AcquireOutcome::Acquired(_)) | Err(_) => false,
        };
        if !may_hide_a_grant {
            return result;
        }
        let sent = tokio::time::Instant::now();
        let read = bounded(
            "read",
            &request.name,
            sent,
            later(sent, self.operation_timeout),
            self.provider.read_lock(&request.name),
        )
        .await;
        match read {
            Ok(Some(record)) if self.is_lost_grant(&record, request) => {
                let lease = Lease::granted(request, record.fence);
                // Held to what an answered acquire is held to (Redis: replicas acknowledged
                // it); a grant not confirmed is released by the provider and not adopted.
                let sent = tokio::time::Instant::now();
                let confirm = self.provider.confirm_grant(&lease);
                let deadline = later(sent, self.operation_timeout);
                bounded("confirm", &request.name, sent, deadline, confirm).await?;
                tracing::warn!(
                    lock = &*request.name,
                    fence = record.fence,
                    slot = ?slot,
                    outcome = ?result.as_ref().map_err(|e| e.to_string()),
                    "the acquire's answer was lost but its grant committed; adopting the lease"
                );
                Ok(AcquireOutcome::Acquired(lease))
            }
            Ok(_) => result,
            Err(error) => {
                tracing::debug!(
                    lock = &*request.name,
                    error = &error as &dyn std::error::Error,
                    "reading the lock back after a lost acquire failed"
                );
                result
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
