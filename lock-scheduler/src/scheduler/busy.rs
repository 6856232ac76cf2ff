//! A fire on an instance at its run limit (`limits.rs`): it waits for room, or leaves a
//! scheduled slot to an instance with room and records it missed when none had any.

use std::time::Duration;

use lock_cluster::{RunEnd, RunStart, RunState};
use lock_core::{FireKind, FireOutcome, FireSlot, JobContext};

use super::limits::{EVERY_INSTANCE_BUSY, JobPermits, Permit};
use super::runner::JobRunner;
use super::shards::SHARD_TAKEOVER_DELAY;
use super::status::RunOutcome;

impl JobRunner {
    /// Room for this fire's body, or the fire's outcome without it.
    ///
    /// A scheduled slot with no room now is left to the instances with room: this one waits
    /// the hand-off delay ([`SHARD_TAKEOVER_DELAY`], at most a quarter of the period: the
    /// others have asked for the lock by then, and the slot is still young) for a permit, then
    /// asks for the slot's lock anyway. Granted, nobody with room ran it: the fire is recorded
    /// as missed ("every instance busy") and the lock given back, the body not run. Refused,
    /// another instance ran it. Every other fire (manual, catch-up, queued) waits for room.
    pub(super) async fn permit_for(
        &self,
        permits: &JobPermits,
        slot: Option<FireSlot>,
        kind: FireKind,
    ) -> Result<Permit, RunOutcome> {
        if let Some(permit) = permits.try_take() {
            return Ok(permit);
        }
        let slot = match slot {
            Some(slot) if kind == FireKind::Scheduled => slot,
            _ => {
                return tokio::select! {
                    biased;
                    _ = self.stop.cancelled() => Err(RunOutcome::Skipped),
                    permit = permits.take() => Ok(permit),
                };
            }
        };
        self.config.metrics().busy_handed_on();
        let period = self
            .job
            .trigger()
            .next_slot(slot.instant())
            .and_then(|next| (next.instant() - slot.instant()).to_std().ok())
            .unwrap_or(Duration::MAX);
        let delay = SHARD_TAKEOVER_DELAY.min(period / 4);
        tokio::select! {
            biased;
            _ = self.stop.cancelled() => return Err(RunOutcome::Skipped),
            permit = permits.take() => return Ok(permit),
            _ = tokio::time::sleep(delay) => {}
        }
        Err(self.record_busy(slot).await)
    }

    /// Takes `slot`'s lock without running the body and records the fire as missed.
    async fn record_busy(&self, slot: FireSlot) -> RunOutcome {
        let store = self
            .ops
            .as_ref()
            .filter(|ops| ops.keeps_history())
            .map(|ops| ops.provider().clone());
        let name = self.history_name().into_owned();
        let instance = self.executor.instance_id().to_owned();
        let record = async move {
            let (Some(store), Some(ctx)) = (store, JobContext::current()) else {
                return;
            };
            let Some(store) = store.cluster() else {
                return;
            };
            let run = RunStart {
                job: name,
                slot: ctx.scheduled_at(),
                fire_kind: FireKind::Scheduled,
                instance_id: instance,
                fence: ctx.fence(),
                attempt: 1,
                params: Default::default(),
            };
            let written = async {
                let id = store.run_started(&run).await?;
                store
                    .run_ended(&RunEnd::new(
                        id,
                        RunState::Missed,
                        Some(EVERY_INSTANCE_BUSY),
                    ))
                    .await
            };
            if let Err(error) = written.await {
                tracing::warn!(
                    job = run.job,
                    error = &error as &dyn std::error::Error,
                    "the missed fire (every instance busy) was not written to the history"
                );
            }
        };
        let fired = self
            .executor
            .execute_fire(
                &self.config,
                Some(slot),
                FireKind::Scheduled,
                None,
                None,
                record,
            )
            .await;
        match fired {
            Ok(FireOutcome::Executed(())) => {
                tracing::warn!(
                    job = self.job.name(),
                    %slot,
                    "slot missed: every instance was busy (at max_concurrent_runs or its group's \
                     limit), none had room to run it"
                );
                RunOutcome::Skipped
            }
            Ok(_) => RunOutcome::Skipped,
            Err(error) => RunOutcome::LockFailed(error.to_string()),
        }
    }
}
