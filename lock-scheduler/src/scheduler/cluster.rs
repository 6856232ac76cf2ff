//! The scheduler's part in operating a cluster (see [`lock_cluster`]): the heartbeat that
//! registers this instance and its jobs and brings back pauses, trigger requests and the live
//! instances (what sharded jobs take their ranks from), the run history written around each
//! body, and the housekeeping job that deletes old history.
//!
//! Decisions, and why:
//! - **One heartbeat, every `heartbeat_interval` (1 s).** It upserts the instance's row and the
//!   rows of the jobs whose registration changed (next fire moved, job added) in one
//!   statement, and reads the pauses and unclaimed trigger requests (PostgreSQL: in that same
//!   statement; MySQL: a second statement; SQLite: one local transaction). An idle beat thus
//!   writes one row whatever the number of jobs. A next fire that moved only because the job
//!   fired is not a change until the registered one is [`REWRITE_PASSED_AFTER`] (10 s) old:
//!   a job due every second does not rewrite its row at every beat, and the view shows a row's
//!   following fire once its next fire ran. Every [`COMPLETE_EVERY`]th beat, the first,
//!   the one after a failed beat and the one after a job was removed are complete: every job's
//!   row, and the rows of jobs no longer run deleted (a second statement). A job row's
//!   `heartbeat_at` is when it last changed; whether it is live is its instance row's. With
//!   an interval of whole seconds, the beats after the first go at half past a second of the
//!   database's clock, away from the whole seconds cron slots fire at (`off_the_second`). A fire adds no round trip for pause or trigger: the runner reads the pause
//!   set the last heartbeat brought back. So a pause takes effect on every instance from its
//!   next heartbeat (at most one interval after `lockctl pause` returned, plus the
//!   statement's time): fires in between still run.
//! - **A manual trigger waits for the lock.** A request claimed while the job runs (here or
//!   elsewhere) is retried every 250 ms until the lock is free, for at most the job's
//!   `lock_at_most_for`; it then runs once with `FireKind::Manual`, even if the job is paused
//!   (an operator's explicit request). Only a live instance that runs the job claims it, and
//!   exactly one does (an atomic claim). A database error is no run: it is asked again until
//!   the database answers. A request the instance cannot run (shutdown began, or the claim's
//!   reply was lost) is handed back unclaimed (`unclaim_trigger`), for any live instance to
//!   claim: a claimed request is never dropped without a run.
//! - **History is written around the body, not in the lock's statements** (`history.rs`): a
//!   start row as the body starts (the body does not wait for it), its end after the body.
//!   A failure to write it is logged and never stops the body: history is for operators, the
//!   lock is for correctness.

use super::run_log_capture::RunLogCapture;
use super::run_logs::RunLogs;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use lock_trigger::TriggerKind;

use super::dependents::Dependents;
use super::sharing::Sharing;
use super::status::{JobState, UNREGISTERED};
use super::{Inner, Job, Trigger};
use crate::clock::DatabaseClock;
use crate::history_batches::HistoryBatches;
use lock_cluster::{
    Cluster, ClusterProvider, ControlKind, Expired, GONE_AFTER_HEARTBEATS, Heartbeat, InstanceInfo,
    JobRegistration, MAX_TEXT_LEN, RegistryRow, truncate,
};
use lock_core::{LockConfiguration, LockError, LockProvider};

/// The default [`SchedulerBuilder::heartbeat_interval`](crate::SchedulerBuilder::heartbeat_interval):
/// one second, so a trigger request is picked up within about a second and a pause is in
/// force everywhere about a second after it was asked for.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// The name (and lock name) of the housekeeping job that deletes history older than the
/// retention, added whenever the run history is on (the default; see
/// [`SchedulerBuilder::history`](crate::SchedulerBuilder::history)).
pub const HOUSEKEEPING_JOB: &str = "lock_core_history_housekeeping";

/// Rows one housekeeping statement deletes at most: small enough that a statement never holds
/// a big table's locks for long.
pub const HOUSEKEEPING_BATCH: u32 = 500;

/// Statements per kind of row per housekeeping run at most; what is left waits for the next.
const HOUSEKEEPING_MAX_BATCHES: u32 = 20;

/// Registry rows of instances gone for longer than this (or the retention, if longer) are
/// deleted by housekeeping, and by each instance's hourly sweep.
const REGISTRY_RETENTION: Duration = Duration::from_secs(24 * 3600);

/// What the scheduler needs of the operations tables while it runs.
pub(super) struct Operations {
    provider: Arc<dyn ClusterProvider>,
    instance: InstanceInfo,
    /// History kept this long; None: no history.
    retention: Option<Duration>,
    pub(super) interval: Duration,
    operation_timeout: Duration,
    /// The jobs paused cluster-wide, as of the last heartbeat.
    paused: RwLock<HashSet<String>>,
    /// The heartbeat is failing (logged once until it works again).
    failing: Mutex<bool>,
    /// When the next complete beat is due, and how many jobs the registry holds.
    beats: Mutex<Beats>,
    /// The live instances, for sharded and broadcast jobs (`shards.rs`).
    pub(super) members: Members,
    /// Shared-out jobs (`sharing.rs`), when `share_jobs` is on.
    pub(super) sharing: Option<Sharing>,
    /// The run history's coalesced writes, when the store batches them and batching is on.
    history_batches: Option<Arc<HistoryBatches>>,
    /// Which jobs run after which, and the child fires due (`dependents.rs`).
    pub(super) dependents: Dependents,
    /// The capture of each run's log lines (`run_log_capture.rs`), when on and history is.
    run_logs: Option<Arc<RunLogCapture>>,
    /// Leave the registry at a graceful stop even without sharded or broadcast jobs: the
    /// alert rules tell a stop from a crash by it.
    leaves_on_stop: AtomicBool,
}

impl Operations {
    /// The operations of `provider`, when it keeps them and its tables exist; otherwise logs
    /// what is missing (a warning when the tables are missing, or when history was asked for
    /// by `.history(..)` on a provider without them) and returns why, for `start()`'s INFO
    /// line (the scheduler then runs as without them).
    #[allow(clippy::too_many_arguments)] // one call site, in start(), which has them all
    pub(super) async fn set_up(
        provider: &Arc<dyn ClusterProvider>,
        instance_id: &str,
        retention: Option<Duration>,
        history_asked: bool,
        interval: Duration,
        operation_timeout: Duration,
        batch_window: Duration,
        clock: &DatabaseClock,
        run_logs: RunLogs,
        share_jobs: bool,
    ) -> Result<Arc<Self>, String> {
        let Some(store) = provider.cluster() else {
            if history_asked {
                tracing::warn!(
                    provider = %provider.describe(),
                    "run history was asked for, but this provider keeps no operations tables: \
                     no history, job registry, pause or trigger requests; the jobs run as usual"
                );
            } else {
                tracing::debug!(provider = %provider.describe(), "provider keeps no operations tables");
            }
            return Err("this provider keeps no operations tables".into());
        };
        let checked = tokio::time::timeout(operation_timeout, store.check()).await;
        let error = match checked {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some(format!("no answer within {operation_timeout:?}")),
        };
        if let Some(error) = error {
            tracing::warn!(
                tables = %store.tables(),
                %error,
                "the operations tables are missing or unreadable: no job registry, run history, \
                 pause or trigger requests for this instance (the jobs run as usual); call the \
                 provider's ensure_schema() to create {}",
                store.tables()
            );
            return Err(format!(
                "the operations tables ({}) are missing or unreadable: run ensure_schema()",
                store.tables()
            ));
        }
        let host = gethostname::gethostname().to_string_lossy().into_owned();
        Ok(Arc::new(Operations {
            history_batches: HistoryBatches::new(provider, batch_window),
            provider: provider.clone(),
            instance: InstanceInfo {
                instance_id: instance_id.to_owned(),
                host: truncate(&host, MAX_TEXT_LEN).to_owned(),
                pid: std::process::id(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                started_at: lock_core::FireSlot::new(clock.now()).instant(),
                clock_offset_ms: 0,
                heartbeat_ms: i64::try_from(interval.as_millis()).unwrap_or(i64::MAX),
            },
            retention,
            interval,
            operation_timeout,
            paused: RwLock::default(),
            failing: Mutex::new(false),
            // The first beat is complete: it deletes the rows of a previous run of this
            // instance id.
            beats: Mutex::new(Beats {
                since_complete: COMPLETE_EVERY,
                known: 0,
            }),
            members: Default::default(),
            sharing: share_jobs.then(|| Sharing::new(instance_id)),
            dependents: Dependents::new(interval),
            // Lines are kept with the history's rows: without history, nothing to keep.
            run_logs: retention
                .and_then(|_| RunLogCapture::new(run_logs, clock.clone()))
                .map(Arc::new),
            leaves_on_stop: AtomicBool::new(false),
        }))
    }

    /// History's retention, when runs are written to the history.
    pub(super) fn retention(&self) -> Option<Duration> {
        self.retention
    }

    fn store(&self) -> &dyn Cluster {
        self.provider
            .cluster()
            .expect("set_up found the provider's operations tables")
    }

    /// Whether `job` was paused cluster-wide at the last heartbeat.
    pub(super) fn is_paused(&self, job: &str) -> bool {
        self.paused
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains(job)
    }

    /// Reads the cluster's pauses once, before the job loops start: a job paused cluster-wide
    /// must not fire once at start because the first heartbeat had not answered yet (on a
    /// loaded host the first fire of a short period can come first). A read that fails or
    /// does not answer within the operation timeout leaves the pauses to the first heartbeat,
    /// as a failing heartbeat does later (the jobs run; the warning comes from the beat).
    pub(super) async fn read_pauses(&self) {
        let read = tokio::time::timeout(self.operation_timeout, self.store().control()).await;
        match read {
            Ok(Ok(control)) => {
                let paused: HashSet<String> = control
                    .into_iter()
                    .filter(|c| c.kind == ControlKind::Pause)
                    .map(|c| c.job)
                    .collect();
                *self.paused.write().unwrap_or_else(|p| p.into_inner()) = paused;
            }
            Ok(Err(error)) => tracing::debug!(
                error = &error as &dyn std::error::Error,
                "reading the pauses at start failed; the first heartbeat takes them in"
            ),
            Err(_) => tracing::debug!(
                "reading the pauses at start timed out; the first heartbeat takes them in"
            ),
        }
    }

    /// Makes a graceful stop leave the registry (see [`leave`](Self::leave)).
    #[cfg_attr(not(feature = "alerts"), allow(dead_code))]
    pub(super) fn leave_on_stop(&self) {
        self.leaves_on_stop.store(true, Ordering::Relaxed);
    }

    /// The capture of runs' log lines, when runs keep them.
    pub(super) fn run_logs(&self) -> Option<&RunLogCapture> {
        self.run_logs.as_deref()
    }

    /// Whether runs are written to the history.
    pub(super) fn keeps_history(&self) -> bool {
        self.retention.is_some()
    }

    /// The provider whose cluster tables these are.
    pub(super) fn provider(&self) -> &Arc<dyn ClusterProvider> {
        &self.provider
    }

    /// The run history's coalesced writes (None: each row on its own).
    pub(super) fn history_batches(&self) -> Option<&Arc<HistoryBatches>> {
        self.history_batches.as_ref()
    }

    /// The housekeeping job: deletes history older than the retention in bounded batches,
    /// every quarter of the retention (between 1 s and 1 h), under its own lock.
    pub(super) fn housekeeping_job(self: &Arc<Self>) -> Result<Option<Job>, LockError> {
        let Some(retention) = self.retention else {
            return Ok(None);
        };
        let every = (retention / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600));
        let ops = self.clone();
        let job = Job::new(HOUSEKEEPING_JOB, Trigger::fixed_rate(every)?, move || {
            let ops = ops.clone();
            async move { ops.housekeep(retention).await }
        })
        .with_lock(LockConfiguration::new(
            HOUSEKEEPING_JOB,
            Duration::from_secs(300),
            Duration::ZERO,
        )?);
        Ok(Some(job))
    }

    async fn housekeep(&self, retention: Duration) -> Result<(), LockError> {
        let now = self.provider.database_time().await?;
        let cut = |keep: Duration| {
            now - chrono::TimeDelta::from_std(keep).unwrap_or(chrono::TimeDelta::MAX / 2)
        };
        let store = self.store();
        let mut deleted = 0;
        for (what, before) in [
            (Expired::Runs, cut(retention)),
            (Expired::ClaimedTriggers, cut(retention)),
            (
                Expired::StaleRegistry,
                cut(retention.max(REGISTRY_RETENTION)),
            ),
        ] {
            for _ in 0..HOUSEKEEPING_MAX_BATCHES {
                let n = store
                    .delete_expired(what, before, HOUSEKEEPING_BATCH)
                    .await?;
                deleted += n;
                if n < u64::from(HOUSEKEEPING_BATCH) {
                    break;
                }
            }
        }
        // The action log and the alert rules' resolved incidents age with the history. A
        // deployment whose tables predate them has none until its next `ensure_schema`: that
        // is no reason to fail the housekeeping.
        for what in [Expired::Actions, Expired::Incidents] {
            for _ in 0..HOUSEKEEPING_MAX_BATCHES {
                match store
                    .delete_expired(what, cut(retention), HOUSEKEEPING_BATCH)
                    .await
                {
                    Ok(n) => {
                        deleted += n;
                        if n < u64::from(HOUSEKEEPING_BATCH) {
                            break;
                        }
                    }
                    Err(error) => {
                        tracing::debug!(
                            ?what,
                            error = &error as &dyn std::error::Error,
                            "old rows were not deleted"
                        );
                        break;
                    }
                }
            }
        }
        tracing::debug!(deleted, ?retention, "history housekeeping");
        Ok(())
    }

    /// Deletes registry rows not refreshed for [`REGISTRY_RETENTION`] (instances long gone,
    /// jobs removed) and trigger requests claimed that long ago, one bounded batch each.
    async fn sweep_registry(&self, clock: &DatabaseClock) {
        let before = clock.now()
            - chrono::TimeDelta::from_std(REGISTRY_RETENTION).unwrap_or(chrono::TimeDelta::MAX / 2);
        for what in [Expired::StaleRegistry, Expired::ClaimedTriggers] {
            let delete = self
                .store()
                .delete_expired(what, before, HOUSEKEEPING_BATCH);
            match tokio::time::timeout(self.operation_timeout, delete).await {
                Ok(Ok(deleted)) => tracing::debug!(?what, deleted, "registry sweep"),
                Ok(Err(error)) => tracing::debug!(
                    ?what,
                    error = &error as &dyn std::error::Error,
                    "registry sweep failed; tried again in an hour"
                ),
                Err(_) => {
                    tracing::debug!(?what, "registry sweep timed out; tried again in an hour")
                }
            }
        }
    }

    /// The registrations this beat sends: every job's when `complete`, else those whose next
    /// fire moved since the registry got it (and jobs it never got). Returns them with the
    /// value to remember per job once the beat succeeded, and whether the beat must be
    /// complete after all (a job the registry holds is gone from the table: only a complete
    /// beat deletes its row).
    fn registrations(&self, inner: &Inner, complete: bool) -> Option<Registrations> {
        let entries = inner.jobs.lock();
        let now = inner.clock.now();
        let mut out = Registrations::default();
        if complete {
            out.jobs.reserve_exact(entries.len());
            out.sent.reserve_exact(entries.len());
        }
        // Jobs the registry holds a row of, and jobs it has none of yet.
        let (mut known, mut fresh) = (0, 0);
        for (index, entry) in entries
            .iter()
            .filter(|entry| entry.name().len() <= MAX_TEXT_LEN)
            .enumerate()
        {
            let trigger = entry.runner.job.trigger();
            let before = entry.state.registered.load(Ordering::Relaxed);
            if before != UNREGISTERED {
                known += 1;
            } else {
                fresh += 1;
            }
            let planned = entry.state.lock().next_fire;
            // While a fire runs, or another instance owns a shared-out job, its status has no
            // next fire; the registry still gets the trigger's next slot, so a missed fire is
            // judged by it. That slot is after `now`, so after a registered fire that has
            // passed: when that one passed recently the row stays (`moved_along`) and the
            // slot is not computed (7,500 cron evaluations a beat on each of 4 instances
            // sharing 10,000 jobs).
            if !complete && planned.is_none() && passed_recently(before, now, index) {
                continue;
            }
            let next_fire = planned.or_else(|| trigger.next_slot(now).map(|s| s.instant()));
            let key = registered_key(next_fire);
            if !complete && (before == key || moved_along(before, key, now, index)) {
                continue;
            }
            let following_fire = next_fire
                .and_then(|next| trigger.next_slot(next))
                .map(|s| s.instant());
            out.jobs.push(JobRegistration {
                name: entry.name().to_owned(),
                lock_name: entry.lock_name().to_owned(),
                trigger: truncate(&entry.state.trigger, MAX_TEXT_LEN).to_owned(),
                zone: zone_of(trigger),
                next_fire,
                following_fire,
            });
            out.sent.push((entry.state.clone(), key));
        }
        if !complete && known < self.beats.lock().unwrap_or_else(|p| p.into_inner()).known {
            return None;
        }
        out.known = if complete {
            out.sent.len()
        } else {
            known + fresh
        };
        Some(out)
    }

    /// One heartbeat: registers this instance and what changed of its jobs (all of them every
    /// [`COMPLETE_EVERY`] beats), takes in the pauses, and claims the trigger requests for
    /// jobs it runs.
    async fn beat(&self, inner: &Inner) {
        let complete = {
            let mut beats = self.beats.lock().unwrap_or_else(|p| p.into_inner());
            beats.since_complete += 1;
            beats.since_complete >= COMPLETE_EVERY
        };
        let (registrations, complete) = match self.registrations(inner, complete) {
            Some(registrations) => (registrations, complete),
            None => (
                self.registrations(inner, true)
                    .expect("a complete beat always has its registrations"),
                true,
            ),
        };
        let mut instance = self.instance.clone();
        instance.clock_offset_ms = inner.clock.host_offset().num_milliseconds();
        if let Some(sharing) = &self.sharing {
            instance.version = sharing.version(&instance.version);
        }
        let registered = instance.version.clone();
        let Registrations { jobs, sent, known } = registrations;
        let beat = Heartbeat { instance, jobs };
        let store = self.store();
        // The view of the live instances, for sharded, broadcast and shared-out jobs: read
        // with the beat where the store does both in one transaction (a beat of changes),
        // after it otherwise.
        let viewing = self.members.wanted() || self.sharing.is_some();
        let mut instances = None;
        let sending = async {
            if complete {
                store.heartbeat(&beat).await
            } else if viewing {
                let (control, rows) = store.heartbeat_changes_and_instances(&beat).await?;
                instances = Some(rows);
                Ok(control)
            } else {
                store.heartbeat_changes(&beat).await
            }
        };
        let reply = tokio::time::timeout(self.operation_timeout, sending)
            .await
            .unwrap_or_else(|_| {
                Err(LockError::Timeout {
                    operation: "heartbeat",
                    lock: String::new(),
                    after: self.operation_timeout,
                })
            });
        let control = match reply {
            Ok(control) => {
                for (state, key) in sent {
                    state.registered.store(key, Ordering::Relaxed);
                }
                let mut beats = self.beats.lock().unwrap_or_else(|p| p.into_inner());
                beats.known = known;
                if complete {
                    beats.since_complete = 0;
                }
                let mut failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
                if std::mem::take(&mut *failing) {
                    tracing::info!("heartbeat works again");
                }
                control
            }
            Err(error) => {
                // What this beat carried may not have been written: the next one is complete.
                self.beats
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .since_complete = COMPLETE_EVERY;
                let mut failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
                if !std::mem::replace(&mut *failing, true) {
                    tracing::warn!(
                        error = &error as &dyn std::error::Error,
                        "heartbeat failed; pauses and trigger requests are not seen until it works again (the jobs keep running)"
                    );
                } else {
                    tracing::debug!(
                        error = &error as &dyn std::error::Error,
                        "heartbeat failed again"
                    );
                }
                return;
            }
        };
        if viewing {
            let sharing = self.sharing.as_ref().map(|s| (s, registered.as_str()));
            let rows = match instances {
                Some(rows) => Some(rows),
                None => self.members.read(store, self.operation_timeout).await,
            };
            if let Some(rows) = rows {
                self.members.see(rows, inner.clock.now(), sharing);
            }
        }
        // The circuit breaker's pauses that lasted their pause_for end here (`breaker.rs`).
        let resumed = super::breaker::resume_elapsed(
            store,
            &control,
            inner.clock.now(),
            |job| {
                inner
                    .jobs
                    .runner(job)
                    .and_then(|runner| runner.job.breaker())
            },
            self.operation_timeout,
        )
        .await;
        let paused: HashSet<String> = control
            .iter()
            .filter(|c| c.kind == ControlKind::Pause && !resumed.contains(&c.job))
            .map(|c| c.job.clone())
            .collect();
        *self.paused.write().unwrap_or_else(|p| p.into_inner()) = paused;
        // Dependent runs whose parent's instance did not fire them (`dependents.rs`).
        self.dependents.recover(&control, inner.clock.now());
        for request in control.iter().filter(|c| c.kind == ControlKind::Trigger) {
            let Some(runner) = inner.jobs.runner(&request.job) else {
                continue;
            };
            if inner.stop.is_cancelled() {
                return;
            }
            let claim = self
                .store()
                .claim_trigger(request.id, &self.instance.instance_id);
            match tokio::time::timeout(self.operation_timeout, claim).await {
                Ok(Ok(true)) => {
                    tracing::info!(job = ?request.job, request = request.id, requested_by = ?request.requested_by, "manual run requested; claimed by this instance");
                    inner
                        .loops
                        .spawn(runner.run_requested(request.id, request.params.clone()));
                }
                Ok(Ok(false)) => {}
                // The claim may have been written with its reply lost: handed back, so that
                // it is not left claimed by an instance that never runs it.
                Ok(Err(error)) => {
                    tracing::warn!(job = ?request.job, error = &error as &dyn std::error::Error, "could not claim a trigger request");
                    self.hand_back(&request.job, request.id).await;
                }
                Err(_) => {
                    tracing::warn!(job = ?request.job, "claiming a trigger request timed out");
                    self.hand_back(&request.job, request.id).await;
                }
            }
        }
    }

    /// Hands trigger request `id` of `job`, claimed by this instance, back unclaimed: shutdown
    /// began before it ran, or the claim's reply was lost. Tried a few times (the database may
    /// be failing over); if it still fails, the request stays claimed, and a `WARN` says so.
    pub(super) async fn hand_back(&self, job: &str, id: i64) {
        let mut pause = Duration::from_millis(100);
        for attempt in 1..=HAND_BACK_ATTEMPTS {
            let unclaim = self.store().unclaim_trigger(id, &self.instance.instance_id);
            let error = match tokio::time::timeout(self.operation_timeout, unclaim).await {
                Ok(Ok(true)) => {
                    tracing::info!(
                        job,
                        request = id,
                        "trigger request handed back unclaimed: another instance (or this one, restarted) runs it"
                    );
                    return;
                }
                // Not claimed by this instance: nothing to hand back.
                Ok(Ok(false)) => return,
                Ok(Err(error)) => error.to_string(),
                Err(_) => format!("no answer within {:?}", self.operation_timeout),
            };
            if attempt == HAND_BACK_ATTEMPTS {
                tracing::warn!(job, request = id, %error, "could not hand a claimed trigger request back; it stays claimed by this instance and does not run: trigger the job again");
                return;
            }
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
    }
}

/// How many times [`Operations::hand_back`] asks before it gives up.
const HAND_BACK_ATTEMPTS: u32 = 3;

impl Operations {
    /// At a graceful stop of a scheduler with sharded or broadcast jobs, or with alert rules:
    /// one last heartbeat with a zero interval, which marks this instance gone at once (it
    /// counts as gone after [`GONE_AFTER_HEARTBEATS`] intervals), so the others re-rank at
    /// their next heartbeat instead of after five, and the alert rules see that it left
    /// rather than died.
    pub(super) async fn leave(&self) {
        if !self.members.wanted() && !self.leaves_on_stop.load(Ordering::Relaxed) {
            return;
        }
        let mut instance = self.instance.clone();
        instance.heartbeat_ms = 0;
        // Complete and without jobs: their rows go, as the instance does.
        let beat = Heartbeat {
            instance,
            jobs: Vec::new(),
        };
        match tokio::time::timeout(self.operation_timeout, self.store().heartbeat(&beat)).await {
            Ok(Ok(_)) => tracing::debug!("left the registry"),
            Ok(Err(error)) => tracing::debug!(
                error = &error as &dyn std::error::Error,
                "leaving the registry failed; the others see this instance gone after its heartbeats stop"
            ),
            Err(_) => tracing::debug!("leaving the registry timed out"),
        }
    }
}

/// Every this many heartbeats, one is complete: it writes every job's row (not only those
/// whose registration changed) and deletes the rows of jobs the instance no longer runs. It
/// restores rows the store lost (a purge, a flushed Redis) within a minute at the default
/// interval, and keeps every live job row far younger than the registry's retention.
pub(super) const COMPLETE_EVERY: u32 = 60;

/// How long a job row may keep a next fire that already came and went, when all that
/// changed since is that the job fired and moved on along its trigger: a beat does not rewrite
/// it until the registered fire is this far behind the database's clock (less a spread of up
/// to [`REWRITE_SPREAD`] by the job's place in the table, so that the rows of jobs with one
/// schedule are not all rewritten in one beat). Without it, a job due every second rewrote its
/// row at every beat, on every instance: 40,000 rows a second for 4 instances x 10,000 such
/// jobs. Readers lose nothing: the view ([`lock_cluster::ClusterView`]) shows the row's
/// following fire once its next fire ran, and a job that stopped firing has its row rewritten
/// within this bound, far inside the missed-slot rule's grace (a minute by default).
pub(super) const REWRITE_PASSED_AFTER: TimeDelta = TimeDelta::seconds(10);

/// See [`REWRITE_PASSED_AFTER`].
const REWRITE_SPREAD: i64 = 5;

/// Whether a job row whose registered next fire is `before` (a [`registered_key`]) can stay
/// as it is while the job's next fire is `key`: the registered fire has come (the job moved on
/// from it, it did not move back or jump ahead of the database's clock) and is less than
/// [`REWRITE_PASSED_AFTER`] (less the spread of the job at `index`) behind `now`.
fn moved_along(before: i64, key: i64, now: DateTime<Utc>, index: usize) -> bool {
    key > before && passed_recently(before, now, index)
}

/// Whether the registered next fire `before` (a [`registered_key`]) has come, less than
/// [`REWRITE_PASSED_AFTER`] (less the spread of the job at `index`) before `now`.
fn passed_recently(before: i64, now: DateTime<Utc>, index: usize) -> bool {
    if before == UNREGISTERED || before == i64::MAX {
        return false;
    }
    let Some(registered) = DateTime::from_timestamp_micros(before) else {
        return false;
    };
    let spread = TimeDelta::seconds((index as i64) % REWRITE_SPREAD);
    registered <= now && now - registered < REWRITE_PASSED_AFTER - spread
}

/// A next fire as [`JobState::registered`](super::status::JobState) keeps it: microseconds
/// since the epoch, `i64::MAX` for none.
fn registered_key(next_fire: Option<chrono::DateTime<chrono::Utc>>) -> i64 {
    next_fire.map_or(i64::MAX, |at| at.timestamp_micros())
}

/// Heartbeat bookkeeping (under one mutex, touched once per beat).
struct Beats {
    /// Beats since the last complete one.
    since_complete: u32,
    /// How many of the scheduler's jobs the registry holds a row of, as of the last beat.
    known: usize,
}

/// What one beat sends of the jobs.
#[derive(Default)]
struct Registrations {
    jobs: Vec<JobRegistration>,
    /// The jobs sent, with their [`registered_key`] to remember once written.
    sent: Vec<(Arc<JobState>, i64)>,
    /// How many jobs the registry holds a row of once this beat is written.
    known: usize,
}

/// How often an instance deletes registry rows and claimed trigger requests older than
/// [`REGISTRY_RETENTION`], with or without history (pods come and go; their rows must not
/// pile up): one bounded statement of each kind per instance per hour.
const REGISTRY_SWEEP: Duration = Duration::from_secs(3600);

/// The live instances, as of the last heartbeat: what ranks are taken from.
#[derive(Default)]
pub(super) struct Members {
    /// A sharded or broadcast job runs here: the heartbeat reads the registry.
    wanted: AtomicBool,
    /// The live instances' ids, sorted.
    live: RwLock<Arc<[String]>>,
}

impl Members {
    /// Asks the heartbeat to keep the view (a sharded or broadcast job was added).
    pub(super) fn want(&self) {
        self.wanted.store(true, Ordering::Relaxed);
    }

    pub(super) fn wanted(&self) -> bool {
        self.wanted.load(Ordering::Relaxed)
    }

    /// `instance`'s position among the live instances and their number.
    pub(super) fn rank_of(&self, instance: &str) -> Option<(u32, u32)> {
        let live = self.live.read().unwrap_or_else(|p| p.into_inner()).clone();
        let rank = live.binary_search_by(|id| id.as_str().cmp(instance)).ok()?;
        Some((u32::try_from(rank).ok()?, u32::try_from(live.len()).ok()?))
    }

    /// Reads the instances' rows of the registry (right after this instance's heartbeat);
    /// `None` when the read failed (logged): the view stays as it was.
    pub(super) async fn read(
        &self,
        store: &dyn Cluster,
        timeout: Duration,
    ) -> Option<Vec<RegistryRow>> {
        match tokio::time::timeout(timeout, store.instances()).await {
            Ok(Ok(rows)) => Some(rows),
            Ok(Err(error)) => {
                tracing::debug!(
                    error = &error as &dyn std::error::Error,
                    "reading the live instances failed; the shards keep the last view"
                );
                None
            }
            Err(_) => {
                tracing::debug!(
                    "reading the live instances timed out; the shards keep the last view"
                );
                None
            }
        }
    }

    /// Keeps the instances of `rows` alive at `now` (database time) as the view, and gives
    /// them to `sharing` with the version this instance's beat registered.
    pub(super) fn see(
        &self,
        rows: Vec<RegistryRow>,
        now: DateTime<Utc>,
        sharing: Option<(&Sharing, &str)>,
    ) {
        let live_rows: Vec<InstanceInfo> = rows
            .into_iter()
            .filter(|row| row.job.is_none())
            .filter(|row| {
                let window = TimeDelta::milliseconds(
                    row.instance.heartbeat_ms.max(1) * GONE_AFTER_HEARTBEATS,
                );
                now - row.heartbeat_at <= window
            })
            .map(|row| row.instance)
            .collect();
        if let Some((sharing, registered)) = sharing {
            sharing.see(
                registered,
                live_rows
                    .iter()
                    .map(|i| (i.instance_id.as_str(), i.version.as_str())),
            );
        }
        let mut live: Vec<String> = live_rows.into_iter().map(|i| i.instance_id).collect();
        live.sort();
        live.dedup();
        *self.live.write().unwrap_or_else(|p| p.into_inner()) = live.into();
    }
}

/// Heartbeats every interval until the scheduler has stopped and the last body has ended,
/// and sweeps the registry every [`REGISTRY_SWEEP`].
///
/// The beats go on while shutdown drains the running bodies: a drain longer than
/// [`GONE_AFTER_HEARTBEATS`] intervals would otherwise show this instance gone and its runs
/// unfinished while they are still running (and let the others re-rank the shards it still
/// runs). A beat during the drain claims no trigger request (`beat` checks the stop).
pub(super) async fn heartbeat_loop(inner: Arc<Inner>, ops: Arc<Operations>) {
    let mut ticker = tokio::time::interval(ops.interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut next_sweep = tokio::time::Instant::now() + REGISTRY_SWEEP;
    let mut phased = false;
    // The job loops (and the manual runs) are tracked apart from the heartbeat: their
    // tracker is closed by shutdown and empty once every body has ended.
    let drained = async {
        inner.stop.cancelled().await;
        inner.loops.wait().await;
    };
    let mut drained = std::pin::pin!(drained);
    // Shared-out jobs: at the stop, one beat at once without the fingerprint, so the others
    // take this instance's jobs at their next beat, not after the drain (`sharing.rs`).
    let mut told_leaving = ops.sharing.is_none();
    loop {
        tokio::select! {
            biased;
            _ = &mut drained => {
                // After the last beat, never racing one.
                ops.leave().await;
                return;
            }
            _ = inner.stop.cancelled(), if !told_leaving => {
                told_leaving = true;
                if let Some(sharing) = &ops.sharing {
                    sharing.leave();
                }
            }
            _ = ticker.tick() => {}
        }
        ops.beat(&inner).await;
        if !std::mem::replace(&mut phased, true)
            && let Some(at) = off_the_second(&inner.clock, ops.interval)
        {
            ticker.reset_at(at);
        }
        if tokio::time::Instant::now() >= next_sweep {
            next_sweep += REGISTRY_SWEEP;
            ops.sweep_registry(&inner.clock).await;
        }
    }
}

/// When the beat after the first goes, for an interval of whole seconds: about an interval
/// after now, at half past a second of the database's clock (then every interval, so every
/// beat stays there). Cron slots are whole seconds, and a burst of fires at a whole second
/// takes its first tens of milliseconds; a beat that upserts a thousand job rows at that
/// moment competed with the burst's acquire statements for the database and delayed the fires
/// (the `burst` benchmark). Other intervals (under a second, or with a fraction) keep the
/// phase of the scheduler's start.
fn off_the_second(clock: &DatabaseClock, interval: Duration) -> Option<tokio::time::Instant> {
    if interval < Duration::from_secs(1) || interval.subsec_nanos() != 0 {
        return None;
    }
    let earliest = clock.now() + chrono::TimeDelta::from_std(interval).ok()?
        - chrono::TimeDelta::milliseconds(500);
    let past_half = i64::from(earliest.timestamp_subsec_millis()) - 500;
    let at = earliest + chrono::TimeDelta::milliseconds((1000 - past_half).rem_euclid(1000));
    Some(clock.instant_at(at))
}

fn zone_of(trigger: &Trigger) -> Option<String> {
    match &trigger.spec().kind {
        TriggerKind::Cron(schedule) => Some(schedule.zone().name().to_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_are_positions_among_the_sorted_live_ids() {
        let members = Members::default();
        *members.live.write().unwrap() = vec!["a".to_owned(), "c".to_owned()].into();
        assert_eq!(members.rank_of("a"), Some((0, 2)));
        assert_eq!(members.rank_of("c"), Some((1, 2)));
        assert_eq!(members.rank_of("b"), None);
    }
}
