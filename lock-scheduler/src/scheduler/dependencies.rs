//! Dependent jobs at run time (`Trigger::after`): what a parent's fire does at its end, the
//! child's fire, and the loop that starts the child fires that are due. The data, and why it
//! works across instances, is in `dependents.rs`.

use std::cell::Cell;
use std::sync::Arc;
use std::time::Duration;

use lock_cluster::{ClusterStore, RunEnd, RunStart, RunState};
use lock_core::{FireKind, FireSlot, LockError, Params};
use lock_trigger::Overlap;
use tokio::sync::mpsc;

use super::Inner;
use super::cluster::Operations;
use super::dependents::{Child, Due};
use super::overlap_signals::HELD_UNTIL;
use super::runner::JobRunner;
use super::status::RunOutcome;

/// How many times a parent's instance writes a child's request before it gives up (the
/// database may be failing over), and the first pause between.
const WRITE_ATTEMPTS: u32 = 4;
const FIRST_PAUSE: Duration = Duration::from_millis(200);

/// The message of the event logged once a parent's requests for its children are written:
/// from then on the children run even if this instance dies.
pub(super) const AFTER_REQUESTS_WRITTEN: &str = "after requests written";

impl JobRunner {
    /// At the end of a fire of a job that has children, before its end is recorded: a success
    /// writes each child's request and fires the children whose parents have all succeeded
    /// for the slot; a failure writes each child's run as skipped, saying which parent failed.
    ///
    /// A run without a slot (fixed delay, manual) gives its children the database's time at
    /// its end as their slot, for the children with that one parent (a child of several
    /// parents runs for a slot they share).
    pub(super) async fn parent_ended(
        &self,
        ops: &Operations,
        slot: Option<FireSlot>,
        outcome: &RunOutcome,
    ) {
        let children = ops.dependents.children_of(self.job.name());
        let Some(store) = ops.provider().cluster() else {
            return;
        };
        let label = self.history_name();
        let why = match outcome {
            RunOutcome::Succeeded => None,
            RunOutcome::Failed(_) => Some("failed"),
            RunOutcome::Panicked(_) => Some("panicked"),
            RunOutcome::TimedOut => Some("timed out"),
            RunOutcome::Cancelled => Some("was cancelled"),
            // No run here (another instance had the lock, paused, the database did not
            // answer): the instance that ran it decides.
            _ => return,
        };
        let (slot, slotless) = match slot {
            Some(slot) => (slot, false),
            // A shard's slotless run: the shards' times would differ, no slot to share.
            None if self.config.shard().is_some() => return,
            None => (FireSlot::new(self.clock.now()), true),
        };
        let children: Vec<&Child> = children
            .iter()
            .filter(|child| !slotless || child.needs.len() == 1)
            .collect();
        if let Some(why) = why {
            if ops.keeps_history() {
                for child in children {
                    let reason = format!("parent `{label}` {why}");
                    self.write_skipped(store, child, slot, &reason).await;
                }
            }
            return;
        }
        let mut written = Vec::with_capacity(children.len());
        for child in children {
            if self.write_request(store, child, slot, &label).await {
                self.config.metrics().dependent_requested();
                written.push(child);
            }
        }
        if written.is_empty() {
            return;
        }
        tracing::info!(
            job = self.job.name(),
            parent = &*label,
            slot = %slot,
            children = written.len(),
            "{AFTER_REQUESTS_WRITTEN}"
        );
        for child in written {
            // Several parents (or shards): fired by whichever sees every request there; this
            // read follows its own write, so the last writer sees them all.
            let complete = child.needs.len() == 1 || {
                let read = store.after_requests(&child.name, slot.instant());
                match tokio::time::timeout(self.executor.operation_timeout(), read).await {
                    Ok(Ok(present)) => child.is_complete(&present),
                    // The heartbeat's recovery fires it once every request is there.
                    _ => false,
                }
            };
            if complete {
                ops.dependents.fire(child.name.clone(), slot);
            }
        }
    }

    /// Writes `child`'s request for `slot`, asking again while the database does not answer;
    /// false (and an ERROR naming the child) when it never did.
    async fn write_request(
        &self,
        store: &dyn ClusterStore,
        child: &Child,
        slot: FireSlot,
        label: &str,
    ) -> bool {
        let mut pause = FIRST_PAUSE;
        let mut error = String::new();
        for attempt in 1..=WRITE_ATTEMPTS {
            let write = store.request_after(&child.name, slot.instant(), label);
            match tokio::time::timeout(self.executor.operation_timeout(), write).await {
                Ok(Ok(_)) => return true,
                Ok(Err(e)) => error = e.to_string(),
                Err(_) => {
                    error = format!("no answer within {:?}", self.executor.operation_timeout())
                }
            }
            if attempt < WRITE_ATTEMPTS && !self.stop.is_cancelled() {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
        tracing::error!(
            job = &*child.name,
            parent = label,
            slot = %slot,
            %error,
            "the request to run a dependent job was not written: the job does not run for this \
             slot of its parent (trigger it by hand if it must)"
        );
        false
    }

    /// Writes `child`'s run for `slot` as skipped, with `reason`, to the history.
    async fn write_skipped(
        &self,
        store: &dyn ClusterStore,
        child: &Child,
        slot: FireSlot,
        reason: &str,
    ) {
        let run = RunStart {
            job: child.name.to_string(),
            slot: Some(slot.instant()),
            fire_kind: FireKind::Dependency,
            instance_id: self.executor.instance_id().to_owned(),
            fence: 0,
            attempt: 1,
            params: Params::new(),
        };
        let written = async {
            let id = store.run_started(&run).await?;
            store
                .run_ended(&RunEnd::new(id, RunState::Skipped, Some(reason)))
                .await
        };
        let written = tokio::time::timeout(self.executor.operation_timeout(), written)
            .await
            .unwrap_or_else(|_| {
                Err(LockError::Timeout {
                    operation: "history",
                    lock: child.name.to_string(),
                    after: self.executor.operation_timeout(),
                })
            });
        match written {
            Ok(()) => {
                tracing::info!(job = &*child.name, slot = %slot, reason, "dependent job not run")
            }
            Err(error) => tracing::warn!(
                job = &*child.name,
                slot = %slot,
                reason,
                error = &error as &dyn std::error::Error,
                "dependent job not run; its skipped run was not written to the history"
            ),
        }
    }

    /// A child's fire for `slot` ([`FireKind::Dependency`]). Once its lock decided the slot
    /// (it ran here, ran already elsewhere, was refused as held by a `skip` job, or paused),
    /// the child's requests through the slot are deleted; a `queue` child refused because its
    /// previous run holds the lock asks again when that lease ends. A database that does not
    /// answer leaves the requests: the heartbeat's recovery fires the slot again.
    ///
    /// Slots before `slot` whose requests are all there run first, oldest first: the child's
    /// lock refuses a slot older than one it ran, so a request a dead instance left (its
    /// parent ran the slot before) would otherwise be lost to the next parent run's child.
    pub(super) async fn run_child(self: Arc<Self>, ops: Arc<Operations>, slot: FireSlot) {
        let name = self.job.shared_name();
        for earlier in self.earlier_requests(&ops, slot).await {
            if ops.dependents.begin(&name, earlier) {
                tracing::info!(
                    job = self.job.name(),
                    slot = %earlier,
                    before = %slot,
                    "dependent run of an earlier slot still requested: run first"
                );
                self.run_child_slot(&ops, earlier).await;
                ops.dependents.finished(&name, earlier);
            }
        }
        self.run_child_slot(&ops, slot).await;
        ops.dependents.finished(&name, slot);
    }

    /// This child's slots before `slot` whose requests are all there, oldest first (one read
    /// of the control table; none when it does not answer).
    async fn earlier_requests(&self, ops: &Operations, slot: FireSlot) -> Vec<FireSlot> {
        let (Some(store), Some(child)) = (
            ops.provider().cluster(),
            ops.dependents.child(self.job.name()),
        ) else {
            return Vec::new();
        };
        let read = store.control();
        let Ok(Ok(control)) = tokio::time::timeout(self.executor.operation_timeout(), read).await
        else {
            return Vec::new();
        };
        let mut slots: std::collections::BTreeMap<_, Vec<&str>> = Default::default();
        for row in &control {
            if row.kind == lock_cluster::ControlKind::After
                && row.job == self.job.name()
                && let Some(at) = row.slot.filter(|at| *at < slot.instant())
            {
                slots.entry(at).or_default().push(row.requested_by.as_str());
            }
        }
        slots
            .into_iter()
            .filter(|(_, present)| child.is_complete(present))
            .map(|(at, _)| FireSlot::new(at))
            .collect()
    }

    /// One slot of [`run_child`](Self::run_child).
    async fn run_child_slot(&self, ops: &Operations, slot: FireSlot) {
        loop {
            if self.stop.is_cancelled() {
                // The requests stay: another instance (or this one restarted) fires the slot.
                break;
            }
            let held = Cell::new(None);
            let fire = HELD_UNTIL.scope(held, async {
                let outcome = self.fire_as(Some(slot), FireKind::Dependency).await;
                (outcome, HELD_UNTIL.with(Cell::get))
            });
            let (outcome, held_until) = fire.await;
            match (outcome, held_until) {
                (RunOutcome::LockFailed(_), _) => break,
                (RunOutcome::Skipped, Some(until)) if self.job.overlap() == Overlap::Queue => {
                    if !self.clock.sleep_until(until, &self.stop).await {
                        break;
                    }
                }
                _ => {
                    self.delete_requests(ops, slot).await;
                    break;
                }
            }
        }
    }

    /// Deletes this child's requests through `slot` (a failure leaves them for the next
    /// slot's deletion or housekeeping; the child's lock refuses the slot again meanwhile).
    async fn delete_requests(&self, ops: &Operations, slot: FireSlot) {
        let Some(store) = ops.provider().cluster() else {
            return;
        };
        let delete = store.delete_after(self.job.name(), slot.instant());
        match tokio::time::timeout(self.executor.operation_timeout(), delete).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::debug!(job = self.job.name(), %error, "dependent run's requests not deleted")
            }
            Err(_) => tracing::debug!(
                job = self.job.name(),
                "deleting a dependent run's requests timed out"
            ),
        }
    }
}

/// Starts each due child fire on the job loops' tracker (shutdown waits for it), until the
/// scheduler stops.
pub(super) async fn start_due(
    inner: Arc<Inner>,
    ops: Arc<Operations>,
    mut due: mpsc::UnboundedReceiver<Due>,
) {
    loop {
        let next = tokio::select! {
            biased;
            _ = inner.stop.cancelled() => return,
            next = due.recv() => next,
        };
        let Some(Due { child, slot }) = next else {
            return;
        };
        match inner.jobs.runner(&child) {
            Some(runner) => {
                inner.loops.spawn(runner.run_child(ops.clone(), slot));
            }
            // Removed since it was queued.
            None => ops.dependents.finished(&child, slot),
        }
    }
}
