//! One job's timer loop: sleep to each fire, run it under the job's lock, record the outcome.
//!
//! Every slot is the database's time: the loop asks the [`DatabaseClock`] for "now" and sleeps
//! on the monotonic clock until the database reaches the slot, so this host's wall clock
//! plays no part in when a job fires or which slot it claims.

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use lock_trigger::{Distribution, Firing, MAX_SHARDS, Overlap};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::Job;
use super::attempts::{Attempted, Attempts, panic_message};
use super::breaker;
use super::cluster::Operations;
use super::dead_man::FirePings;
use super::history::{Lingering, RunEnding, RunRecorder};
use super::job::Body;
use super::limits::JobPermits;
use super::outage::{self, Change};
use super::overlap_signals as overlap;
use super::shards::{Spread, combine, stable_hash};
use super::status::{JobState, RunOutcome};
use crate::__private::JobBody;
use crate::StateMap;
use crate::clock::DatabaseClock;
use lock_core::{
    FireKind, FireOutcome, FireSlot, LockConfiguration, LockError, LockingTaskExecutor,
    RefusalReason,
};

/// One job's timer loop (a clone runs the job's manual fires).
#[derive(Clone)]
pub(super) struct JobRunner {
    /// Shared with the runners of its shards' fires.
    pub(super) job: Arc<Job>,
    pub(super) config: LockConfiguration,
    pub(super) executor: Arc<LockingTaskExecutor>,
    pub(super) stop: CancellationToken,
    pub(super) state: Arc<JobState>,
    /// What the body's parameters are extracted from.
    pub(super) values: Arc<StateMap>,
    /// The database's clock: slots are its time.
    pub(super) clock: DatabaseClock,
    /// The operations tables (pauses, history), when the provider keeps them.
    pub(super) ops: Option<Arc<Operations>>,
    /// A sharded or broadcast job's shard locks (`shards.rs`); None for one run per slot.
    pub(super) spread: Option<Arc<Spread>>,
    /// The run limits this job is under (`limits.rs`); None for none.
    pub(super) permits: Option<Arc<JobPermits>>,
    /// A shared-out job's keys (`sharing.rs`); None when every instance asks for it.
    pub(super) share: Option<super::sharing::Shared>,
    /// The job loops' tracker, which shutdown waits for: the dead-man pings' tasks run on it.
    pub(super) tasks: tokio_util::task::TaskTracker,
    /// The end of the job's initial delay: no fire before it.
    pub(super) not_before: tokio::time::Instant,
}

impl JobRunner {
    /// A claimed trigger request: one manual run, waiting for the lock while another fire holds
    /// it (at most the job's `lock_at_most_for`), and asking again while the database does not
    /// answer (a transient error is no run). A request it cannot run because shutdown began is
    /// handed back unclaimed (`cluster.rs`), for a live instance to claim: a claimed request
    /// is never dropped without a run.
    pub(super) async fn run_requested(self: Arc<Self>, request: i64, params: lock_core::Params) {
        let deadline = tokio::time::Instant::now() + self.config.lock_at_most_for();
        let mut unanswered = Duration::ZERO;
        loop {
            if self.stop.is_cancelled() {
                // Its body would start with `cancelled()` already resolved.
                self.hand_back(request).await;
                return;
            }
            let fire = self.fire_as(None, FireKind::Manual);
            let pause = match super::manual::with_requested_params(params.clone(), fire).await {
                RunOutcome::Skipped => {
                    if tokio::time::Instant::now() >= deadline {
                        tracing::warn!(
                            job = self.job.name(),
                            request,
                            "requested manual run gave up: the lock stayed held for the job's lock_at_most_for"
                        );
                        return;
                    }
                    Duration::from_millis(250)
                }
                RunOutcome::LockFailed(error) => {
                    if unanswered.is_zero() {
                        tracing::warn!(job = self.job.name(), request, %error, "requested manual run: the database did not answer; asking again until it does");
                    }
                    unanswered =
                        (unanswered * 2).clamp(Duration::from_millis(250), Duration::from_secs(5));
                    unanswered
                }
                outcome => {
                    tracing::info!(
                        job = self.job.name(),
                        request,
                        ?outcome,
                        "requested manual run done"
                    );
                    return;
                }
            };
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => {}
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// Hands claimed request `request` back (when the provider keeps the cluster's tables).
    async fn hand_back(&self, request: i64) {
        if let Some(ops) = &self.ops {
            ops.hand_back(self.job.name(), request).await;
        }
    }

    /// The loop. It holds the runner by `Arc`, shared with the job table, and borrows it in
    /// the slotted and fixed-delay loops: an idle job's task is the little a sleep needs,
    /// not two copies of the runner (an `async fn`'s arguments stay in its future).
    ///
    /// Not an `async fn`, and the end of the initial delay is the runner's
    /// (`not_before`), not an argument: what the future captures stays in it for the loop's
    /// whole life. The initial delay is slept here, so the loops keep no argument either:
    /// every byte of the future is in each idle job's task (a test holds it to tokio's
    /// 512-byte task cell).
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn keeps its argument twice in its future (8 bytes of every task)"
    )]
    pub(super) fn run(self: Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        async move {
            // A fixed-delay job's first fire is the end of its initial delay; a slotted job
            // plans its first slot once the delay has passed.
            if let Firing::AfterRun { .. } = self.job.trigger().spec().kind.firing() {
                self.plan(self.clock.now() + (self.not_before - tokio::time::Instant::now()));
            }
            if !self.sleep_until(self.not_before).await {
                return;
            }
            match self.job.trigger().spec().kind.firing() {
                Firing::Slotted { .. } => self.run_slotted().await,
                Firing::AfterRun { delay } => self.run_fixed_delay(delay).await,
                // No timer: its parents' successes start its runs (`dependencies.rs`).
                Firing::AfterParents => {}
            }
        }
    }

    /// Cron and fixed rate: sleep to each slot, fire it, repeat. A fire that overruns later
    /// slots skips them (they are logged), as Spring does.
    async fn run_slotted(&self) {
        // Slots missed while no instance ran the job (`misfire`), before any regular slot.
        let mut last: Option<FireSlot> = Box::pin(self.catch_up_at_start()).await;
        // The slot after `last`, computed before the sleep: the next slot when it is still
        // ahead once the fire is done (nothing overran), so a fire computes one slot, not
        // three, and none between its wake-up and its acquire (a thousand jobs due at one
        // instant wake one after another).
        let mut following: Option<FireSlot> = None;
        // A shared-out job (`sharing.rs`): whether this instance asked for the previous slot.
        let mut owned = true;
        loop {
            // `now` in a block of its own: a local in scope across the sleep below is kept in
            // every idle job's task.
            let slot = {
                let now = self.clock.now();
                match following.filter(|next| next.instant() > now) {
                    Some(next) => next,
                    None => {
                        let after = match last {
                            Some(last) if last.instant() > now => last.instant(),
                            _ => now,
                        };
                        let Some(slot) = self.job.trigger().next_slot(after) else {
                            tracing::info!(
                                job = self.job.name(),
                                "trigger fires no more; job loop ends"
                            );
                            return;
                        };
                        if let Some(last) = last
                            && !self.stop.is_cancelled()
                            && self.job.trigger().next_slot(last.instant()) != Some(slot)
                        {
                            tracing::warn!(job = self.job.name(), last = %last, next = %slot, "the previous run overran; slots in between are skipped");
                        }
                        slot
                    }
                }
            };
            self.plan(slot.instant());
            following = self.job.trigger().next_slot(slot.instant());
            // The fire asks for its lock ahead of the slot (the body starts at the slot): by
            // at most half the lease (a body starts with most of its lease left), and
            // at most half the way back to the previous slot (a fast fixed rate, every 100 ms,
            // would otherwise ask while its previous run still holds the lock). Computed here,
            // not kept across the sleep: every byte of the loop's future is in each idle job's
            // task.
            let ahead = self
                .executor
                .acquire_ahead()
                .min(self.config.lock_at_most_for() / 2);
            let ahead = chrono::TimeDelta::from_std(ahead).unwrap_or(chrono::TimeDelta::zero());
            let wake = match last {
                Some(last) if last.instant() < slot.instant() => (slot.instant() - ahead)
                    .max(last.instant() + (slot.instant() - last.instant()) / 2),
                _ => slot.instant() - ahead,
            };
            // On the monotonic clock, to the instant the database reaches `wake`; re-planned if
            // a refresh finds that the database's clock moved.
            if !self.clock.sleep_until(wake, &self.stop).await {
                return;
            }
            // A shared-out job is asked for by its owner alone; a loop that becomes the owner
            // first catches up what the previous owner left.
            if let Some(owns) = self.owns() {
                if !owns {
                    // Another instance owns the job: the loop waits, without a timer, until
                    // its view of the group makes it the owner, then plans from the clock.
                    owned = false;
                    if !Box::pin(self.wait_until_owner()).await {
                        return;
                    }
                    last = None;
                    following = None;
                    continue;
                }
                if !std::mem::replace(&mut owned, true) {
                    Box::pin(self.catch_up_handed_on()).await;
                }
            }
            // While this fire runs, the gauge already shows the one after it: a long run is
            // not a passed next fire to the missed-run alert.
            if let Some(following) = following {
                self.config
                    .metrics()
                    .next_fire_at(following.unix_millis() as f64 / 1e3);
            }
            // Boxed: while the loop sleeps it holds a pointer, not the fire's kilobytes of
            // state (10,000 idle jobs); one allocation per fire.
            self.state.take_slot_in_future();
            let (outcome, ran) = match self.job.overlap() {
                Overlap::Skip => (self.fire_as(Some(slot), FireKind::Scheduled).await, slot),
                // Slots due while the body runs are queued or replace it (`overlap.rs`).
                _ => Box::pin(self.fire_overlapping(slot)).await,
            };
            if self.state.take_slot_in_future() && Box::pin(self.database_behind(slot)).await {
                // Not done: planned again from the last slot run, by the clock just measured.
                following = None;
                continue;
            }
            if ran != slot {
                following = None;
            }
            last = Some(ran);
            if let RunOutcome::LockFailed(_) = outcome {
                // The database did not answer: the slot is missed (`misfire`).
                last = Box::pin(self.recover(slot)).await.or(last);
                // Recovery may have run later slots: the next one is computed from `last`.
                following = None;
            }
        }
    }

    /// After the database refused `slot` as more than `max_slot_lead` ahead of its clock:
    /// measures the database's clock at once (shared with the other loops refused meanwhile)
    /// and says whether the slot is still to fire. It is when the new measurement shows the
    /// database that far behind the slot (its clock stepped back): the loop then sleeps until
    /// the database reaches the slot, so no slot is lost to the step, on any instance. When
    /// it does not (the clock could not be read, or the provider's acquire and its clock
    /// disagree), the slot counts as done, as before, rather than being asked for in a loop.
    async fn database_behind(&self, slot: FireSlot) -> bool {
        let refused = tokio::time::Instant::now();
        let measured = tokio::select! {
            biased;
            _ = self.stop.cancelled() => return false,
            measured = self.clock.refresh_after(refused) => measured,
        };
        let now = self.clock.now();
        let lead = self.executor.max_slot_lead();
        let ahead = slot.instant() - now;
        if ahead > chrono::TimeDelta::from_std(lead).unwrap_or(chrono::TimeDelta::MAX) {
            tracing::warn!(
                job = self.job.name(),
                %slot,
                database_now = %now,
                ahead_seconds = ahead.as_seconds_f64(),
                "the database refused this slot as more than max_slot_lead ({lead:?}) ahead of \
                 its clock, and its clock, read again, is {:.3} s behind the slot: it stepped \
                 back; the slot is not lost, it fires when the database reaches it",
                ahead.as_seconds_f64()
            );
            return true;
        }
        match measured {
            Ok(()) => tracing::warn!(
                job = self.job.name(),
                %slot,
                database_now = %now,
                "the database refused this slot as more than max_slot_lead ({lead:?}) ahead of \
                 its clock, but its clock, read again, is not that far behind: the provider's \
                 acquire and its clock disagree; this slot is skipped"
            ),
            Err(error) => tracing::warn!(
                job = self.job.name(),
                %slot,
                error = &error as &dyn std::error::Error,
                "the database refused this slot as more than max_slot_lead ({lead:?}) ahead of \
                 its clock, and its clock could not be read again; this slot is skipped"
            ),
        }
        false
    }

    /// Fixed delay: the first fire once the initial delay has passed, then each `pause`
    /// after the previous run ended.
    async fn run_fixed_delay(&self, pause: Duration) {
        loop {
            Box::pin(self.fire(None)).await;
            let next = tokio::time::Instant::now() + pause;
            self.plan(self.clock.now() + pause);
            if !self.sleep_until(next).await {
                return;
            }
        }
    }

    /// For a shared-out job, whether this instance is its owner now; None when every
    /// instance asks for it.
    fn owns(&self) -> Option<bool> {
        let share = self.share?;
        let sharing = self.ops.as_ref()?.sharing.as_ref()?;
        Some(sharing.owns(share.key))
    }

    /// Waits until this instance owns its shared-out job (a heartbeat's view of the registry
    /// changed so); false if the scheduler stopped first. While it waits the job's status has
    /// no next fire, and the registry gets the trigger's next slot at each beat.
    async fn wait_until_owner(&self) -> bool {
        let (Some(share), Some(sharing)) = (
            self.share,
            self.ops.as_ref().and_then(|ops| ops.sharing.as_ref()),
        ) else {
            return true;
        };
        self.state.lock().next_fire = None;
        loop {
            let mut changes = sharing.changes();
            if sharing.owns(share.key) {
                return true;
            }
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => return false,
                changed = changes.changed() => if changed.is_err() {
                    return true;
                },
            }
        }
    }

    /// Records the next fire (database time) in the status and its gauge.
    fn plan(&self, next: chrono::DateTime<chrono::Utc>) {
        self.state.lock().next_fire = Some(next);
        self.config
            .metrics()
            .next_fire_at(next.timestamp_millis() as f64 / 1e3);
    }

    /// Sleeps until `deadline`; false if the scheduler stopped first.
    async fn sleep_until(&self, deadline: tokio::time::Instant) -> bool {
        tokio::select! {
            biased;
            _ = self.stop.cancelled() => false,
            _ = tokio::time::sleep_until(deadline) => true,
        }
    }

    async fn fire(&self, slot: Option<FireSlot>) {
        self.fire_as(slot, FireKind::Scheduled).await;
    }

    /// Runs one fire of `kind`: under the job's lock, or for a sharded or broadcast job each
    /// of its shards under its own (`shards.rs`).
    pub(super) async fn fire_as(&self, slot: Option<FireSlot>, kind: FireKind) -> RunOutcome {
        // Held for the whole fire: every shard here, every attempt.
        let _permit = match &self.permits {
            Some(permits) => match Box::pin(self.permit_for(permits, slot, kind)).await {
                Ok(permit) => Some(permit),
                Err(outcome) => return outcome,
            },
            None => None,
        };
        // Boxed here, once per fire, for every caller (the timer loop, catch-up, overlap,
        // manual runs): the fire's future is large, and nested in a caller's it would be
        // on the stack of a worker thread.
        let outcome = match &self.spread {
            Some(spread) => Box::pin(self.fire_spread(spread, slot, kind)).await,
            None => Box::pin(self.fire_one(slot, kind)).await,
        };
        self.note_outage(slot, kind, &outcome);
        outcome
    }

    /// After a scheduled or catch-up fire: the job's outage (`outage.rs`) and its two lines.
    fn note_outage(&self, slot: Option<FireSlot>, kind: FireKind, outcome: &RunOutcome) {
        // Manual runs are an operator's, and a dependent run its parent's, not the schedule's;
        // a pause asks nothing of the database.
        if matches!(kind, FireKind::Manual | FireKind::Dependency) || *outcome == RunOutcome::Paused
        {
            return;
        }
        let failed = match outcome {
            RunOutcome::LockFailed(error) => Some(error.as_str()),
            _ => None,
        };
        let now = self.clock.now();
        let change = outage::note(
            &mut self.state.lock().outage,
            failed.is_none(),
            slot,
            now,
            self.job.trigger(),
        );
        match change {
            Change::Quiet => {}
            Change::Down(down) => tracing::warn!(
                job = self.job.name(),
                down_for = ?down.to_std().unwrap_or_default(),
                error = failed.unwrap_or_default(),
                "job could not fire for more than two periods: the database did not answer its \
                 lock's acquire; it fires again when the database answers"
            ),
            Change::Back(down) => tracing::info!(
                job = self.job.name(),
                down_for = ?down.to_std().unwrap_or_default(),
                "job fires again: the database answers its lock's acquire"
            ),
        }
    }

    /// One fire of a sharded or broadcast job: each shard through [`JobRunner::fire_one`].
    pub(super) async fn fire_spread(
        &self,
        spread: &Spread,
        slot: Option<FireSlot>,
        kind: FireKind,
    ) -> RunOutcome {
        // The job's status covers the whole fire: running, and "in its body" (what shutdown
        // waits for and names) until every shard here has ended.
        self.state.set_in_body(true);
        {
            let mut status = self.state.lock();
            status.running = true;
            status.next_fire = None;
        }
        let started = tokio::time::Instant::now();
        let instance = self.executor.instance_id();
        let members = self.ops.as_ref().map(|ops| &ops.members);
        let outcome = match spread.distribution {
            Distribution::Broadcast => {
                match members.and_then(|m| m.rank_of(instance)) {
                    Some((rank, count)) if rank < MAX_SHARDS => {
                        match self.shard(spread, rank, count) {
                            Ok(runner) => self.fire_shard(&runner, slot, kind).await,
                            Err(error) => RunOutcome::LockFailed(error.to_string()),
                        }
                    }
                    // Not in the registry's view yet (before the first heartbeat), or over the
                    // limit of ranks.
                    _ => {
                        tracing::debug!(
                            job = self.job.name(),
                            "broadcast fire skipped: this instance has no rank among the live instances yet"
                        );
                        RunOutcome::Skipped
                    }
                }
            }
            Distribution::Shards(total) => {
                let (rank, count) = members
                    .and_then(|m| m.rank_of(instance))
                    .unwrap_or_else(|| (stable_hash(instance) % total, total));
                let (first, later): (Vec<u32>, Vec<u32>) = match (slot, kind) {
                    // A scheduled slot: this instance's shards first, the others as takeover.
                    (Some(_), FireKind::Scheduled | FireKind::CatchUp) => {
                        (0..total).partition(|index| index % count == rank)
                    }
                    // A manual run: every shard, here.
                    _ => ((0..total).collect(), Vec::new()),
                };
                let fire = |index: u32| async move {
                    match self.shard(spread, index, total) {
                        Ok(runner) => self.fire_shard(&runner, slot, kind).await,
                        Err(error) => RunOutcome::LockFailed(error.to_string()),
                    }
                };
                let own = futures_util::future::join_all(first.into_iter().map(&fire));
                let takeover = async {
                    if later.is_empty() {
                        return Vec::new();
                    }
                    tokio::select! {
                        biased;
                        _ = self.stop.cancelled() => return Vec::new(),
                        _ = tokio::time::sleep(spread.takeover) => {}
                    }
                    futures_util::future::join_all(later.into_iter().map(&fire)).await
                };
                let (own, taken) = tokio::join!(own, takeover);
                combine(own.into_iter().chain(taken))
            }
            Distribution::Single => self.fire_one(slot, kind).await,
        };
        self.state.set_in_body(false);
        let mut status = self.state.lock();
        status.running = false;
        status.last_outcome = Some(outcome.clone());
        status.last_duration = Some(started.elapsed());
        outcome
    }

    /// One shard's fire through its `runner`; a refusal of the slot as too far ahead of the
    /// database is passed on to this job's status, which the job loop reads.
    async fn fire_shard(
        &self,
        runner: &JobRunner,
        slot: Option<FireSlot>,
        kind: FireKind,
    ) -> RunOutcome {
        let outcome = Box::pin(runner.fire_one(slot, kind)).await;
        if runner.state.take_slot_in_future() {
            self.state.note_slot_in_future();
        }
        outcome
    }

    /// At a fire's end, after its history row was written: a failure of a job with a circuit
    /// breaker, on a scheduler keeping history, is counted (`breaker.rs`).
    async fn trip_breaker(&self, outcome: &RunOutcome) {
        let (Some(breaker), Some(ops)) = (self.job.breaker(), &self.ops) else {
            return;
        };
        let Some(store) = ops.provider().cluster().filter(|_| ops.keeps_history()) else {
            return;
        };
        if !breaker::is_failure(outcome) {
            return;
        }
        let tripped = breaker::after_run(
            store,
            self.job.name(),
            &self.history_name(),
            breaker,
            self.job.run_policy().retries,
            outcome,
            self.clock.now(),
            self.executor.operation_timeout(),
        )
        .await;
        if tripped {
            self.config.metrics().breaker_tripped();
        }
    }

    /// The runner of shard `index` of `total`: this one with the shard's lock.
    fn shard(&self, spread: &Spread, index: u32, total: u32) -> Result<JobRunner, LockError> {
        let (lock, state) = spread.shard(index, &self.job)?;
        Ok(JobRunner {
            config: lock.clone().with_shard((index, total)),
            state: state.clone(),
            spread: None,
            ..self.clone()
        })
    }

    /// How long after `slot` its body may still start: the job's `misfire_grace`, by default
    /// one period (the gap to the next slot), as for the slots `misfire.rs` catches up. A
    /// later start would be a missed slot's run, or overlap the next slot's.
    fn start_grace(&self, slot: FireSlot) -> Duration {
        let trigger = self.job.trigger();
        trigger.spec().misfire_grace.unwrap_or_else(|| {
            trigger
                .next_slot(slot.instant())
                .and_then(|next| (next.instant() - slot.instant()).to_std().ok())
                .unwrap_or(Duration::MAX)
        })
    }

    /// The name a run is kept under in the history: the job's, with `#<index>` for a shard.
    pub(super) fn history_name(&self) -> Cow<'_, str> {
        match self.config.shard() {
            Some((index, _)) => Cow::Owned(format!("{}#{index}", self.job.name())),
            None => Cow::Borrowed(self.job.name()),
        }
    }

    /// Runs one fire of `kind` under this runner's lock and records its outcome in the status.
    pub(super) async fn fire_one(&self, slot: Option<FireSlot>, kind: FireKind) -> RunOutcome {
        // A manual run is an operator's explicit request: it runs even while paused.
        if kind != FireKind::Manual
            && self
                .ops
                .as_ref()
                .is_some_and(|ops| ops.is_paused(self.job.name()))
        {
            tracing::debug!(job = self.job.name(), slot = ?slot.map(|s| s.instant()), "job paused cluster-wide; fire refused");
            self.config.metrics().paused();
            self.state.lock().last_outcome = Some(RunOutcome::Paused);
            return RunOutcome::Paused;
        }
        let recorder = self
            .ops
            .as_ref()
            .filter(|ops| ops.keeps_history())
            .map(|ops| {
                let name = match self.config.shard() {
                    Some(_) => Arc::from(self.history_name()),
                    None => self.job.shared_name(),
                };
                // A scheduled fire's end row may wait as long as its release does; its start
                // row half as long (`history_batches.rs`).
                let linger = self.config.release_linger();
                let lingering = match (slot, kind) {
                    (Some(slot), FireKind::Scheduled) if !linger.is_zero() => Some(Lingering {
                        due: self.clock.instant_at(slot.instant()),
                        linger,
                    }),
                    _ => None,
                };
                RunRecorder::new(
                    &self.executor,
                    ops.provider(),
                    ops.history_batches(),
                    name,
                    (kind, lingering),
                    ops.run_logs().map(|capture| capture.start_run()),
                    &self.clock,
                )
            });
        let span = tracing::info_span!(
            "fire",
            job = self.job.name(),
            slot = slot.map(tracing::field::display),
            instance = self.executor.instance_id(),
            shard = self.config.shard().map(|(index, _)| index),
            fence = tracing::field::Empty,
        );
        self.state.set_in_body(true);
        {
            let mut status = self.state.lock();
            status.running = true;
            status.next_fire = None;
        }
        let started = tokio::time::Instant::now();
        // Boxed: the run's future (every body kind's attempts) is large, and an unoptimized
        // build keeps several copies of it in this frame, enough to overflow a 2 MiB stack
        // under a sharded manual run's nesting.
        let pings = self.job.fire_pings(slot, &self.tasks);
        let outcome = AssertUnwindSafe(Box::pin(self.execute(
            slot,
            kind,
            recorder.clone(),
            pings.clone(),
        )))
        .catch_unwind()
        .instrument(span.clone())
        .await;
        let elapsed = started.elapsed();
        // A timeout resolves `cancelled()` itself; a panic's context is gone with it, and the
        // scheduler's stop is what can have asked it to cancel then.
        let cancel_requested = match &outcome {
            Ok(Ok(FireOutcome::Executed((Attempted::TimedOut, _)))) => true,
            Ok(Ok(FireOutcome::Executed((Attempted::Returned(_), cancelled)))) => *cancelled,
            _ => self.stop.is_cancelled(),
        };
        let outcome = match outcome {
            Ok(Ok(FireOutcome::Executed((Attempted::TimedOut, _)))) => {
                span.in_scope(|| {
                    tracing::error!(?elapsed, timeout = ?self.job.run_policy().timeout, "job timed out")
                });
                RunOutcome::TimedOut
            }
            Ok(Ok(FireOutcome::Executed((Attempted::Returned(Ok(())), true)))) => {
                span.in_scope(|| {
                    tracing::info!(
                        ?elapsed,
                        "job cancelled: the body returned after cancelled() resolved (shutdown or lost lock)"
                    )
                });
                self.config.metrics().cancelled();
                RunOutcome::Cancelled
            }
            Ok(Ok(FireOutcome::Executed((Attempted::Returned(Ok(())), false)))) => {
                span.in_scope(|| tracing::debug!(?elapsed, "job succeeded"));
                // Unix time by the database's clock, like every time here: a host whose clock
                // is off would otherwise shift the alert comparing it with Prometheus' `time()`.
                let now = self.clock.now().timestamp_micros() as f64 / 1e6;
                self.config.metrics().succeeded_at(now);
                RunOutcome::Succeeded
            }
            // An error stays a failure even when cancelled: the body said what went wrong.
            Ok(Ok(FireOutcome::Executed((Attempted::Returned(Err(error)), _)))) => {
                span.in_scope(|| tracing::error!(?elapsed, %error, "job failed"));
                self.config.metrics().failure();
                RunOutcome::Failed(error)
            }
            Ok(Ok(FireOutcome::Refused(refusal))) => {
                overlap::note_refusal(&refusal);
                if refusal.reason == RefusalReason::SlotInFuture && kind == FireKind::Scheduled {
                    self.state.note_slot_in_future();
                }
                RunOutcome::Skipped
            }
            // Granted later than misfire_grace after the slot and given back: a missed slot,
            // recorded as one (skipped, no history row).
            Ok(Ok(FireOutcome::Missed { late_by })) => {
                span.in_scope(|| {
                    tracing::warn!(
                        job = self.job.name(),
                        slot = slot.map(tracing::field::display),
                        late_seconds = late_by.as_secs_f64(),
                        misfire_grace = ?slot.map(|slot| self.start_grace(slot)),
                        "lock granted {:.3} s after the slot, later than misfire_grace: given \
                         back at once, the body not run; the slot is missed",
                        late_by.as_secs_f64()
                    )
                });
                RunOutcome::Skipped
            }
            // Logged by the executor; the next fire tries again.
            Ok(Err(error)) => RunOutcome::LockFailed(error.to_string()),
            Err(panic) => {
                let message = panic_message(&*panic);
                span.in_scope(|| tracing::error!(?elapsed, panic = %message, "job panicked"));
                self.config.metrics().failure();
                RunOutcome::Panicked(message)
            }
        };
        if let Some(pings) = &pings {
            pings.ended(&outcome);
        }
        // Before the end is recorded: a child's request is written with its parent's end.
        if let Some(ops) = &self.ops
            && ops.dependents.has_children(self.job.name())
        {
            Box::pin(self.parent_ended(ops, slot, &outcome)).await;
        }
        if let Some(recorder) = recorder {
            let ending = RunEnding {
                stopping: self.stop.is_cancelled(),
                cancel_requested,
            };
            recorder.ended(&outcome, ending).await;
            if self.job.breaker().is_some() {
                Box::pin(self.trip_breaker(&outcome)).await;
            }
        }
        // Skipped or refused: no body ran to clear it.
        self.state.set_in_body(false);
        let mut status = self.state.lock();
        status.running = false;
        status.last_outcome = Some(outcome.clone());
        status.last_duration = Some(elapsed);
        outcome
    }

    async fn execute(
        &self,
        slot: Option<FireSlot>,
        kind: FireKind,
        recorder: Option<RunRecorder>,
        pings: Option<Arc<FirePings>>,
    ) -> Result<FireOutcome<(Attempted, bool)>, LockError> {
        let executor = &self.executor;
        // When the database reaches a scheduled fire's slot: the body starts no earlier, and
        // its lag is measured from it; and no later than misfire_grace after it. A catch-up's
        // slot is missed by definition: its lateness is not the timer's.
        let (due, grace) = match (slot, kind) {
            (Some(slot), FireKind::Scheduled) => (
                Some(self.clock.instant_at(slot.instant())),
                Some(self.start_grace(slot)),
            ),
            _ => (None, None),
        };
        let values = &self.values;
        let state = &self.state;
        let attempts = Attempts {
            policy: self.job.run_policy(),
            config: &self.config,
            executor,
            recorder,
        };
        match self.job.body() {
            Body::Registered(JobBody::Async(body)) => {
                // Boxed: the executor's fire holds the body through its acquire, its wait
                // for the slot and its release, and each layer would copy it again.
                let fut = Box::pin(noting_end(
                    state.clone(),
                    overlap::replaceable(attempts.run(|| body(values))),
                    pings.map(|pings| (pings, self.config.name())),
                ));
                executor
                    .execute_fire(&self.config, slot, kind, due, grace, fut)
                    .await
            }
            Body::Async(body) => {
                // Boxed: the executor's fire holds the body through its acquire, its wait
                // for the slot and its release, and each layer would copy it again.
                let fut = Box::pin(noting_end(
                    state.clone(),
                    overlap::replaceable(attempts.run(|| body(values.clone()))),
                    pings.map(|pings| (pings, self.config.name())),
                ));
                executor
                    .execute_fire(&self.config, slot, kind, due, grace, fut)
                    .await
            }
            Body::Registered(JobBody::Blocking(body)) => {
                let (body, values, ended) = (*body, values.clone(), BodyEnd(state.clone()));
                let attempts = attempts.for_blocking();
                let watch = overlap::blocking_watch();
                let pings = pings.map(|pings| (pings, self.config.name().to_owned()));
                executor
                    .execute_blocking_fire(&self.config, slot, kind, due, grace, move || {
                        let _ended = ended;
                        if let Some((pings, lock_name)) = &pings {
                            pings.started(lock_name);
                        }
                        let _replaced = overlap::watch_blocking(watch);
                        (attempts.run(|| body(&values)), cancelled_now())
                    })
                    .await
            }
            Body::Blocking(body) => {
                let (body, values, ended) = (body.clone(), values.clone(), BodyEnd(state.clone()));
                let attempts = attempts.for_blocking();
                let watch = overlap::blocking_watch();
                let pings = pings.map(|pings| (pings, self.config.name().to_owned()));
                executor
                    .execute_blocking_fire(&self.config, slot, kind, due, grace, move || {
                        let _ended = ended;
                        if let Some((pings, lock_name)) = &pings {
                            pings.started(lock_name);
                        }
                        let _replaced = overlap::watch_blocking(watch);
                        (attempts.run(|| body(&values)), cancelled_now())
                    })
                    .await
            }
        }
    }
}

/// Marks the end of a body when dropped: returned, panicked, or never run (skipped).
struct BodyEnd(Arc<JobState>);

impl Drop for BodyEnd {
    fn drop(&mut self) {
        self.0.set_in_body(false);
    }
}

/// The body's output, and whether its `cancelled()` had resolved when it returned; marks the
/// body's end before the lease is released (or when dropped unpolled: the lock was not won).
/// Sends the dead-man switch's start first, if any: at the first poll, once the lock is won.
///
/// A future of its own, not an `async fn` (which keeps its future argument twice) nor
/// `lazy(..).then(..)` (which moves the body into place at its first poll, at the slot, when
/// a burst's thousands of bodies are about to start): the body stays where it was boxed.
fn noting_end<'a, T, F: Future<Output = T> + 'a>(
    state: Arc<JobState>,
    body: F,
    pings: Option<(Arc<FirePings>, &'a str)>,
) -> NotingEnd<'a, F> {
    NotingEnd {
        body,
        ended: Some(BodyEnd(state)),
        pings,
    }
}

pin_project_lite::pin_project! {
    /// See [`noting_end`].
    struct NotingEnd<'a, F> {
        #[pin]
        body: F,
        ended: Option<BodyEnd>,
        pings: Option<(Arc<FirePings>, &'a str)>,
    }
}

impl<F: Future> Future for NotingEnd<'_, F> {
    type Output = (F::Output, bool);

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let this = self.project();
        if let Some((pings, lock_name)) = this.pings.take() {
            pings.started(lock_name);
        }
        let out = std::task::ready!(this.body.poll(cx));
        drop(this.ended.take());
        std::task::Poll::Ready((out, cancelled_now()))
    }
}

/// Whether the running body's [`JobContext::cancelled`](lock_core::JobContext::cancelled) has
/// resolved; read inside the body's scope, where its context is current.
fn cancelled_now() -> bool {
    lock_core::JobContext::current().is_some_and(|ctx| ctx.is_cancelled())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_util::task::task_tracker::TrackedFuture;

    /// The size of the task the loop `run` returns is spawned as, without calling it.
    fn spawned_size<R>(_: fn(Arc<JobRunner>) -> R) -> usize {
        std::mem::size_of::<TrackedFuture<R>>()
    }

    /// Each idle job is one tokio task holding its loop's future (on the job loops'
    /// `TaskTracker`). Tokio allocates a task as one cache-aligned cell, in steps of 128 bytes
    /// on x86-64 and aarch64, of which (tokio 1.54) 96 bytes are its own header, core and
    /// trailer and 8 the tag of the stage the future is kept in: up to 408 bytes of tracked
    /// future, the cell is 512 bytes, above it 640. For 10,000 jobs that is 1.3 MB of the
    /// `idle_cost` one-expression target (30 MB); what a job's loop keeps across its sleep
    /// is every job's cost.
    #[test]
    fn an_idle_jobs_task_fits_a_512_byte_cell() {
        let size = spawned_size(JobRunner::run);
        assert!(
            size <= 408,
            "a job loop's task is {size} bytes (at most 408 fits tokio's 512-byte cell): keep \
             locals out of scope across the loop's sleep, box what a fire needs"
        );
    }
}
