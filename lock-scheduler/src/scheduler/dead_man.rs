//! A job's dead-man-switch pings ([`Job::with_dead_man_switch`](crate::Job::with_dead_man_switch)):
//! `start` when a fire's body starts, then `success` or `fail` when the fire ends.
//!
//! Decisions, and why:
//! - **Only the instance that runs the body pings**: the start is sent from inside the lease,
//!   so a fire refused by the lock, skipped or missed sends nothing.
//! - **One start and one end per fire**, whatever its retries: the end goes after the last
//!   attempt, which is what a monitor's "the job ran and succeeded" means.
//! - **Never in the body's or the release's way**: one task per fire sends the start, then
//!   waits for the fire's end on a oneshot and sends the end. The order holds even for a body
//!   shorter than the start's round trip, and the fire only hands a value to a channel.
//! - **A run id pairs start and end** (Healthchecks' `rid`, Cronitor's `series`): a UUID
//!   derived from the lock's name, the slot and the lease's fence, so it is the same wherever
//!   it is computed and unique per acquisition.
//! - **Shutdown**: the task runs on the job loops' tracker, which
//!   [`Scheduler::shutdown`](crate::Scheduler::shutdown) waits for (within its timeout); each
//!   ping is bounded by the switch's own retry policy, so an unreachable monitor delays the
//!   exit by at most that policy's bound, never indefinitely.

#[cfg(feature = "alerts")]
pub(super) use with_alerts::FirePings;
#[cfg(not(feature = "alerts"))]
pub(super) use without_alerts::FirePings;

#[cfg(feature = "alerts")]
mod with_alerts {
    use std::sync::{Arc, Mutex};

    use lock_alerts::DeadManSwitch;
    use lock_core::{FireSlot, JobContext};
    use tokio::sync::oneshot;
    use tokio_util::task::TaskTracker;

    use crate::RunOutcome;

    /// One fire's pings: armed when its body starts, ended with its outcome.
    pub(in crate::scheduler) struct FirePings {
        switch: Arc<DeadManSwitch>,
        slot: Option<FireSlot>,
        tasks: TaskTracker,
        /// Set when the body started; taken by the fire's end.
        end: Mutex<Option<oneshot::Sender<Result<(), String>>>>,
    }

    impl FirePings {
        pub(in crate::scheduler) fn new(
            switch: Arc<DeadManSwitch>,
            slot: Option<FireSlot>,
            tasks: TaskTracker,
        ) -> Arc<Self> {
            Arc::new(FirePings {
                switch,
                slot,
                tasks,
                end: Mutex::new(None),
            })
        }

        /// The body starts: spawns the task that pings `start`, then the end. Called inside the
        /// lease's context (its fence is part of the run id), on the runtime or a blocking
        /// thread of it.
        pub(in crate::scheduler) fn started(&self, lock_name: &str) {
            let fence = JobContext::current().map_or(0, |ctx| ctx.fence());
            let run_id = run_id(lock_name, self.slot, fence);
            let (tx, rx) = oneshot::channel();
            *self.end.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
            let switch = self.switch.clone();
            self.tasks.spawn(async move {
                let run = switch.run(run_id);
                run.start().await;
                match rx.await {
                    Ok(Ok(())) => run.success().await,
                    Ok(Err(message)) => run.fail(&message).await,
                    // The fire's future was dropped before its end was known.
                    Err(_) => run.fail("the scheduler stopped before the run ended").await,
                };
            });
        }

        /// The fire ended with `outcome`: hands it to the ping task, if the body started.
        pub(in crate::scheduler) fn ended(&self, outcome: &RunOutcome) {
            let Some(tx) = self.end.lock().unwrap_or_else(|e| e.into_inner()).take() else {
                return;
            };
            let end = match outcome {
                RunOutcome::Succeeded => Ok(()),
                RunOutcome::Failed(error) => Err(error.to_string()),
                RunOutcome::Panicked(message) => Err(format!("panicked: {message}")),
                RunOutcome::TimedOut => Err("timed out".to_owned()),
                RunOutcome::Cancelled => Err(
                    "cancelled: the body returned after cancelled() resolved (shutdown or lost lock)"
                        .to_owned(),
                ),
                // After a start these cannot come; named, never `{:?}`, should one ever.
                RunOutcome::LockFailed(message) => Err(format!("lock failed: {message}")),
                RunOutcome::Skipped => Err("skipped".to_owned()),
                RunOutcome::Paused => Err("paused".to_owned()),
            };
            // The task is gone only if the runtime is: nothing left to tell.
            let _ = tx.send(end);
        }
    }

    /// A UUID (version 8, "custom") from the lock's name and the slot (64 bits of FNV-1a) and
    /// the lease's fence (the other 64).
    pub(super) fn run_id(lock_name: &str, slot: Option<FireSlot>, fence: u64) -> String {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let slot = slot.map_or(i64::MIN, FireSlot::unix_millis);
        for byte in lock_name.bytes().chain(slot.to_be_bytes()) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
        let mut bytes = [0; 16];
        bytes[..8].copy_from_slice(&hash.to_be_bytes());
        bytes[8..].copy_from_slice(&fence.to_be_bytes());
        uuid::Uuid::new_v8(bytes).hyphenated().to_string()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn run_ids_are_uuids_unique_per_fence_and_slot() {
            let slot = FireSlot::from_unix_millis(1_700_000_000_000);
            let a = run_id("report", slot, 7);
            assert_eq!(a, run_id("report", slot, 7));
            assert_ne!(a, run_id("report", slot, 8));
            assert_ne!(a, run_id("report#1", slot, 7));
            assert_ne!(a, run_id("report", None, 7));
            let parsed = uuid::Uuid::parse_str(&a).unwrap();
            assert_eq!(parsed.get_version_num(), 8);
        }
    }
}

#[cfg(not(feature = "alerts"))]
mod without_alerts {
    use crate::RunOutcome;

    /// No pings without the `alerts` feature: a type with no value, so the runner's calls
    /// compile away.
    pub(in crate::scheduler) enum FirePings {}

    impl FirePings {
        pub(in crate::scheduler) fn started(&self, _lock_name: &str) {
            match *self {}
        }

        pub(in crate::scheduler) fn ended(&self, _outcome: &RunOutcome) {
            match *self {}
        }
    }
}
