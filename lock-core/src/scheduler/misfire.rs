//! Missed slots: finding the slots no instance ran, and running them as catch-up fires
//! (`misfire = "fire_once"` or `"catch_up"`).
//!
//! Decisions, and why:
//! - **The lock row decides, on the database's clock.** A slot that ran is the lock row's
//!   `last_fire` or earlier. At a job loop's start (after its initial delay) the instance reads
//!   the row once (`read_lock`, one query per job with a policy, none for `skip`): the missed
//!   slots are the trigger's slots after `last_fire` and at or before the database's now, no
//!   older than `misfire_grace` (default: one period, the gap between the trigger's next two
//!   slots). No row or no `last_fire` means the job never ran: nothing is missed. A sharded
//!   job reads each shard's row (`<name>#<index>`) and goes from the oldest, so every shard
//!   catches up (per shard, as the database decides); a broadcast job, whose ranks are known
//!   only from its first heartbeat, catches up after an outage but not at start.
//! - **Each missed slot runs at most once across the cluster** because it is acquired like any
//!   slot: the acquire's `last_fire < slot` rule refuses it to every instance after the first.
//!   Catch-up slots are acquired oldest first and before the next regular slot (which would
//!   move `last_fire` past them); `fire_once` acquires only the latest missed slot, so the older
//!   ones are coalesced into it.
//! - **`catch_up` runs at most `misfire_max` slots**, the most recent ones; the number dropped
//!   is logged. The slots are found by walking back from now, so a tiny period with a huge
//!   grace costs `misfire_max` steps, not one per slot.
//! - **An outage** (a regular fire's acquire failed with a provider error) leaves its slot
//!   missed: the instance retries the catch-up on a timer (500 ms, doubling to 5 s, no busy
//!   polling) until the database answers, adding the slots that pass meanwhile; then runs it
//!   (or them) as catch-ups. When only this instance was cut off, another one ran those
//!   slots, and the database refuses them: correct, nothing runs twice.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use lock_trigger::MisfirePolicy;

use super::Trigger;
use super::runner::JobRunner;
use super::status::RunOutcome;
use crate::{FireKind, FireSlot};

/// The first pause before retrying a catch-up after a provider error.
const RECOVER_FIRST: Duration = Duration::from_millis(500);
/// The longest pause between those retries.
const RECOVER_MAX: Duration = Duration::from_secs(5);
/// How far past `misfire_max` dropped slots are counted (for the log line).
const COUNT_DROPPED_UP_TO: usize = 10_000;

/// The missed slots to run, oldest first, and how many older ones were dropped.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Missed {
    pub(super) slots: Vec<FireSlot>,
    pub(super) dropped: usize,
}

/// The slots of `trigger` in `(after, now]`, no older than its misfire grace, that its policy
/// runs: the latest (`fire_once`) or the latest `misfire_max` (`catch_up`), oldest first.
pub(super) fn missed_slots(
    trigger: &Trigger,
    after: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Missed {
    let spec = trigger.spec();
    let keep = match spec.misfire {
        MisfirePolicy::Skip => 0,
        MisfirePolicy::FireOnce => 1,
        MisfirePolicy::CatchUp => spec.misfire_max as usize,
    };
    let none = Missed {
        slots: Vec::new(),
        dropped: 0,
    };
    let (Some(after), true) = (after, keep > 0) else {
        return none;
    };
    let oldest = now - TimeDelta::from_std(grace(trigger, now)).unwrap_or(TimeDelta::MAX / 2);
    let oldest = oldest.max(after + TimeDelta::milliseconds(1));
    let mut slots = Vec::new();
    let mut dropped = 0;
    let mut at = now;
    while let Some(slot) = trigger.slot_at_or_before(at) {
        if slot.instant() < oldest {
            break;
        }
        if slots.len() < keep {
            slots.push(slot);
        } else {
            dropped += 1;
            if dropped >= COUNT_DROPPED_UP_TO {
                break;
            }
        }
        at = slot.instant() - TimeDelta::milliseconds(1);
    }
    slots.reverse();
    Missed { slots, dropped }
}

/// `misfire_grace`, or one period of the trigger: the gap between its next two slots.
fn grace(trigger: &Trigger, now: DateTime<Utc>) -> Duration {
    if let Some(grace) = trigger.spec().misfire_grace {
        return grace;
    }
    let next = trigger.next_slot(now);
    let following = next.and_then(|next| trigger.next_slot(next.instant()));
    match (next, following) {
        (Some(next), Some(following)) => (following.instant() - next.instant())
            .to_std()
            .unwrap_or(Duration::ZERO),
        _ => Duration::ZERO,
    }
}

impl JobRunner {
    fn misfire(&self) -> MisfirePolicy {
        self.job.trigger().misfire()
    }

    /// At the job loop's start: runs the slots missed since the lock's `last_fire` (none with
    /// `skip`). Returns the last missed slot considered, so the loop continues after it.
    pub(super) async fn catch_up_at_start(&self) -> Option<FireSlot> {
        if self.misfire() == MisfirePolicy::Skip {
            return None;
        }
        let last_fire = self.last_fire_for_misfires().await?;
        let missed = missed_slots(self.job.trigger(), Some(last_fire), self.clock.now());
        self.run_missed(missed).await.1
    }

    /// The slot the job last ran, from its lock row: for a sharded job the oldest of its
    /// shards' (a shard that never ran has missed nothing), so every shard's missed slots are
    /// fired and the shards that did run them are refused by the database. `None`: never ran,
    /// or the row could not be read (logged). A broadcast job has no ranks before its first
    /// heartbeat: it catches up after an outage, not at start.
    async fn last_fire_for_misfires(&self) -> Option<DateTime<Utc>> {
        let names: Vec<String> = match self.job.distribution() {
            lock_trigger::Distribution::Single => vec![self.config.name().to_owned()],
            lock_trigger::Distribution::Shards(total) => (0..total)
                .map(|index| self.job.distribution().lock_name(self.config.name(), index))
                .collect(),
            lock_trigger::Distribution::Broadcast => return None,
        };
        let mut oldest: Option<DateTime<Utc>> = None;
        for name in &names {
            let read = self.executor.provider().read_lock(name);
            match tokio::time::timeout(self.executor.operation_timeout(), read).await {
                Ok(Ok(record)) => {
                    if let Some(last) = record.and_then(|r| r.last_fire) {
                        oldest = Some(oldest.map_or(last, |o| o.min(last)));
                    }
                }
                Ok(Err(error)) => {
                    tracing::warn!(
                        job = self.job.name(),
                        lock = name.as_str(),
                        error = &error as &dyn std::error::Error,
                        "could not read the lock row to find missed slots; none are caught up"
                    );
                    return None;
                }
                Err(_) => {
                    tracing::warn!(
                        job = self.job.name(),
                        lock = name.as_str(),
                        "reading the lock row to find missed slots timed out; none are caught up"
                    );
                    return None;
                }
            }
        }
        oldest
    }

    /// After a regular fire of `slot` failed to reach the database: retries the missed
    /// slot(s) as catch-ups until the database answers (nothing with `skip`). Returns the
    /// last slot considered.
    pub(super) async fn recover(&self, slot: FireSlot) -> Option<FireSlot> {
        if self.misfire() == MisfirePolicy::Skip {
            return None;
        }
        let mut pause = RECOVER_FIRST;
        // Slots after this one are found again each round (those that passed meanwhile).
        let mut after = slot.instant() - TimeDelta::milliseconds(1);
        let mut last = Some(slot);
        tracing::info!(job = self.job.name(), %slot, policy = %self.misfire(), "slot missed: the database did not answer; catching up when it does");
        loop {
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => return last,
                _ = tokio::time::sleep(pause) => {}
            }
            let missed = missed_slots(self.job.trigger(), Some(after), self.clock.now());
            if missed.slots.is_empty() {
                tracing::info!(
                    job = self.job.name(),
                    "the missed slots are older than misfire_grace; none is caught up"
                );
                return last;
            }
            let (answered, considered) = self.run_missed(missed).await;
            last = considered.or(last);
            match answered {
                Answered::All => return last,
                Answered::UpTo(next) => after = next.instant() - TimeDelta::milliseconds(1),
            }
            pause = (pause * 2).min(RECOVER_MAX);
        }
    }

    /// Runs `missed` as catch-up fires, oldest first; stops at the first that the database
    /// did not answer (which is then still missed).
    async fn run_missed(&self, missed: Missed) -> (Answered, Option<FireSlot>) {
        if missed.dropped > 0 {
            let at_least = if missed.dropped >= COUNT_DROPPED_UP_TO {
                "at least "
            } else {
                ""
            };
            tracing::warn!(
                job = self.job.name(),
                misfire_max = self.job.trigger().spec().misfire_max,
                "{at_least}{} older missed slots are dropped (over misfire_max)",
                missed.dropped
            );
        }
        let last = missed.slots.last().copied();
        for slot in missed.slots {
            if self.stop.is_cancelled() {
                break;
            }
            tracing::info!(job = self.job.name(), %slot, policy = %self.misfire(), "catching up a missed slot");
            let outcome = self.fire_as(Some(slot), FireKind::CatchUp).await;
            match outcome {
                RunOutcome::LockFailed(_) => return (Answered::UpTo(slot), last),
                RunOutcome::Skipped | RunOutcome::Paused => {}
                _ => self.config.metrics().catch_up(),
            }
        }
        (Answered::All, last)
    }
}

/// Whether the database answered every catch-up acquire, or up to which slot it did not.
enum Answered {
    All,
    UpTo(FireSlot),
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000 + s, 0).unwrap()
    }

    fn every_2s(policy: MisfirePolicy) -> Trigger {
        Trigger::fixed_rate(Duration::from_secs(2))
            .unwrap()
            .with_misfire(policy)
            .unwrap()
    }

    fn secs(missed: &Missed) -> Vec<i64> {
        missed
            .slots
            .iter()
            .map(|s| s.instant().timestamp() - 1_800_000_000)
            .collect()
    }

    #[test]
    fn never_ran_or_skip_misses_nothing() {
        let trigger = every_2s(MisfirePolicy::CatchUp);
        assert!(missed_slots(&trigger, None, at(10)).slots.is_empty());
        let skip = every_2s(MisfirePolicy::Skip);
        assert!(missed_slots(&skip, Some(at(0)), at(10)).slots.is_empty());
    }

    #[test]
    fn the_default_grace_is_one_period() {
        // Ran 0; now 10.5: slots 2..10 were missed, only 10 is within 2 s.
        let missed = missed_slots(
            &every_2s(MisfirePolicy::CatchUp),
            Some(at(0)),
            at(10) + TimeDelta::milliseconds(500),
        );
        assert_eq!(secs(&missed), [10]);
    }

    #[test]
    fn catch_up_runs_each_slot_oldest_first_up_to_the_max() {
        let trigger = every_2s(MisfirePolicy::CatchUp).with_misfire_grace(Duration::from_secs(60));
        let missed = missed_slots(&trigger, Some(at(0)), at(9));
        assert_eq!(secs(&missed), [2, 4, 6, 8]);
        assert_eq!(missed.dropped, 0);
        let capped = missed_slots(&trigger.with_misfire_max(3), Some(at(0)), at(10));
        assert_eq!((secs(&capped), capped.dropped), (vec![6, 8, 10], 2));
    }

    #[test]
    fn fire_once_runs_the_latest_missed_slot() {
        let trigger = every_2s(MisfirePolicy::FireOnce).with_misfire_grace(Duration::from_secs(60));
        assert_eq!(secs(&missed_slots(&trigger, Some(at(0)), at(9))), [8]);
        // Ran the latest slot already: nothing missed.
        assert!(missed_slots(&trigger, Some(at(8)), at(9)).slots.is_empty());
    }
}
