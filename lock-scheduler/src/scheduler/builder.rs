//! The builder's settings: provider, identity, defaults, timeouts, history, state and jobs
//! (`start()` stays with the scheduler it builds; configuration overrides are in
//! `overrides.rs`, the batch window in `batching.rs`).

use std::sync::Arc;
use std::time::Duration;

use super::{Job, SchedulerBuilder};
use lock_cluster::ClusterProvider;

/// The run history's retention when `.history(..)` is not called: a week of runs answers
/// "did last night's job run, and how long did it take" at a few rows per job and slot.
pub(super) const DEFAULT_HISTORY_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

impl SchedulerBuilder {
    /// The lock provider shared by all instances (required). Takes any provider (any
    /// [`ClusterProvider`]: every provider crate's, the in-memory one, or an `Arc` of one, also
    /// `Arc<dyn ClusterProvider>`).
    pub fn lock_provider<P: ClusterProvider>(mut self, provider: P) -> Self {
        self.provider = Some(Arc::new(provider));
        self
    }

    /// The id written to `locked_by` (default: `hostname:pid:random`, see
    /// [`default_instance_id`](lock_core::default_instance_id)). Must be unique per live
    /// process: a lease in this id that no job of this process holds is taken for a grant
    /// nobody waited for, and released.
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance_id = Some(id.into());
        self
    }

    /// `lock_at_most_for` for jobs that set none (default 30 minutes).
    pub fn default_lock_at_most_for(mut self, at_most: Duration) -> Self {
        self.defaults.lock_at_most_for = at_most;
        self
    }

    /// Keep-alive for jobs that do not set it (default off).
    pub fn default_keep_alive(mut self, keep_alive: bool) -> Self {
        self.defaults.keep_alive = keep_alive;
        self
    }

    /// Bounds each acquire, extend and release (default 10 s); see
    /// [`LockingTaskExecutor::with_operation_timeout`](lock_core::LockingTaskExecutor::with_operation_timeout).
    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = Some(timeout);
        self
    }

    /// How often the database's clock is measured again after start (default 30 s, see
    /// [`DEFAULT_CLOCK_REFRESH`](crate::DEFAULT_CLOCK_REFRESH)); a step of the database's
    /// clock is followed at most this late. Zero is refused at start.
    pub fn clock_refresh(mut self, every: Duration) -> Self {
        self.clock_refresh = Some(every);
        self
    }

    /// How far ahead of the database's clock a fire's slot may be before the database refuses
    /// it (default [`DEFAULT_MAX_SLOT_LEAD`](lock_core::DEFAULT_MAX_SLOT_LEAD), 5 s); see
    /// [`LockingTaskExecutor::with_max_slot_lead`](lock_core::LockingTaskExecutor::with_max_slot_lead).
    pub fn max_slot_lead(mut self, lead: Duration) -> Self {
        self.max_slot_lead = Some(lead);
        self
    }

    /// How long the run history keeps its rows (default 7 days; history is on by default).
    ///
    /// The history lives in the provider's operations tables: one row per run (job, slot,
    /// fire kind, instance, fence, start and end by the database's clock, outcome, error).
    /// Rows older than `retention` are deleted by a housekeeping job that is itself a locked
    /// scheduled job ([`HOUSEKEEPING_JOB`](crate::HOUSEKEEPING_JOB)), run every quarter of the
    /// retention, but at least once an hour and at most once a second (so a 7-day retention
    /// is cleaned up hourly: each run then deletes an hour's rows, well within its bounded
    /// batches), in batches of [`HOUSEKEEPING_BATCH`](crate::HOUSEKEEPING_BATCH)
    /// rows. Costs two statements per run (see BENCHMARKS.md); turn it off with
    /// [`no_history`](Self::no_history).
    ///
    /// A provider without operations tables (or whose tables are missing: run its
    /// `ensure_schema()`) runs the jobs without history; `start()`'s INFO line says
    /// `history="off: ..."` and why, and a retention set here explicitly also logs a
    /// warning. A zero retention is refused at start.
    ///
    /// ```
    /// use lock_cluster::ClusterProvider;
    /// use lock_core::{InMemoryLockProvider, LockProvider};
    /// use lock_scheduler::{Job, Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let provider = std::sync::Arc::new(InMemoryLockProvider::new());
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(provider.clone())
    ///     .history(Duration::from_secs(30 * 24 * 3600)) // keep a month instead of a week
    ///     .jobs([Job::new("report", Trigger::cron("0 0 3 * * *")?, || async {})])
    ///     .start()
    ///     .await?;
    /// scheduler.trigger("report").await?;
    /// let runs = provider.cluster().unwrap().history("report", 10).await?;
    /// assert_eq!(runs[0].fire_kind, lock_core::FireKind::Manual);
    /// scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn history(mut self, retention: Duration) -> Self {
        self.history = Some(retention);
        self.no_history = false;
        self
    }

    /// Keeps no run history (it is on by default, see [`history`](Self::history)): no row
    /// per run and no housekeeping job. The job registry, pauses and trigger requests work
    /// as with history.
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::Scheduler;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .no_history()
    ///     .jobs([])
    ///     .start()
    ///     .await?;
    /// assert!(scheduler.jobs().is_empty(), "no housekeeping job either");
    /// scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn no_history(mut self) -> Self {
        self.history = None;
        self.no_history = true;
        self
    }

    /// How often this instance heartbeats into the job registry (default
    /// [`DEFAULT_HEARTBEAT_INTERVAL`](crate::DEFAULT_HEARTBEAT_INTERVAL), 1 s): it then also learns of pauses and trigger
    /// requests. An instance silent for
    /// [`GONE_AFTER_HEARTBEATS`](lock_cluster::GONE_AFTER_HEARTBEATS) intervals counts as
    /// gone. Zero is refused at start.
    pub fn heartbeat_interval(mut self, every: Duration) -> Self {
        self.heartbeat_interval = Some(every);
        self
    }

    /// Shares the jobs out between the instances (default off): each slot of a job is asked
    /// for by one instance, its owner among the live instances that run the same jobs, not by
    /// every instance. The database then decides one lock row per execution however many
    /// instances run, instead of one per instance; the lock row still decides each slot, so
    /// once per slot, fencing and the misfire policies hold as without it.
    ///
    /// Needs the cluster registry (the provider's operations tables; `start()` fails without
    /// them). Shared: cron and fixed-rate jobs with one run per slot, `overlap = "skip"` and no
    /// run limit; the others are asked for by every instance as before. When an instance
    /// stops gracefully, its jobs move to the others at their next heartbeat (the slot due
    /// meanwhile is caught up); when it crashes, once it counts as gone:
    /// [`GONE_AFTER_HEARTBEATS`](lock_cluster::GONE_AFTER_HEARTBEATS) + 1 heartbeat intervals
    /// (6 s at the default 1 s), its latest missed slot then caught up and older ones left to
    /// the job's misfire policy. Without sharing, another instance runs such a slot at once.
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::Scheduler;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .share_jobs(true)
    ///     .jobs([])
    ///     .start()
    ///     .await?;
    /// scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn share_jobs(mut self, share: bool) -> Self {
        self.share_jobs = share;
        self
    }

    /// How long [`Scheduler::shutdown`](crate::Scheduler::shutdown) waits for running bodies (default
    /// [`DEFAULT_SHUTDOWN_TIMEOUT`](crate::DEFAULT_SHUTDOWN_TIMEOUT), 15 s). Keep it below the platform's grace period less the
    /// release time (see [`DEFAULT_SHUTDOWN_TIMEOUT`](crate::DEFAULT_SHUTDOWN_TIMEOUT)).
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = Some(timeout);
        self
    }

    /// Registers `value` for jobs to receive as a [`State<T>`](crate::State) parameter (a clone
    /// per fire), keyed by its type: register a service object as `Arc<Service>`, several
    /// types with several calls. A type registered twice makes [`start`](Self::start) fail.
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::{Job, Scheduler, State, Trigger};
    /// use std::time::Duration;
    ///
    /// #[derive(Clone)]
    /// struct Pool(&'static str);
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let job = Job::new("purge", Trigger::fixed_rate(Duration::from_secs(60))?, |State(pool): State<Pool>| async move {
    ///     println!("purging {}", pool.0);
    /// });
    /// // Without `.state(Pool(..))`, start() fails: "job purge needs State<Pool>, which was not
    /// // registered: add .state(pool) to the builder".
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .state(Pool("postgres://db/app"))
    ///     .jobs([job])
    ///     .start()
    ///     .await?;
    /// scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn state<T: Clone + Send + Sync + 'static>(mut self, value: T) -> Self {
        if self.state.insert(value).is_err() {
            self.state_twice.push(std::any::type_name::<T>());
        }
        self
    }

    /// The jobs to run, replacing the default of every `#[scheduled]` function in the binary
    /// ([`registered_jobs`](crate::registered_jobs)). To add jobs to those, chain them:
    /// `.jobs(registered_jobs()?.into_iter().chain([my_job]))`.
    pub fn jobs(mut self, jobs: impl IntoIterator<Item = Job>) -> Self {
        self.jobs = Some(jobs.into_iter().collect());
        self
    }
}
