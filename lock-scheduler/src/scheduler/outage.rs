//! A job that cannot fire: one `WARN` per outage, naming the job and how long, and an `INFO`
//! when it fires again.
//!
//! Decisions, and why:
//! - **Counted from the first fire the database did not answer** (`RunOutcome::LockFailed`),
//!   on the database's clock, and given after more than two periods of the trigger (the gap
//!   between its next two slots; a fixed delay's delay). One period is a single missed slot,
//!   which the executor's own lines already tell; two more mean the job is down, not
//!   unlucky. The executor logs each failed acquire; this line is the one an operator alerts
//!   on, so it is given once per outage, not once per slot.
//! - **Any answer ends the outage**: the body ran, failed, or the lock was refused because
//!   another instance holds it or ran the slot (the job fired in the cluster). A pause asks
//!   nothing of the database, so it neither starts nor ends one. Manual runs do not count:
//!   they are an operator's, not the schedule's.

use chrono::{DateTime, TimeDelta, Utc};
use lock_trigger::Firing;

use super::trigger::Trigger;
use lock_core::FireSlot;

/// A run of fires the database did not answer, as the job's status keeps it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Outage {
    /// The first fire that got no answer: its slot, or when it was tried (fixed delay).
    since: DateTime<Utc>,
    /// The `WARN` was given (an `INFO` follows when the job fires again).
    warned: bool,
}

/// What a fire changed about the job's outage: what the job loop logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Change {
    /// Nothing to say.
    Quiet,
    /// The job could not fire for more than two periods, for this long: the one `WARN`.
    Down(TimeDelta),
    /// The job fires again after an outage that was warned about, which lasted this long.
    Back(TimeDelta),
}

/// After a scheduled or catch-up fire of `slot` at `now` (database clock): `answered` is
/// whether the database answered its acquire. Starts, extends or ends `outage`.
pub(super) fn note(
    outage: &mut Option<Outage>,
    answered: bool,
    slot: Option<FireSlot>,
    now: DateTime<Utc>,
    trigger: &Trigger,
) -> Change {
    if answered {
        return match outage.take() {
            Some(outage) if outage.warned => Change::Back(now - outage.since),
            _ => Change::Quiet,
        };
    }
    let outage = outage.get_or_insert(Outage {
        since: slot.map_or(now, |slot| slot.instant()).min(now),
        warned: false,
    });
    let down = now - outage.since;
    let two_periods = period(trigger, now)
        .checked_mul(2)
        .unwrap_or(TimeDelta::MAX);
    if outage.warned || down <= two_periods {
        return Change::Quiet;
    }
    outage.warned = true;
    Change::Down(down)
}

/// One period of `trigger` at `now`: the gap between its next two slots, or a fixed delay's
/// delay (at least a millisecond).
fn period(trigger: &Trigger, now: DateTime<Utc>) -> TimeDelta {
    let period = match trigger.spec().kind.firing() {
        Firing::AfterRun { delay } => TimeDelta::from_std(delay).unwrap_or(TimeDelta::MAX / 4),
        // Its parents' period is its own; no timer to be late by here.
        Firing::AfterParents => TimeDelta::MAX / 4,
        Firing::Slotted { .. } => {
            let next = trigger.next_slot(now);
            let following = next.and_then(|next| trigger.next_slot(next.instant()));
            match (next, following) {
                (Some(next), Some(following)) => following.instant() - next.instant(),
                // No more slots: no period to be late by.
                _ => TimeDelta::MAX / 4,
            }
        }
    };
    period.max(TimeDelta::milliseconds(1))
}
