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

use super::runner::JobRunner;
use super::status::RunOutcome;
use lock_core::{FireKind, FireSlot};

/// A run of fires the database did not answer, as the job's status keeps it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Outage {
    /// The first fire that got no answer: its slot, or when it was tried (fixed delay).
    since: DateTime<Utc>,
    /// The `WARN` was given (an `INFO` follows when the job fires again).
    warned: bool,
}

impl JobRunner {
    /// After a scheduled or catch-up fire: starts, extends or ends the job's outage.
    pub(super) fn note_outage(&self, slot: Option<FireSlot>, kind: FireKind, outcome: &RunOutcome) {
        if kind == FireKind::Manual || *outcome == RunOutcome::Paused {
            return;
        }
        let now = self.clock.now();
        let mut progress = self.state.lock();
        if let RunOutcome::LockFailed(error) = outcome {
            let outage = progress.outage.get_or_insert(Outage {
                since: slot.map_or(now, |slot| slot.instant()).min(now),
                warned: false,
            });
            let down = now - outage.since;
            let two_periods = self.period(now).checked_mul(2).unwrap_or(TimeDelta::MAX);
            if outage.warned || down <= two_periods {
                return;
            }
            outage.warned = true;
            drop(progress);
            tracing::warn!(
                job = self.job.name(),
                down_for = ?down.to_std().unwrap_or_default(),
                error = error.as_str(),
                "job could not fire for more than two periods: the database did not answer its \
                 lock's acquire; it fires again when the database answers"
            );
        } else if let Some(outage) = progress.outage.take()
            && outage.warned
        {
            drop(progress);
            tracing::info!(
                job = self.job.name(),
                down_for = ?(now - outage.since).to_std().unwrap_or_default(),
                "job fires again: the database answers its lock's acquire"
            );
        }
    }

    /// One period of the job's trigger at `now`: the gap between its next two slots, or a
    /// fixed delay's delay (at least a millisecond).
    fn period(&self, now: DateTime<Utc>) -> TimeDelta {
        let trigger = self.job.trigger();
        let period = match trigger.spec().kind.firing() {
            Firing::AfterRun { delay } => TimeDelta::from_std(delay).unwrap_or(TimeDelta::MAX / 4),
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
}
