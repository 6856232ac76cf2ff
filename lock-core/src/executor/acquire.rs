//! Taking the lock: reentrancy, the bounded acquire call, what a grant or refusal means, and
//! for a fire that asked ahead of its slot, the wait for the slot.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::time::Instant;

use crate::{
    AcquireOutcome, FireSlot, JobContext, LockConfiguration, LockError, LockRequest, Refusal,
    RefusalReason,
};

use super::lease::LeaseGuard;
use super::recover::HeldLeases;
use super::{LockingTaskExecutor, bounded, later};

// Lives on the stack for one call; boxing the lease would allocate once per fire.
#[allow(clippy::large_enum_variant)]
pub(super) enum Acquired {
    Reentrant,
    Skipped(Refusal),
    Lease(LeaseGuard, JobContext),
}

impl LockingTaskExecutor {
    /// Takes the lock for one call, or says why the body runs without (reentrant) or not at all.
    ///
    /// `due`: a scheduled fire's slot on the monotonic clock. A fire that asks before it (the
    /// scheduler's acquire-ahead) and is refused because a lease is still held, while its slot
    /// has not run, asks once more when the slot comes: the lease may end before the slot (a
    /// previous run's body, its `lock_at_least_for`), and the slot must not be lost to asking
    /// early. Every refusal's lag is recorded here, a grant's at its body's start.
    pub(super) async fn acquire(
        &self,
        config: &LockConfiguration,
        slot: Option<FireSlot>,
        due: Option<Instant>,
    ) -> Result<Acquired, LockError> {
        if let Some(ctx) = JobContext::current()
            && ctx.lock_name() == config.name()
        {
            tracing::trace!(
                lock = config.name(),
                "lock already held by this body; reentrant call"
            );
            return Ok(Acquired::Reentrant);
        }
        let mut request = LockRequest {
            name: config.shared_name().clone(),
            locked_by: self.instance_id.clone(),
            lock_at_most_for: config.lock_at_most_for(),
            slot,
            max_slot_lead: self.max_slot_lead,
            give_up_at: None,
        };
        let metrics = config.metrics();
        // Only the first answer, and only one asked ahead of the slot, may be asked again.
        let mut early = due.filter(|&due| Instant::now() < due);
        // An orphan lease in this instance's name, released, is asked for again once.
        let mut ask_after_orphan = true;
        let (outcome, requested_at) = loop {
            metrics.attempt();
            // The lease is measured from before the request: it cannot end later than this +
            // at_most.
            let in_flight = self.own_grants.begin(&request.locked_by, &request.name);
            let requested_at = Instant::now();
            // One deadline for the acquire and its read-back: a failed acquire is reported
            // within the operation timeout.
            let deadline = later(requested_at, self.operation_timeout);
            request.give_up_at = give_up_at(slot, due, deadline);
            let result = bounded("acquire", config.name(), requested_at, deadline, async {
                match (&self.acquires, request.slot) {
                    (Some(batch), Some(_)) => batch.submit(request.clone()).await,
                    _ => self.provider.as_ref().acquire(&request).await,
                }
            })
            .await;
            if due.is_some() && result.is_ok() {
                // How long a decision takes: the next fires ask that much ahead (`ahead.rs`).
                self.answer_times.record(requested_at, Instant::now());
            }
            let recovered = self
                .recover_lost_grant(&request, result, deadline, config.lock_at_least_for())
                .await;
            let result = recovered.result;
            if let Ok(AcquireOutcome::Acquired(lease)) = &result {
                self.own_grants.saw(&request.name, lease.fence());
                // Before the in-flight count drops: a sibling executor's acquire must never
                // take this fresh grant for an orphan.
                HeldLeases::hold(lease);
            }
            drop(in_flight);
            if recovered.orphan_released && std::mem::take(&mut ask_after_orphan) {
                continue;
            }
            let outcome = match result {
                Ok(outcome) => outcome,
                Err(error) => {
                    metrics.error();
                    tracing::error!(lock = config.name(), slot = ?slot.map(|s| s.instant()), error = &error as &dyn std::error::Error, "lock acquire failed; body not run");
                    return Err(error);
                }
            };
            let ask_again_at = early.take().filter(|&at| {
                Instant::now() < at
                    && matches!(&outcome, AcquireOutcome::Refused(r) if may_be_free_at_slot(r, slot))
            });
            let Some(at) = ask_again_at else {
                break (outcome, requested_at);
            };
            tracing::trace!(lock = config.name(), slot = ?slot.map(|s| s.instant()), "lock held ahead of the slot; asking again at the slot");
            // Shutdown before the slot: the loop would not have fired it at all.
            tokio::select! {
                biased;
                _ = self.shutdown.cancelled() => break (outcome, requested_at),
                _ = tokio::time::sleep_until(at) => {}
            }
        };
        if let (AcquireOutcome::Refused(_), Some(due)) = (&outcome, due) {
            metrics.fire_lag(Instant::now().saturating_duration_since(due));
        }
        match outcome {
            AcquireOutcome::Acquired(lease) => {
                metrics.acquired();
                tracing::Span::current().record("fence", lease.fence());
                tracing::debug!(lock = config.name(), fence = lease.fence(), slot = ?slot.map(|s| s.instant()), instance = &*self.instance_id, "lock acquired");
                let cancel = self.shutdown.child_token();
                let ctx = JobContext::new(lease.clone(), cancel);
                metrics.started();
                let guard = LeaseGuard {
                    provider: self.provider.clone(),
                    releases: self.releases.clone(),
                    lease: Some(lease),
                    lock_at_least_for: config.lock_at_least_for(),
                    metrics: metrics.clone(),
                    started: Instant::now(),
                    requested_at,
                    operation_timeout: self.operation_timeout,
                    linger_until: None,
                };
                Ok(Acquired::Lease(guard, ctx))
            }
            AcquireOutcome::Refused(refusal) => {
                metrics.skipped();
                if refusal.reason == RefusalReason::SlotInFuture
                    && let Some(slot) = slot
                {
                    let ahead = refusal.database_now.map(|now| slot.instant() - now);
                    tracing::warn!(
                        lock = config.name(),
                        slot = %slot,
                        database_now = ?refusal.database_now,
                        ahead_seconds = ahead.map(|a| a.as_seconds_f64()),
                        max_slot_lead = ?self.max_slot_lead,
                        "refused: this fire's slot is {} ahead of the database's clock (more than \
                         the {:?} allowed); this instance's idea of the database's time is wrong \
                         (or the database's clock stepped back): nothing was written, the slot is \
                         not spent",
                        ahead.map_or_else(|| "too far".to_owned(), |a| format!("{:.3} s", a.as_seconds_f64())),
                        self.max_slot_lead,
                    );
                }
                // Answered in time, yet decided past give_up_at: this instance's estimate of the
                // database's clock is behind it (or the answer took the whole timeout).
                if refusal.reason == RefusalReason::TooLate {
                    tracing::warn!(
                        lock = config.name(),
                        slot = ?slot.map(|s| s.instant()),
                        database_now = ?refusal.database_now,
                        give_up_at = ?request.give_up_at,
                        "refused: the database decided this acquire after its sender's deadline \
                         (give_up_at); nothing was written and the fire is skipped"
                    );
                }
                // A later slot already ran: an instance of an older version labelled slots by a
                // clock that is ahead, or left a last_fire in the future. Each slot still runs
                // at most once, but this instance is refused until the database reaches that
                // last_fire: say so loudly, with the repair.
                if refusal.reason == RefusalReason::SlotAlreadyRun
                    && let (Some(slot), Some(last)) = (slot, refusal.last_fire)
                    && last > slot.instant()
                {
                    tracing::warn!(
                        lock = config.name(),
                        slot = %slot,
                        last_fire = %last,
                        ahead_by = ?(last - slot.instant()).to_std().unwrap_or_default(),
                        "a later slot already ran under this lock: its last_fire is ahead of this fire's slot (an older version on a host whose clock is ahead?); this fire is skipped; `lockctl reset-slot NAME --force` repairs a last_fire in the future"
                    );
                }
                tracing::debug!(
                    lock = config.name(),
                    slot = ?slot.map(|s| s.instant()),
                    reason = ?refusal.reason,
                    locked_by = refusal.locked_by.as_deref(),
                    lock_until = ?refusal.lock_until,
                    "lock not acquired; skipped"
                );
                Ok(Acquired::Skipped(refusal))
            }
        }
    }

    /// Waits for a scheduled fire's slot (`due`, on the monotonic clock) when its lock was
    /// granted ahead of it, records how late the body starts after the slot, and returns the
    /// body's context. The caller counts the run's duration (`scheduled_job_duration_seconds`)
    /// from then, not from the grant: the wait is not the job's.
    ///
    /// A grant that came back more than `grace` (the job's `misfire_grace`) after the slot is
    /// given back at once, and how late it came is returned: the body never starts later than
    /// that after its slot (a database that froze, then decided). The slot stays spent: the
    /// database wrote it as run, and the fire counts as missed.
    ///
    /// A fire granted before shutdown began whose slot comes after it still runs: the slot is
    /// taken (every other instance was refused it), so only this body can run it. It starts
    /// with the shutdown's `cancelled()` already resolved (its context's signal is a child of
    /// the shutdown's), exactly like any body running when shutdown began, and the shutdown
    /// waits for it as for those: a body that honours the signal ends at once and its lease is
    /// released.
    pub(super) async fn at_slot(
        &self,
        config: &LockConfiguration,
        (due, grace): (Option<Instant>, Option<Duration>),
        guard: &mut LeaseGuard,
        ctx: JobContext,
    ) -> Result<JobContext, Duration> {
        let Some(due) = due else { return Ok(ctx) };
        let now = Instant::now();
        if let Some(grace) = grace
            && now > later(due, grace)
        {
            let late_by = now.saturating_duration_since(due);
            config.metrics().fire_lag(late_by);
            tracing::debug!(
                lock = config.name(),
                fence = ctx.fence(),
                ?late_by,
                ?grace,
                "lock granted later than misfire_grace after the slot; given back, body not run"
            );
            // Nothing ran under it: no `lock_at_least_for` to keep.
            guard.lock_at_least_for = Duration::ZERO;
            guard.release().await;
            return Err(late_by);
        }
        if now < due {
            tokio::time::sleep_until(due).await;
        }
        config
            .metrics()
            .fire_lag(Instant::now().saturating_duration_since(due));
        Ok(ctx)
    }
}

/// When the sender of an acquire for `slot` gives up, on the database's clock: the acquire's
/// `deadline` on the monotonic clock, carried over by the one instant known on both clocks,
/// `due` (when the database's clock reaches the slot): `slot + (deadline - due)`, signed. A
/// fire without a slot or without `due` (a direct call) has none: see
/// [`LockRequest::give_up_at`].
fn give_up_at(
    slot: Option<FireSlot>,
    due: Option<Instant>,
    deadline: Instant,
) -> Option<DateTime<Utc>> {
    let (slot, due) = (slot?.instant(), due?);
    if deadline >= due {
        let ahead = TimeDelta::from_std(deadline - due).ok()?;
        slot.checked_add_signed(ahead)
    } else {
        let behind = TimeDelta::from_std(due - deadline).ok()?;
        slot.checked_sub_signed(behind)
    }
}

/// Whether a lock refused before its slot may still be free when the slot comes: refused as
/// held (or for a reason the provider could not tell) while its last run, as far as the
/// refusal shows, is older than this slot. A slot already run (by the instance that won it
/// ahead, say) or too far ahead is final.
fn may_be_free_at_slot(refusal: &Refusal, slot: Option<FireSlot>) -> bool {
    let slot_run = matches!(
        (refusal.last_fire, slot),
        (Some(last), Some(slot)) if last >= slot.instant()
    );
    matches!(refusal.reason, RefusalReason::Held | RefusalReason::Unknown) && !slot_run
}
