#![doc = include_str!("../README.md")]
//!
//! The cluster's state next to the lock table: the job registry and heartbeats, the run
//! history, pauses, manual trigger requests and the action log.
//!
//! A provider keeps them in tables of its own (created by its `ensure_schema()`) and offers
//! them through [`ClusterProvider::cluster`]: the scheduler's side is [`ClusterStore`] (what it
//! writes), the operators' side [`OperatorStore`] (what `lockctl` and the dashboard do and
//! read), and [`ClusterView`] reads it all back for an operator (`lockctl status`, `history`,
//! `instances`). A provider without them (the default) keeps working exactly as before, and
//! the scheduler logs once what it cannot do.
//!
//! ```
//! use lock_cluster::{ClusterOptions, ClusterProvider, ClusterView};
//! use lock_core::InMemoryLockProvider;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let provider = InMemoryLockProvider::new();
//! let cluster = provider.cluster().expect("the in-memory provider keeps the cluster tables");
//! cluster.pause("nightly_report", "operator").await?;
//! let view = ClusterView::read(&provider, &ClusterOptions::default()).await?;
//! assert!(view.instances.is_empty());
//! # Ok::<(), lock_core::LockError>(()) }).unwrap();
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod actions;
mod incidents;
mod memory;
mod memory_actions;
mod memory_incidents;
mod run_log;
#[cfg(feature = "testkit")]
pub mod testkit;
mod views;

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_core::{FireKind, LockError, LockProvider, Params};

pub use actions::{Action, ActionRecord};
pub use incidents::Incident;
pub use run_log::{MAX_RUN_LOG_BYTES, RunLog, RunLogError, RunLogLine, RunLogWriter};
pub use views::{
    ClusterOptions, ClusterView, DEFAULT_MISSED_GRACE, GONE_AFTER_HEARTBEATS, InstanceView,
    JobView, RunView,
};

/// The longest error text kept in a history row, in bytes (cut at a character boundary).
pub const MAX_ERROR_LEN: usize = 1000;

/// The longest job name, instance id, trigger text or requester the operations tables keep, in
/// characters (`VARCHAR(255)`).
pub const MAX_TEXT_LEN: usize = 255;

/// The longest detail an action log row keeps, in bytes (cut at a character boundary;
/// `VARCHAR(1000)`).
pub const MAX_DETAIL_LEN: usize = 1000;

/// Who an instance is, as the registry keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceInfo {
    /// The instance id (`locked_by`).
    pub instance_id: String,
    /// The host name.
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// The version of `lock-core` the instance runs; with `+share.<fingerprint>` after it
    /// while the instance shares its jobs out (`SchedulerBuilder::share_jobs`): the instances
    /// with the same one run the same shared jobs and share them.
    pub version: String,
    /// When its scheduler started (database time).
    pub started_at: DateTime<Utc>,
    /// How far its wall clock is ahead of the database's, in milliseconds.
    pub clock_offset_ms: i64,
    /// How often it heartbeats, in milliseconds (it counts as gone after
    /// [`GONE_AFTER_HEARTBEATS`] of them without one).
    pub heartbeat_ms: i64,
}

/// One job as an instance registers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobRegistration {
    /// The job's name.
    pub name: String,
    /// The lock it runs under.
    pub lock_name: String,
    /// The trigger as text (``cron `0 5 1 * * *` in Asia/Shanghai``, `fixed rate 5s`).
    pub trigger: String,
    /// The cron trigger's zone, if any.
    pub zone: Option<String>,
    /// Its next fire by the database's clock (None when it fires no more).
    pub next_fire: Option<DateTime<Utc>>,
    /// The fire after that (cron and fixed rate): what a job whose instances all died right
    /// after running `next_fire` is judged missed by.
    pub following_fire: Option<DateTime<Utc>>,
}

/// What one heartbeat writes: the instance and its jobs' registrations, every one of them
/// ([`ClusterStore::heartbeat`]) or those that changed since the last beat
/// ([`ClusterStore::heartbeat_changes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The instance.
    pub instance: InstanceInfo,
    /// Its jobs.
    pub jobs: Vec<JobRegistration>,
}

/// One registry row as read back: the instance's own row (`job` None) or one of its jobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryRow {
    /// The instance.
    pub instance: InstanceInfo,
    /// When this row was last written (database time): the instance's last heartbeat for
    /// its own row; for a job row, the last heartbeat that carried the job (a complete one,
    /// or one after its registration changed).
    pub heartbeat_at: DateTime<Utc>,
    /// The job, or None for the instance's own row.
    pub job: Option<JobRegistration>,
}

/// What an operator asked for in the control table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ControlKind {
    /// The job is paused cluster-wide while the row exists.
    Pause,
    /// Run the job once now, on one live instance.
    Trigger,
    /// Run the job (a child, `#[scheduled(after = ..)]`) for the request's slot: one parent
    /// (or one shard of it) succeeded there. Written by the parent's instance before the
    /// parent's end, deleted once the child's lock decided the slot, so a child whose
    /// parent's instance died right after the parent is run by another.
    After,
}

impl ControlKind {
    /// As stored: `pause`, `trigger`, `after`.
    pub fn as_str(self) -> &'static str {
        match self {
            ControlKind::Pause => "pause",
            ControlKind::Trigger => "trigger",
            ControlKind::After => "after",
        }
    }
}

impl FromStr for ControlKind {
    type Err = LockError;
    fn from_str(s: &str) -> Result<Self, LockError> {
        match s {
            "pause" => Ok(ControlKind::Pause),
            "trigger" => Ok(ControlKind::Trigger),
            "after" => Ok(ControlKind::After),
            other => Err(unknown("request kind", other)),
        }
    }
}

/// One row of the control table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlRequest {
    /// The row's id.
    pub id: i64,
    /// The job it is about.
    pub job: String,
    /// Pause or trigger.
    pub kind: ControlKind,
    /// When it was asked for (database time).
    pub requested_at: DateTime<Utc>,
    /// Who asked (`lockctl:<user>@<host>`, `dashboard:<token name>`, or the caller's text);
    /// for an [`After`](ControlKind::After) request, the parent that succeeded (`billing`, or
    /// `billing#2` for its shard 2).
    pub requested_by: String,
    /// The instance that claimed a trigger request.
    pub claimed_by: Option<String>,
    /// When it was claimed.
    pub claimed_at: Option<DateTime<Utc>>,
    /// The slot an [`After`](ControlKind::After) request runs the child for; None otherwise.
    pub slot: Option<DateTime<Utc>>,
    /// A trigger request's parameters (`lockctl trigger NAME --param key=value`).
    pub params: Params,
}

/// The start of a run, written before its body runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunStart {
    /// The job's name.
    pub job: String,
    /// The slot, for a scheduled fire of a cron or fixed-rate job.
    pub slot: Option<DateTime<Utc>>,
    /// Scheduled, catch-up or manual.
    pub fire_kind: FireKind,
    /// The instance running it.
    pub instance_id: String,
    /// The lease's fencing token.
    pub fence: u64,
    /// Which attempt of the fire this is, from 1 ([`JobContext::attempt`]): a job with
    /// `retries` writes one row per attempt, each with the slot and fence of the fire.
    ///
    /// [`JobContext::attempt`]: lock_core::JobContext::attempt
    pub attempt: u32,
    /// A manual run's parameters; empty for every other fire.
    pub params: Params,
}

/// The end of a run, for [`ClusterStore::runs_ended`]: the row's id, what the run came to
/// and its error text (cut to [`MAX_ERROR_LEN`] bytes by the writer).
///
/// ```
/// use lock_cluster::{RunEnd, RunState};
/// let end = RunEnd::new(7, RunState::Failed, Some("timeout talking to the bank"));
/// assert_eq!((end.id, end.outcome), (7, RunState::Failed));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunEnd {
    /// The id [`ClusterStore::run_started`] returned.
    pub id: i64,
    /// What the run came to.
    pub outcome: RunState,
    /// The error or panic message.
    pub error: Option<String>,
    /// Cancellation (shutdown, a lost lease, the run's timeout) was asked before the body
    /// ended; false unless [`with_cancel_requested`](Self::with_cancel_requested) says so.
    pub cancel_requested: bool,
    /// The log lines the run emitted, bounded by the scheduler's capture; None when it kept
    /// none (stored as NULL, read back by [`OperatorStore::run_logs`]).
    pub logs: Option<RunLog>,
}

impl RunEnd {
    /// The end of run `id`, cancellation not asked.
    pub fn new(id: i64, outcome: RunState, error: Option<&str>) -> Self {
        RunEnd {
            id,
            outcome,
            error: error.map(str::to_owned),
            cancel_requested: false,
            logs: None,
        }
    }

    /// The same end, with the run's log lines.
    ///
    /// ```
    /// use lock_cluster::{RunEnd, RunLogWriter, RunState};
    /// let mut lines = RunLogWriter::new(10, 1024);
    /// lines.line(chrono::Utc::now(), "INFO", "billing", |m| m.push_str("charged"));
    /// let end = RunEnd::new(7, RunState::Succeeded, None).with_logs(lines.finish());
    /// assert!(end.logs.is_some());
    /// ```
    pub fn with_logs(mut self, logs: Option<RunLog>) -> Self {
        self.logs = logs;
        self
    }

    /// The same end, saying whether cancellation was asked before the body ended: a body
    /// that finished its work after shutdown began is `succeeded` with `cancel_requested`.
    ///
    /// ```
    /// use lock_cluster::{RunEnd, RunState};
    /// let end = RunEnd::new(7, RunState::Succeeded, None).with_cancel_requested(true);
    /// assert!(end.cancel_requested);
    /// ```
    pub fn with_cancel_requested(mut self, cancel_requested: bool) -> Self {
        self.cancel_requested = cancel_requested;
        self
    }
}

/// What a run came to, as the history keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RunState {
    /// Started and not ended yet (stored until the end is written).
    Running,
    /// The body returned `()` or `Ok(())`.
    Succeeded,
    /// The body returned an error.
    Failed,
    /// The body panicked.
    Panicked,
    /// The lease was lost while the body ran (its `cancelled()` resolved) and it returned
    /// `Ok(())`: it ran, at least in part, without its lock.
    LockLost,
    /// The body stopped because the scheduler was shutting down: it returned an error after
    /// its `cancelled()` resolved (the error is kept). A body that finished its work after
    /// shutdown began is [`Succeeded`](Self::Succeeded), with `cancel_requested`.
    Cancelled,
    /// The run's `timeout` passed (the body was told to stop, and dropped after a grace).
    TimedOut,
    /// Not run, for the reason in the row's error (a child whose parent failed, was missed
    /// or cancelled: "parent `billing` failed").
    Skipped,
    /// Not run: no instance could take the fire (the reason is in the row's error: "every
    /// instance busy").
    Missed,
    /// Started, never ended, and its instance is gone: never stored, shown by
    /// [`ClusterView`] for a `running` row whose instance no longer heartbeats.
    Unfinished,
}

impl RunState {
    /// As stored and printed: `running`, `succeeded`, `failed`, `panicked`, `lock_lost`,
    /// `cancelled`, `timed_out`, `skipped`, `missed`, `unfinished`.
    ///
    /// ```
    /// use lock_cluster::RunState;
    /// assert_eq!(RunState::LockLost.as_str(), "lock_lost");
    /// assert_eq!("lock_lost".parse::<RunState>()?, RunState::LockLost);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Succeeded => "succeeded",
            RunState::Failed => "failed",
            RunState::Panicked => "panicked",
            RunState::LockLost => "lock_lost",
            RunState::Cancelled => "cancelled",
            RunState::TimedOut => "timed_out",
            RunState::Skipped => "skipped",
            RunState::Missed => "missed",
            RunState::Unfinished => "unfinished",
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunState {
    type Err = LockError;
    fn from_str(s: &str) -> Result<Self, LockError> {
        Ok(match s {
            "running" => RunState::Running,
            "succeeded" => RunState::Succeeded,
            "failed" => RunState::Failed,
            "panicked" => RunState::Panicked,
            "lock_lost" => RunState::LockLost,
            "cancelled" => RunState::Cancelled,
            "timed_out" => RunState::TimedOut,
            "skipped" => RunState::Skipped,
            "missed" => RunState::Missed,
            "unfinished" => RunState::Unfinished,
            other => return Err(unknown("run outcome", other)),
        })
    }
}

fn unsupported(tables: &str, feature: &str, job: &str) -> LockError {
    LockError::InvalidConfiguration(format!(
        "job `{job}`: {feature} need a store that keeps them ({tables} does not)"
    ))
}

fn no_incidents(tables: &str) -> LockError {
    LockError::InvalidConfiguration(format!(
        "alert rules need a store that keeps incidents ({tables} does not)"
    ))
}

fn unknown(what: &str, value: &str) -> LockError {
    LockError::InvalidConfiguration(format!("unknown {what} {value:?} in an operations table"))
}

/// One run as the history keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunRecord {
    /// The row's id (increasing).
    pub id: i64,
    /// The job's name.
    pub job: String,
    /// The slot, if the fire had one.
    pub slot: Option<DateTime<Utc>>,
    /// Scheduled, catch-up or manual.
    pub fire_kind: FireKind,
    /// The instance that ran it.
    pub instance_id: String,
    /// The lease's fencing token.
    pub fence: u64,
    /// When the body started (database time).
    pub started_at: DateTime<Utc>,
    /// When the run ended (None while running, or when its instance died).
    pub ended_at: Option<DateTime<Utc>>,
    /// What it came to.
    pub outcome: RunState,
    /// The error or panic message, cut to [`MAX_ERROR_LEN`] bytes.
    pub error: Option<String>,
    /// Which attempt of its fire this row is, from 1: the retries of one fire are rows of
    /// the same slot and fence with attempts 2, 3 and so on (1 for rows written before the
    /// history kept it).
    pub attempt: u32,
    /// Cancellation (shutdown, a lost lease, the run's timeout) was asked before the body
    /// ended; the outcome is still the body's own result (false for rows written before the
    /// history kept it).
    pub cancel_requested: bool,
    /// A manual run's parameters; empty for every other fire (and rows written before the
    /// history kept them).
    pub params: Params,
}

/// What housekeeping deletes, in bounded batches.
///
/// Exhaustive on purpose: every store must delete every kind, so a new kind is a compile error
/// in each store rather than a housekeeping failure at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expired {
    /// History rows started before the cut-off.
    Runs,
    /// Trigger requests claimed before the cut-off, and [`After`](ControlKind::After) requests
    /// written before it (their child never ran them: a parent of several whose others failed).
    ClaimedTriggers,
    /// Registry rows not refreshed since the cut-off (instances long gone, jobs removed).
    StaleRegistry,
    /// Action log rows written before the cut-off (kept as long as the run history).
    Actions,
    /// Incidents of the alert rules resolved before the cut-off (open ones stay).
    Incidents,
}

/// What the scheduler writes to the cluster's tables next to the lock table: the registry's
/// heartbeats, the claims of trigger requests, the run history and its housekeeping.
/// Object-safe; every time is the store's own clock.
///
/// The in-memory provider implements it in memory; the SQL providers with the statements of
/// `lock_sql::operations_sql`; the Redis provider with one Lua script per operation on keys of
/// its own. The operators' side of the same tables is [`OperatorStore`]; a provider offers
/// both, as one [`Cluster`], through [`ClusterProvider::cluster`].
#[async_trait]
pub trait ClusterStore: Send + Sync {
    /// The tables, for messages (`shedlock_instances, shedlock_runs, shedlock_control,
    /// shedlock_actions`).
    fn tables(&self) -> String;

    /// Succeeds when the tables the scheduler needs exist (registry, history, control);
    /// otherwise [`LockError::TableMissing`] naming them all, with the DDL that creates them.
    /// The action log is not required here: only the tools that act write it, and a
    /// deployment whose `ensure_schema()` has not created it yet keeps its registry, history
    /// and pauses (writing or reading the log then fails with `TableMissing`).
    async fn check(&self) -> Result<(), LockError>;

    /// A complete heartbeat: upserts the instance's row and one row per job of `beat`,
    /// deletes the instance's other job rows (jobs it no longer runs, or ran before a
    /// restart), and returns every pause and every unclaimed trigger request.
    ///
    /// Every row it writes gets the same `heartbeat_at` (the store's now); the deletion takes
    /// the instance's job rows written before its own row, so two complete beats of one
    /// instance must be at least the store's time resolution apart (a millisecond).
    async fn heartbeat(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError>;

    /// A heartbeat of what changed: upserts the instance's row and the job rows of `beat`
    /// (the registrations that changed since the last heartbeat, often none), leaves the
    /// instance's other job rows as they are, and returns what
    /// [`heartbeat`](Self::heartbeat) returns. What the scheduler sends every
    /// `heartbeat_interval` between complete beats, so that an idle beat costs one row
    /// whatever the number of jobs: a job row's `heartbeat_at` is when it last changed, and
    /// whether its instance is alive is read from the instance's own row.
    async fn heartbeat_changes(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError>;

    /// Claims trigger request `id` for `instance_id`; true for exactly one claimer.
    async fn claim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError>;

    /// Hands trigger request `id` back: unclaims it when `instance_id` holds its claim, so
    /// that it is pending again and a live instance claims it at its next heartbeat. True
    /// when it was handed back; false (nothing written) when it is not a trigger request
    /// claimed by `instance_id`.
    ///
    /// What an instance does with a request it claimed but cannot run: it is shutting down,
    /// or its claim's reply was lost. A request is never marked done without a run.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use lock_cluster::ClusterProvider;
    /// use lock_core::InMemoryLockProvider;
    /// let provider = InMemoryLockProvider::new();
    /// let store = provider.cluster().expect("the in-memory provider keeps operations");
    /// let id = store.request_trigger("report", "op@host").await?;
    /// assert!(store.claim_trigger(id, "a").await?);
    /// assert!(!store.unclaim_trigger(id, "b").await?, "only its claimer hands it back");
    /// assert!(store.unclaim_trigger(id, "a").await?);
    /// assert!(store.claim_trigger(id, "b").await?, "pending again");
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    async fn unclaim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError>;

    /// Writes the start row of a run (start time: the store's now) and returns its id.
    async fn run_started(&self, run: &RunStart) -> Result<i64, LockError>;

    /// Writes the end of run `end.id`: its outcome, error and `cancel_requested` (end time:
    /// the store's now).
    async fn run_ended(&self, end: &RunEnd) -> Result<(), LockError>;

    /// Writes the start rows of several runs and returns their ids in the order given: one
    /// statement where the store can ([`max_history_batch`](Self::max_history_batch) > 1).
    /// An `Err` applies to every row. The default loops over [`run_started`](Self::run_started).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use lock_cluster::{ClusterProvider, RunEnd, RunStart, RunState};
    /// use lock_core::{FireKind, InMemoryLockProvider};
    /// let provider = InMemoryLockProvider::new();
    /// let store = provider.cluster().expect("the in-memory provider keeps operations");
    /// let run = |job: &str| RunStart {
    ///     job: job.into(),
    ///     slot: None,
    ///     fire_kind: FireKind::Manual,
    ///     instance_id: "a".into(),
    ///     fence: 1,
    ///     attempt: 1,
    ///     params: Default::default(),
    /// };
    /// let ids = store.runs_started(&[run("billing"), run("coupons")]).await?;
    /// assert_eq!(ids.len(), 2);
    /// store
    ///     .runs_ended(&[RunEnd::new(ids[0], RunState::Succeeded, None)])
    ///     .await?;
    /// assert_eq!(store.history("billing", 1).await?[0].outcome, RunState::Succeeded);
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    async fn runs_started(&self, runs: &[RunStart]) -> Result<Vec<i64>, LockError> {
        let mut ids = Vec::with_capacity(runs.len());
        for run in runs {
            ids.push(self.run_started(run).await?);
        }
        Ok(ids)
    }

    /// Writes the ends of several runs: one statement where the store can. An `Err` applies
    /// to every row. The default loops over [`run_ended`](Self::run_ended).
    async fn runs_ended(&self, ends: &[RunEnd]) -> Result<(), LockError> {
        for end in ends {
            self.run_ended(end).await?;
        }
        Ok(())
    }

    /// [`runs_started`](Self::runs_started), each row's start time given (`at[i]` for
    /// `runs[i]`, by the database's clock as the writer estimates it) instead of the store's
    /// clock at the write: the scheduler measures a body's start as it happens and may write
    /// its row later, with a burst's others. A store that cannot write given times keeps the
    /// default, which calls `runs_started` (its clock at the write) and says so in
    /// [`takes_run_times`](Self::takes_run_times); the scheduler then writes rows as the
    /// bodies start.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use lock_cluster::{ClusterProvider, RunStart};
    /// use lock_core::{FireKind, InMemoryLockProvider};
    /// let provider = InMemoryLockProvider::new();
    /// let store = provider.cluster().expect("the in-memory provider keeps operations");
    /// let run = RunStart {
    ///     job: "billing".into(),
    ///     slot: None,
    ///     fire_kind: FireKind::Manual,
    ///     instance_id: "a".into(),
    ///     fence: 1,
    ///     attempt: 1,
    ///     params: Default::default(),
    /// };
    /// let at = chrono::Utc::now() - chrono::TimeDelta::seconds(5);
    /// let ids = store.runs_started_at(&[run], &[at]).await?;
    /// assert_eq!(ids.len(), 1);
    /// assert!(!store.takes_run_times(), "the in-memory store writes its own clock");
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    async fn runs_started_at(
        &self,
        runs: &[RunStart],
        at: &[DateTime<Utc>],
    ) -> Result<Vec<i64>, LockError> {
        let _ = at;
        self.runs_started(runs).await
    }

    /// [`runs_ended`](Self::runs_ended), each row's end time given (`at[i]` for `ends[i]`, by
    /// the database's clock as the writer estimates it) instead of the store's clock at the
    /// write: the scheduler writes a run's end after its lock's release, which may wait for
    /// the others of its burst. The default calls `runs_ended` (see
    /// [`takes_run_times`](Self::takes_run_times)).
    async fn runs_ended_at(&self, ends: &[RunEnd], at: &[DateTime<Utc>]) -> Result<(), LockError> {
        let _ = at;
        self.runs_ended(ends).await
    }

    /// Whether [`runs_started_at`](Self::runs_started_at) and
    /// [`runs_ended_at`](Self::runs_ended_at) write the times they are given (true) or the
    /// store's clock at the write (false, the default). A store that overrides them says
    /// true; a wrapper forwards its inner store's answer.
    fn takes_run_times(&self) -> bool {
        false
    }

    /// How many rows one [`runs_started`](Self::runs_started) or
    /// [`runs_ended`](Self::runs_ended) call writes in one statement. The default, 1, means
    /// the store does not batch: the scheduler then writes every row on its own.
    fn max_history_batch(&self) -> usize {
        1
    }

    /// The instances' own rows of the registry (`job` None), without their jobs' rows: what
    /// the ranks of sharded and broadcast jobs are taken from, at each heartbeat. The SQL
    /// providers read only those rows (`lock_sql::OperationsSql::instances`); a store without
    /// such a query filters [`OperatorStore::registry`].
    async fn instances(&self) -> Result<Vec<RegistryRow>, LockError>;

    /// A [`heartbeat_changes`](Self::heartbeat_changes) and, after it, the
    /// [`instances`](Self::instances): what a scheduler that keeps a view of the live instances
    /// (sharded, broadcast or shared-out jobs) sends at each beat. The default makes the two
    /// calls; a store that can do both in one transaction does (PostgreSQL: one commit a beat
    /// instead of two, for every instance every second). An error of either is the call's.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use lock_cluster::{ClusterProvider, Heartbeat, InstanceInfo};
    /// use lock_core::InMemoryLockProvider;
    ///
    /// let provider = InMemoryLockProvider::new();
    /// let store = provider.cluster().unwrap();
    /// let beat = Heartbeat {
    ///     instance: InstanceInfo {
    ///         instance_id: "pod-1".into(),
    ///         host: "host".into(),
    ///         pid: 1,
    ///         version: "0.1.0".into(),
    ///         started_at: chrono::Utc::now(),
    ///         clock_offset_ms: 0,
    ///         heartbeat_ms: 1000,
    ///     },
    ///     jobs: vec![],
    /// };
    /// let (pauses, instances) = store.heartbeat_changes_and_instances(&beat).await?;
    /// assert!(pauses.is_empty());
    /// assert_eq!(instances[0].instance.instance_id, "pod-1");
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    async fn heartbeat_changes_and_instances(
        &self,
        beat: &Heartbeat,
    ) -> Result<(Vec<ControlRequest>, Vec<RegistryRow>), LockError> {
        let control = self.heartbeat_changes(beat).await?;
        Ok((control, self.instances().await?))
    }

    /// Writes an [`After`](ControlKind::After) request: run `child` for `slot`, because
    /// `parent` (a job name, or `name#shard`) succeeded there. Returns its id. Every live
    /// instance's heartbeat brings it back until [`delete_after`](Self::delete_after) removes
    /// it, so a child whose parent's instance died is still run.
    ///
    /// The default refuses: a store without it cannot run dependent jobs.
    async fn request_after(
        &self,
        child: &str,
        slot: DateTime<Utc>,
        parent: &str,
    ) -> Result<i64, LockError> {
        let _ = (slot, parent);
        Err(unsupported(&self.tables(), "dependent jobs", child))
    }

    /// The parents (`requested_by`) of `child`'s [`After`](ControlKind::After) requests for
    /// `slot`: whether every parent of a child with several succeeded for that slot.
    async fn after_requests(
        &self,
        child: &str,
        slot: DateTime<Utc>,
    ) -> Result<Vec<String>, LockError> {
        let _ = slot;
        Err(unsupported(&self.tables(), "dependent jobs", child))
    }

    /// Deletes `child`'s [`After`](ControlKind::After) requests for slots up to and including
    /// `through`; returns how many. Called once the child's lock decided the slot (it ran
    /// here, or it ran already).
    async fn delete_after(&self, child: &str, through: DateTime<Utc>) -> Result<u64, LockError> {
        let _ = through;
        Err(unsupported(&self.tables(), "dependent jobs", child))
    }

    /// Every open incident of the alert rules, oldest first (see [`Incident`]).
    ///
    /// The default refuses: a store without an incidents table cannot evaluate alert rules.
    async fn open_incidents(&self) -> Result<Vec<Incident>, LockError> {
        Err(no_incidents(&self.tables()))
    }

    /// Opens incident `key` with `summary` (cut to [`MAX_DETAIL_LEN`] bytes), its time the
    /// store's now: inserts it, or reopens a resolved incident of that key. True when this
    /// call opened it; false, writing nothing, while it is open. Of concurrent calls for one
    /// key exactly one answers true: the one that sends the firing notice.
    async fn open_incident(&self, key: &str, summary: &str) -> Result<bool, LockError> {
        let _ = (key, summary);
        Err(no_incidents(&self.tables()))
    }

    /// Resolves open incident `key` (its resolution time: the store's now). True when this
    /// call resolved it; false, writing nothing, when it is not open. Of concurrent calls
    /// exactly one answers true: the one that sends the resolved notice.
    async fn resolve_incident(&self, key: &str) -> Result<bool, LockError> {
        let _ = key;
        Err(no_incidents(&self.tables()))
    }

    /// Deletes at most `limit` rows of `what` older than `before`; returns how many.
    async fn delete_expired(
        &self,
        what: Expired,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, LockError>;
}

/// What operators do and read in the cluster's tables: pause, resume and trigger a job, the
/// action log, and the registry and history as `lockctl` and the dashboard show them.
/// Object-safe; every time is the store's own clock.
#[async_trait]
pub trait OperatorStore: Send + Sync {
    /// Pauses `job` cluster-wide; false when it was paused already. Of concurrent pauses of
    /// one job exactly one answers true, and one pause row is written (the testkit's
    /// `concurrent_pauses` checks it).
    async fn pause(&self, job: &str, requested_by: &str) -> Result<bool, LockError>;

    /// Resumes `job`; false when it was not paused. Of concurrent resumes exactly one answers
    /// true.
    async fn resume(&self, job: &str) -> Result<bool, LockError>;

    /// Asks for one manual run of `job` by a live instance; returns the request's id.
    async fn request_trigger(&self, job: &str, requested_by: &str) -> Result<i64, LockError>;

    /// As [`request_trigger`](Self::request_trigger), with the run's parameters
    /// ([`JobContext::params`](lock_core::JobContext::params)), kept in the request and the
    /// run's history row. No parameters is `request_trigger`; the default refuses others.
    async fn request_trigger_with_params(
        &self,
        job: &str,
        requested_by: &str,
        params: &Params,
    ) -> Result<i64, LockError> {
        if params.is_empty() {
            return self.request_trigger(job, requested_by).await;
        }
        Err(LockError::InvalidConfiguration(format!(
            "trigger `{job}` with parameters: this store does not keep them; trigger it without"
        )))
    }

    /// Withdraws trigger request `id` if no instance claimed it yet; true when withdrawn.
    async fn withdraw_trigger(&self, id: i64) -> Result<bool, LockError>;

    /// Every control row, oldest first.
    async fn control(&self) -> Result<Vec<ControlRequest>, LockError>;

    /// Every registry row.
    async fn registry(&self) -> Result<Vec<RegistryRow>, LockError>;

    /// The newest `limit` runs of `job`, newest first.
    async fn history(&self, job: &str, limit: u32) -> Result<Vec<RunRecord>, LockError>;

    /// One page of `job`'s runs, newest first: at most `limit` runs whose id is below `before`
    /// (the newest runs when None). Keyset paging on the history's `(job_name, id)` index, so
    /// a page deep in a long history costs what the first one does (the dashboard's job page).
    ///
    /// The default reads the job's whole history through [`history`](Self::history) and cuts
    /// the page from it; the SQL and in-memory stores answer with one indexed query.
    async fn history_page(
        &self,
        job: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<RunRecord>, LockError> {
        let Some(before) = before else {
            return self.history(job, limit).await;
        };
        let runs = self.history(job, u32::MAX).await?;
        Ok(runs
            .into_iter()
            .filter(|run| run.id < before)
            .take(limit as usize)
            .collect())
    }

    /// The log lines of `job`'s runs whose ids are in `ids` (both ends included), newest
    /// first, for the runs that kept any: what `lockctl history NAME --logs` reads for the
    /// runs it lists (one query, on the history's `(job_name, id)` index) and the dashboard's
    /// run page for one run (`id..=id`). A stored text that does not parse fails the read,
    /// naming its row.
    async fn run_logs(
        &self,
        job: &str,
        ids: std::ops::RangeInclusive<i64>,
    ) -> Result<Vec<(i64, RunLog)>, LockError>;

    /// The newest run of every job.
    ///
    /// What the Jobs page and `lockctl status` read at every refresh, so its cost must not grow
    /// with the history: the SQL stores answer with one index seek per job name (the
    /// `(job_name, id)` index), Redis from a per-job entry written with the run. (The
    /// in-memory store, a test double, walks its runs.)
    async fn last_runs(&self) -> Result<Vec<RunRecord>, LockError>;

    /// The end of the latest successful run of every job; as [`last_runs`](Self::last_runs),
    /// without reading the history (the SQL stores seek a `(job_name, outcome, ended_at)`
    /// index per job).
    async fn last_successes(&self) -> Result<Vec<(String, DateTime<Utc>)>, LockError>;

    /// Writes one row of the action log (its time: the store's now; texts cut with
    /// [`ActionRecord::truncated`]). Called by the tools that act (dashboard, `lockctl`)
    /// after the action succeeded.
    async fn record_action(&self, action: &ActionRecord) -> Result<(), LockError>;

    /// The newest `limit` rows of `job`'s action log, newest first.
    async fn actions(&self, job: &str, limit: u32) -> Result<Vec<ActionRecord>, LockError>;
}

/// Both sides of a provider's cluster tables: what [`ClusterProvider::cluster`] returns.
pub trait Cluster: ClusterStore + OperatorStore {}

impl<T: ClusterStore + OperatorStore + ?Sized> Cluster for T {}

/// A lock provider that may keep the cluster's tables next to its lock table: what the
/// scheduler, the dashboard and `lockctl` take. A provider without them implements it with the
/// default (`impl ClusterProvider for MyProvider {}`), and the scheduler then runs exactly as
/// without them (it logs once what is missing).
///
/// ```
/// use lock_cluster::ClusterProvider;
/// use lock_core::InMemoryLockProvider;
/// assert!(InMemoryLockProvider::new().cluster().is_some());
/// ```
pub trait ClusterProvider: LockProvider {
    /// The registry, run history, pauses, trigger requests and action log next to the lock
    /// table, if this provider keeps them; the default is `None`.
    fn cluster(&self) -> Option<&dyn Cluster> {
        None
    }
}

impl<P: ClusterProvider + ?Sized> ClusterProvider for std::sync::Arc<P> {
    fn cluster(&self) -> Option<&dyn Cluster> {
        (**self).cluster()
    }
}

/// `text` cut to at most `max` bytes, at a character boundary.
///
/// ```
/// assert_eq!(lock_cluster::truncate("héllo", 2), "h");
/// assert_eq!(lock_cluster::truncate("hello", 10), "hello");
/// ```
pub fn truncate(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}
