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
//! - **No instance jumps a slot another is still catching up.** Several instances starting
//!   together walk the same list. A refused catch-up slot is checked against the lock row(s)
//!   (one primary-key read each, only on a refusal): if `last_fire` has reached it, it ran
//!   and the walk goes on; if a lease taken before it (another instance on an older missed
//!   slot, a manual run, this instance's own `lock_at_least_for`) still holds the row, the
//!   same slot is tried again when that lease ends, by a timer on the database's clock.
//!   Moving on instead would let this instance take the newer slot, and the acquire's rule
//!   would then refuse the older one to everybody. The wait ends at the next regular slot.
//! - **`catch_up` runs at most `misfire_max` slots**, the most recent ones; the number dropped
//!   is logged. The slots are found by walking back from now, so a tiny period with a huge
//!   grace costs `misfire_max` steps, not one per slot.
//! - **An outage** (a regular fire's acquire failed with a provider error) leaves its slot
//!   missed: the instance retries the catch-up on a timer (500 ms, doubling to 5 s, no busy
//!   polling) until the database answers, adding the slots that pass meanwhile; then runs it
//!   (or them) as catch-ups. When only this instance was cut off, another one ran those
//!   slots, and the database refuses them: correct, nothing runs twice.
//! - **A retry never holds back a regular slot.** The retry timer backs off to 5 s, longer
//!   than a short period: the loop sleeps to the next retry or the next regular slot,
//!   whichever comes first, and a regular slot due is fired as usual. With `fire_once` it is
//!   the latest missed slot from then on and supersedes the older ones; with `catch_up` the
//!   older ones go first, in order. So the first regular slot after the database answers again
//!   runs at its time, not at the retry after it.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use lock_trigger::{Distribution, MisfirePolicy};

use super::Trigger;
use super::runner::JobRunner;
use super::status::RunOutcome;
use lock_core::{FireKind, FireSlot, LockRecord};

/// The first pause before retrying a catch-up after a provider error.
const RECOVER_FIRST: Duration = Duration::from_millis(500);
/// The longest pause between those retries.
const RECOVER_MAX: Duration = Duration::from_secs(5);
/// The shortest pause before trying a refused catch-up slot again.
const SETTLE_PAUSE_MIN: Duration = Duration::from_millis(50);
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
    missed_slots_keeping(trigger, policy_keeps(trigger), after, now)
}

/// How many of the latest missed slots `trigger`'s misfire policy runs.
fn policy_keeps(trigger: &Trigger) -> usize {
    let spec = trigger.spec();
    match spec.misfire {
        MisfirePolicy::Skip => 0,
        MisfirePolicy::FireOnce => 1,
        MisfirePolicy::CatchUp => spec.misfire_max as usize,
    }
}

/// [`missed_slots`], keeping the latest `keep` of them.
fn missed_slots_keeping(
    trigger: &Trigger,
    keep: usize,
    after: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Missed {
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

    /// A shared-out job whose loop just became its owner (`sharing.rs`): runs the slots missed
    /// since the lock's `last_fire`, as at start, but at least the latest one (`skip` counts
    /// as `fire_once`): the previous owner left them, not an outage of the cluster. One read
    /// of the lock row per job handed on.
    pub(super) async fn catch_up_handed_on(&self) -> Option<FireSlot> {
        let last_fire = self.last_fire_for_misfires().await?;
        let keep = policy_keeps(self.job.trigger()).max(1);
        let missed =
            missed_slots_keeping(self.job.trigger(), keep, Some(last_fire), self.clock.now());
        if !missed.slots.is_empty() {
            tracing::debug!(
                job = self.job.name(),
                slots = missed.slots.len(),
                "job handed on to this instance: catching up the slots its previous owner left"
            );
        }
        self.run_missed(missed).await.1
    }

    /// The slot the job last ran, from its lock row: for a sharded job the oldest of its
    /// shards' (a shard that never ran has missed nothing), so every shard's missed slots are
    /// fired and the shards that did run them are refused by the database. `None`: never ran,
    /// or the row could not be read (logged). A broadcast job has no ranks before its first
    /// heartbeat: it catches up after an outage, not at start.
    async fn last_fire_for_misfires(&self) -> Option<DateTime<Utc>> {
        let rows = self.read_rows().await?;
        rows.iter()
            .filter_map(|row| row.as_ref().and_then(|r| r.last_fire))
            .min()
    }

    /// The job's lock rows (each shard's for a sharded job), one primary-key read each, or
    /// `None` for a broadcast job (no ranks before its first heartbeat) or when a read failed
    /// (logged).
    async fn read_rows(&self) -> Option<Vec<Option<LockRecord>>> {
        let names: Vec<String> = match self.job.distribution() {
            Distribution::Single => vec![self.config.name().to_owned()],
            Distribution::Shards(total) => (0..total)
                .map(|index| self.job.distribution().lock_name(self.config.name(), index))
                .collect(),
            Distribution::Broadcast => return None,
        };
        let mut rows = Vec::with_capacity(names.len());
        for name in &names {
            let read = self.executor.provider().read_lock(name);
            match tokio::time::timeout(self.executor.operation_timeout(), read).await {
                Ok(Ok(record)) => rows.push(record),
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
        Some(rows)
    }

    /// After a catch-up fire of `slot` was refused somewhere (for a sharded job: maybe on some
    /// shards): whether `slot` has run everywhere, or until when a lease taken before it (by
    /// an instance catching up an older slot, a manual run, this instance's own
    /// `lock_at_least_for`) holds a row that has not run it. Moving on to the next slot while
    /// such a lease holds would let it take the newer slot and lose this one (the acquire's
    /// `last_fire < slot` rule would then refuse it to everybody).
    async fn settled(&self, slot: FireSlot) -> Settled {
        let Some(rows) = self.read_rows().await else {
            return Settled::Unknown;
        };
        let waiting = rows.iter().flatten().filter(|row| {
            row.last_fire
                .is_none_or(|last_fire| last_fire < slot.instant())
        });
        match waiting.map(|row| row.lock_until).max() {
            None => Settled::Ran,
            Some(until) => Settled::HeldUntil(until),
        }
    }
    /// After a regular fire of `slot` failed to reach the database: retries the missed
    /// slot(s) as catch-ups until the database answers (nothing with `skip`), and fires each
    /// regular slot that comes meanwhile at its time. Returns the last slot considered.
    ///
    /// The retry timer never holds back a regular slot: the loop sleeps to whichever comes
    /// first, the next retry or the next regular slot. A regular slot that comes first is
    /// fired as usual (`Scheduled`): with `fire_once` it is the latest missed slot from then
    /// on, so it supersedes the older ones; with `catch_up` the older ones are tried first
    /// (the regular fire would move `last_fire` past them), and a regular slot whose older
    /// slots got no answer joins them for the next retry. So the first regular slot after
    /// the database answers again runs, instead of waiting for a retry up to 5 s away.
    pub(super) async fn recover(&self, slot: FireSlot) -> Option<FireSlot> {
        if self.misfire() == MisfirePolicy::Skip {
            return None;
        }
        let mut pause = RECOVER_FIRST;
        let mut retry_at = tokio::time::Instant::now() + pause;
        // Slots after this one are found again each round (those that passed meanwhile).
        let mut after = slot.instant() - TimeDelta::milliseconds(1);
        let mut last = slot;
        tracing::info!(job = self.job.name(), %slot, policy = %self.misfire(), "slot missed: the database did not answer; catching up when it does");
        loop {
            let regular = self
                .job
                .trigger()
                .next_slot(last.instant().max(self.clock.now()));
            let wake = regular.map(|regular| regular.instant() - self.ahead_of(regular, last));
            let regular_due = async {
                match wake {
                    Some(wake) => self.clock.sleep_until(wake, &self.stop).await,
                    None => std::future::pending().await,
                }
            };
            let regular_first = tokio::select! {
                biased;
                _ = self.stop.cancelled() => return Some(last),
                woke = regular_due => woke,
                _ = tokio::time::sleep_until(retry_at) => false,
            };
            if let (true, Some(regular)) = (regular_first, regular) {
                if self.stop.is_cancelled() {
                    return Some(last);
                }
                last = regular;
                if self.misfire() == MisfirePolicy::CatchUp {
                    let older = missed_slots(
                        self.job.trigger(),
                        Some(after),
                        regular.instant() - TimeDelta::milliseconds(1),
                    );
                    if !older.slots.is_empty()
                        && let (Answered::UpTo(next), _) = self.run_missed(older).await
                    {
                        // Still no answer: this slot waits with the older ones, in order.
                        after = next.instant() - TimeDelta::milliseconds(1);
                        continue;
                    }
                }
                let outcome = Box::pin(self.fire_as(Some(regular), FireKind::Scheduled)).await;
                if !matches!(outcome, RunOutcome::LockFailed(_)) {
                    tracing::info!(job = self.job.name(), slot = %regular, "the database answers again; the regular slot was fired and the catch-up ends");
                    return Some(last);
                }
                // Still missed from this slot on: with `fire_once` it is the latest, the older
                // ones coalesced into it; with `catch_up` the older ones were answered above.
                after = regular.instant() - TimeDelta::milliseconds(1);
                continue;
            }
            let missed = missed_slots(self.job.trigger(), Some(after), self.clock.now());
            if missed.slots.is_empty() {
                tracing::info!(
                    job = self.job.name(),
                    "the missed slots are older than misfire_grace; none is caught up"
                );
                return Some(last);
            }
            let (answered, considered) = self.run_missed(missed).await;
            if let Some(considered) = considered.filter(|c| c.instant() > last.instant()) {
                last = considered;
            }
            match answered {
                Answered::All => return Some(last),
                Answered::UpTo(next) => after = next.instant() - TimeDelta::milliseconds(1),
            }
            pause = (pause * 2).min(RECOVER_MAX);
            retry_at = tokio::time::Instant::now() + pause;
        }
    }

    /// How far ahead of `regular` its lock is asked for, as the job loop does (`runner.rs`):
    /// the executor's acquire-ahead, at most half the lease and half the way back to `last`.
    fn ahead_of(&self, regular: FireSlot, last: FireSlot) -> TimeDelta {
        let ahead = self
            .executor
            .acquire_ahead()
            .min(self.config.lock_at_most_for() / 2);
        let ahead = TimeDelta::from_std(ahead).unwrap_or(TimeDelta::zero());
        if last.instant() < regular.instant() {
            ahead.min((regular.instant() - last.instant()) / 2)
        } else {
            ahead
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
        // Waiting for a slot's holder ends before the slot after the last missed one: that one
        // is a regular fire, which would move `last_fire` past the rest anyway.
        let deadline = last.and_then(|last| self.job.trigger().next_slot(last.instant()));
        let sharded = matches!(self.job.distribution(), Distribution::Shards(_));
        for slot in missed.slots {
            tracing::info!(job = self.job.name(), %slot, policy = %self.misfire(), "catching up a missed slot");
            loop {
                if self.stop.is_cancelled() {
                    return (Answered::All, last);
                }
                let outcome = self.fire_as(Some(slot), FireKind::CatchUp).await;
                let refused = match outcome {
                    RunOutcome::LockFailed(_) => return (Answered::UpTo(slot), last),
                    RunOutcome::Paused => false,
                    RunOutcome::Skipped => true,
                    _ => {
                        self.config.metrics().catch_up();
                        // A sharded fire reports success when any shard ran here; others
                        // may have been refused.
                        sharded
                    }
                };
                if !refused {
                    break;
                }
                match self.settled(slot).await {
                    Settled::Ran => break,
                    Settled::Unknown => return (Answered::UpTo(slot), last),
                    Settled::HeldUntil(until) => {
                        if deadline.is_some_and(|d| until >= d.instant()) {
                            tracing::info!(job = self.job.name(), %slot, %until, "a missed slot is held past the next regular slot; the catch-up ends here");
                            return (Answered::All, last);
                        }
                        // On the database's clock, with a floor so that a row whose lease
                        // has just ended costs one more acquire, not a busy loop.
                        let pause = (until - self.clock.now())
                            .to_std()
                            .unwrap_or(Duration::ZERO)
                            .max(SETTLE_PAUSE_MIN);
                        tracing::debug!(job = self.job.name(), %slot, ?pause, "a missed slot is held by a lease taken before it; trying it again when that lease ends");
                        tokio::select! {
                            biased;
                            _ = self.stop.cancelled() => return (Answered::All, last),
                            _ = tokio::time::sleep(pause) => {}
                        }
                    }
                }
            }
        }
        (Answered::All, last)
    }
}

/// What the lock rows say about a catch-up slot that was refused.
enum Settled {
    /// Every row's `last_fire` is at or past the slot: it ran (here or elsewhere).
    Ran,
    /// A row has not run the slot and a lease taken before it lasts until then (database
    /// clock; maybe already past).
    HeldUntil(DateTime<Utc>),
    /// The rows could not be read (logged).
    Unknown,
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
