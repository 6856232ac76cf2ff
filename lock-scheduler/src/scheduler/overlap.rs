//! What a slot that comes due while the job's previous run still runs does: `overlap =
//! "skip"` (the default, `runner.rs` alone), `"queue"` or `"replace"`.
//!
//! Decisions, and why:
//! - On the instance running the body, a slot that comes due is remembered (at most one;
//!   a later slot takes its place, so later fires coalesce into the newest due slot) and fired
//!   as soon as the body ends: [`FireKind::Queued`], or for `replace` [`FireKind::Replacing`]
//!   after the running body's `cancelled()` resolved. No polling: the watch is the sleep the
//!   loop would make anyway.
//! - The queued slot goes through the lock like any fire: once per slot in the lock row keeps
//!   it to one run in the cluster, whichever instance gets it.
//! - Skip jobs never reach this module: no timer, no allocation, no task-local per fire.
//! - The replace signal reaches the body through a task-local token, read where the body's
//!   context is current, and cancels that context's token: the same `cancelled()` a timeout
//!   resolves (`attempts.rs`), so the replaced body's outcome is what it returned.

use std::cell::Cell;
use std::pin::pin;

use chrono::{DateTime, Utc};
use lock_core::{FireKind, FireSlot};
use lock_trigger::Overlap;
use tokio_util::sync::CancellationToken;

use super::runner::JobRunner;
use super::status::RunOutcome;

use super::overlap_signals::{HELD_UNTIL, REPLACED};

/// Fires `slot` of a `queue` or `replace` job and, while its body runs, watches for the next
/// slots: the newest one due when the body ends is fired right after it. Returns the last
/// fire's outcome and the last slot fired.
impl JobRunner {
    pub(super) async fn fire_overlapping(&self, first: FireSlot) -> (RunOutcome, FireSlot) {
        let runner = self;
        let policy = runner.job.overlap();
        let (mut slot, mut kind) = (first, FireKind::Scheduled);
        loop {
            let replaced = CancellationToken::new();
            let held_until = Cell::new(None);
            let fire = HELD_UNTIL.scope(held_until, async move {
                let outcome = runner.fire_as(Some(slot), kind).await;
                (outcome, HELD_UNTIL.with(Cell::get))
            });
            let mut fire = pin!(REPLACED.scope(replaced.clone(), fire));
            let mut due: Option<FireSlot> = None;
            let outcome = loop {
                let after = due.unwrap_or(slot).instant();
                let Some(next) = runner.job.trigger().next_slot(after) else {
                    break fire.as_mut().await;
                };
                tokio::select! {
                    biased;
                    outcome = fire.as_mut() => break outcome,
                    reached = runner.clock.sleep_until(next.instant(), &runner.stop) => {
                        if !reached {
                            // Stopping: the running fire ends as any does at shutdown.
                            break fire.as_mut().await;
                        }
                        due = Some(next);
                        if policy == Overlap::Replace && !replaced.is_cancelled() {
                            tracing::info!(
                                job = runner.job.name(),
                                running = %slot,
                                replacing = %next,
                                "run replaced by the fire of slot {next}: cancelled() resolves now"
                            );
                            replaced.cancel();
                        }
                    }
                }
            };
            let (outcome, held_until) = outcome;
            if let Some(until) = held_until {
                // Another instance's run holds the lock: ask for this slot again when its lease
                // ends, unless a newer slot comes due first (the job loop then fires that one).
                match wait_for_holder(runner, slot, until).await {
                    true => {
                        kind = queued_kind(policy);
                        continue;
                    }
                    false => return (outcome, slot),
                }
            }
            let ran = matches!(
                outcome,
                RunOutcome::Succeeded
                    | RunOutcome::Failed(_)
                    | RunOutcome::Cancelled
                    | RunOutcome::TimedOut
                    | RunOutcome::Panicked(_)
            );
            match due {
                Some(next) if ran && !runner.stop.is_cancelled() => {
                    if policy == Overlap::Replace {
                        runner.config.metrics().replaced();
                    } else {
                        runner.config.metrics().queued();
                    }
                    slot = next;
                    kind = queued_kind(policy);
                }
                _ => return (outcome, slot),
            }
        }
    }
}

/// The kind of a fire that waited for the previous run: queued, or replacing it.
fn queued_kind(policy: Overlap) -> FireKind {
    match policy {
        Overlap::Replace => FireKind::Replacing,
        _ => FireKind::Queued,
    }
}

/// Sleeps until the database reaches `until`, the holder's `lock_until` (a release before it
/// is noticed then: no polling); true to ask for `slot` again, false when the next slot is
/// about to be asked for first (it takes the waiting fire's place) or the scheduler stops.
async fn wait_for_holder(runner: &JobRunner, slot: FireSlot, until: DateTime<Utc>) -> bool {
    let ahead = runner
        .executor
        .acquire_ahead()
        .min(runner.config.lock_at_most_for() / 2);
    let ahead = chrono::TimeDelta::from_std(ahead).unwrap_or(chrono::TimeDelta::zero());
    if let Some(next) = runner.job.trigger().next_slot(slot.instant())
        && next.instant() - ahead <= until
    {
        return false;
    }
    runner.clock.sleep_until(until, &runner.stop).await
}
