//! The scheduler: sleeps to each job's next fire on tokio timers and runs it under its lock.

#[cfg(feature = "alerts")]
mod alerting;
mod attempts;
mod batching;
mod breaker;
mod builder;
mod busy;
mod cluster;
mod dead_man;
mod dependencies;
mod dependents;
mod dynamic;
mod history;
mod job;
mod limits;
mod manual;
mod misfire;
mod outage;
mod overlap;
mod overlap_signals;
mod overrides;
mod run_log_capture;
mod run_logs;
mod run_once;
mod runner;
mod shards;
mod sharing;
mod startup;
mod status;
mod table;
mod trigger;

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[cfg(feature = "alerts")]
pub use alerting::{ALERT_RULES_JOB, AlertRules};
pub use batching::DEFAULT_ACQUIRE_AHEAD;
pub use cluster::{DEFAULT_HEARTBEAT_INTERVAL, HOUSEKEEPING_BATCH, HOUSEKEEPING_JOB};
pub use job::{Job, registered_jobs};
pub use overrides::{
    ALERT_ENV_PREFIX, JobOverride, OVERRIDE_ENV_PREFIX, override_env_key, parse_duration,
};
pub use run_logs::RunLogs;
pub use shards::SHARD_TAKEOVER_DELAY;
pub use status::{JobStatus, RunOutcome};
pub use trigger::Trigger;

pub use crate::shutdown::DEFAULT_SHUTDOWN_TIMEOUT;

use crate::StateMap;
use crate::clock::{DEFAULT_CLOCK_REFRESH, DatabaseClock};
use builder::DEFAULT_HISTORY_RETENTION;
use lock_cluster::ClusterProvider;
use lock_core::install_scheduler_executor;
use lock_core::{LockConfiguration, LockDefaults, LockError, LockProvider, LockingTaskExecutor};
use runner::JobRunner;
use startup::StartSummary;
use status::JobState;
use table::{JobEntry, JobTable};

/// Runs jobs at their fire instants, each fire under its lock, until shut down.
///
/// Every instance of a service starts the same scheduler with the same jobs; at each fire
/// every instance tries the job's lock with the fire's slot, and exactly one runs the body.
///
/// ```
/// use lock_core::InMemoryLockProvider;
/// use lock_scheduler::{Job, Scheduler, Trigger};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let scheduler = Scheduler::builder()
///     .lock_provider(InMemoryLockProvider::new())
///     .jobs([Job::new("tick", Trigger::fixed_rate(Duration::from_millis(100))?, || async {
///         tracing::info!("tick");
///     })])
///     .start()
///     .await?;
/// // In a service: scheduler.run_until(lock_scheduler::shutdown_signal()).await?;
/// scheduler.run_until(tokio::time::sleep(Duration::from_millis(350))).await?;
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct Scheduler {
    inner: Arc<Inner>,
}

struct Inner {
    /// Shared by every job's runner (a copy per job would be 150 bytes each).
    executor: Arc<LockingTaskExecutor>,
    /// The jobs' trigger texts, each kept once (`trigger_text`).
    trigger_texts: std::sync::Mutex<std::collections::HashSet<Arc<str>>>,
    /// Cancelled when firing stops.
    stop: CancellationToken,
    /// The job loops (each awaits its running body).
    loops: TaskTracker,
    /// The heartbeat, which beats on until `loops` is empty (`cluster::heartbeat_loop`).
    beats: TaskTracker,
    shutdown_timeout: Duration,
    /// The jobs, in start order then in the order they were added.
    jobs: JobTable,
    /// What the jobs' parameters are extracted from.
    values: Arc<StateMap>,
    /// The database's clock, which every timer follows.
    clock: DatabaseClock,
    /// The operations tables (registry, history, pauses, triggers), when in use.
    ops: Option<Arc<cluster::Operations>>,
    /// The run limits' semaphores (`limits.rs`); None without limits.
    permits: Option<limits::RunPermits>,
}

impl Inner {
    /// `job`'s trigger text, shared with the jobs that have the same.
    fn trigger_text(&self, job: &Job) -> Arc<str> {
        let text = job::trigger_text(job);
        let mut texts = self.trigger_texts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(shared) = texts.get(text.as_str()) {
            return shared.clone();
        }
        // Texts of removed jobs go when the set has doubled since the last sweep.
        if texts.len() >= 64 && texts.len().is_power_of_two() {
            texts.retain(|t| Arc::strong_count(t) > 1);
        }
        let shared: Arc<str> = text.into();
        texts.insert(shared.clone());
        shared
    }

    /// Starts `job`'s timer loop (its initial delay counted from `started`); used by `start()`
    /// and `add_job`.
    fn spawn_job(
        &self,
        job: Arc<Job>,
        config: LockConfiguration,
        started: tokio::time::Instant,
    ) -> JobEntry {
        let state = Arc::new(JobState::new(job.shared_name(), self.trigger_text(&job)));
        let spread = shards::spread_of(&job, &config, self.ops.as_deref());
        // A job of its own so that `remove_job` can stop this loop alone.
        let stop = self.stop.child_token();
        let permits = self.permits.as_ref().and_then(|p| p.for_job(&job));
        let share = self
            .ops
            .as_ref()
            .and_then(|ops| ops.sharing.as_ref())
            .filter(|_| sharing::shareable(&job, spread.is_none(), permits.is_none()))
            .map(|sharing| {
                let share = sharing::Shared::of(config.name(), &state.trigger);
                sharing.toggle(share.entry);
                share
            });
        let initial_delay = job.trigger().initial_delay();
        let runner = Arc::new(JobRunner {
            job,
            config,
            executor: self.executor.clone(),
            stop: stop.clone(),
            state: state.clone(),
            values: self.values.clone(),
            clock: self.clock.clone(),
            ops: self.ops.clone(),
            spread,
            permits,
            share,
            tasks: self.loops.clone(),
            not_before: started + initial_delay,
        });
        let task = self.loops.spawn(runner.clone().run());
        JobEntry {
            state,
            runner,
            stop,
            task,
        }
    }
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("executor", &self.inner.executor)
            .field("jobs", &self.inner.jobs.len())
            .finish_non_exhaustive()
    }
}

/// Configures and starts a [`Scheduler`].
///
/// ```
/// use lock_core::InMemoryLockProvider;
/// use lock_scheduler::Scheduler;
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let scheduler = Scheduler::builder()
///     .lock_provider(InMemoryLockProvider::new())
///     .instance_id("billing-7f9c")
///     .default_lock_at_most_for(Duration::from_secs(600))
///     .shutdown_timeout(Duration::from_secs(10))
///     .start()
///     .await?;
/// scheduler.shutdown().await?;
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
#[derive(Default)]
#[must_use]
pub struct SchedulerBuilder {
    provider: Option<Arc<dyn ClusterProvider>>,
    instance_id: Option<String>,
    defaults: LockDefaults,
    shutdown_timeout: Option<Duration>,
    operation_timeout: Option<Duration>,
    jobs: Option<Vec<Job>>,
    clock_refresh: Option<Duration>,
    max_slot_lead: Option<Duration>,
    state: StateMap,
    /// Run history kept this long (`.history(..)`; None: the default, see `builder.rs`).
    history: Option<Duration>,
    /// `.no_history()`: no run history, whatever the provider keeps.
    no_history: bool,
    /// `.run_once(..)` tasks, finished by `start()` before any job fires (`run_once.rs`).
    run_once: Vec<run_once::StartupTask>,
    heartbeat_interval: Option<Duration>,
    /// Types given to `.state(..)` more than once (refused at start).
    state_twice: Vec<&'static str>,
    /// Settings from configuration, applied at start (`overrides.rs` has the builder methods).
    overrides: overrides::Overrides,
    /// `.batch_window(..)` (`batching.rs`).
    batch_window: Option<Duration>,
    /// `.acquire_ahead(..)` (`batching.rs`).
    acquire_ahead: Option<Duration>,
    /// `.max_concurrent_runs(..)` and `.group_limit(..)` (`limits.rs`).
    limits: limits::RunLimits,
    /// `.run_logs(..)` (`run_logs.rs`).
    run_logs: RunLogs,
    /// `.share_jobs(..)` (`sharing.rs`).
    share_jobs: bool,
    /// `.notifier(..)` and `.alert_rules(..)` (`alerting/`).
    #[cfg(feature = "alerts")]
    alerting: alerting::AlertSettings,
}

impl Scheduler {
    /// A builder; only [`lock_provider`](SchedulerBuilder::lock_provider) is required.
    pub fn builder() -> SchedulerBuilder {
        SchedulerBuilder::default()
    }

    /// Waits for `signal` (in a service, [`shutdown_signal()`](crate::shutdown_signal): SIGTERM
    /// or SIGINT), then [shuts down](Self::shutdown); fails as `shutdown` does, with
    /// [`LockError::ShutdownTimedOut`] naming the jobs still running at the timeout.
    pub async fn run_until<S: Future>(&self, signal: S) -> Result<(), LockError> {
        tokio::select! {
            _ = signal => {}
            // Someone else called shutdown(): nothing left to wait for.
            _ = self.inner.stop.cancelled() => {}
        }
        self.shutdown().await
    }

    /// Stops firing, resolves every running body's [`JobContext::cancelled`](lock_core::JobContext::cancelled),
    /// waits up to the shutdown timeout for running bodies to finish (their leases are
    /// released as they finish; a release under way at the timeout gets up to the operation
    /// timeout more), and returns.
    ///
    /// A body still running at the timeout is left running and keeps its lease until it ends or
    /// `lock_at_most_for` passes: releasing the lease of a body that is still working would let
    /// another instance run the job concurrently. Then this returns
    /// [`LockError::ShutdownTimedOut`] naming those jobs (and logs them), so that `main` can
    /// exit non-zero. Calling this again is harmless.
    ///
    /// ```
    /// use lock_core::{InMemoryLockProvider, LockError};
    /// use lock_scheduler::{Job, Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// // A body that ignores `cancelled()` and outlives the shutdown timeout.
    /// let stubborn = Job::new("stubborn", Trigger::fixed_delay(Duration::from_secs(60))?, || async {
    ///     tokio::time::sleep(Duration::from_secs(5)).await;
    /// });
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .shutdown_timeout(Duration::from_millis(100))
    ///     .jobs([stubborn])
    ///     .start()
    ///     .await?;
    /// tokio::time::sleep(Duration::from_millis(50)).await; // it fires at once
    /// match scheduler.shutdown().await {
    ///     Err(LockError::ShutdownTimedOut { running, .. }) => assert_eq!(running, ["stubborn"]),
    ///     other => panic!("expected a timeout, got {other:?}"),
    /// }
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub async fn shutdown(&self) -> Result<(), LockError> {
        let inner = &self.inner;
        if !inner.stop.is_cancelled() {
            tracing::info!(
                instance = inner.executor.instance_id(),
                "scheduler shutting down"
            );
        }
        inner.stop.cancel();
        inner.executor.shutdown_token().cancel();
        inner.loops.close();
        inner.beats.close();
        if tokio::time::timeout(inner.shutdown_timeout, inner.loops.wait())
            .await
            .is_err()
        {
            // Bodies that ended just before the timeout are releasing their leases: give those
            // releases their own bound (each is one provider call, bounded by the operation
            // timeout), so that they are not cut off by the process's exit.
            let releases = async {
                while inner.jobs.states().iter().any(|job| job.releasing()) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            };
            let _ = tokio::time::timeout(inner.executor.operation_timeout(), releases).await;
            let running: Vec<String> = inner
                .jobs
                .states()
                .iter()
                .filter(|job| job.in_body())
                .map(|job| job.name.to_string())
                .collect();
            if running.is_empty() {
                return Ok(());
            }
            tracing::warn!(
                ?running,
                timeout = ?inner.shutdown_timeout,
                "jobs still running at the shutdown timeout; their leases end when they finish or at lock_at_most_for"
            );
            return Err(LockError::ShutdownTimedOut {
                running,
                timeout: inner.shutdown_timeout,
            });
        }
        // The heartbeat's last beat and its leaving the registry: each one provider call,
        // bounded by the operation timeout.
        let _ =
            tokio::time::timeout(inner.executor.operation_timeout() * 2, inner.beats.wait()).await;
        Ok(())
    }

    /// The executor the scheduler runs jobs with (also installed as the default executor for
    /// direct calls of locked functions, when it was the first live one).
    pub fn executor(&self) -> &LockingTaskExecutor {
        &self.inner.executor
    }

    /// A snapshot of every job: trigger, next fire, last outcome and duration.
    ///
    /// ```
    /// # use lock_core::InMemoryLockProvider;
    /// # use lock_scheduler::{Job, Scheduler, Trigger};
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .jobs([Job::new("nightly", Trigger::cron("0 0 3 * * *")?, || async {})])
    ///     .start()
    ///     .await?;
    /// tokio::task::yield_now().await;
    /// let jobs = scheduler.jobs();
    /// assert_eq!(jobs[0].name, "nightly");
    /// assert_eq!(jobs[0].trigger, "cron `0 0 3 * * *` in UTC");
    /// scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn jobs(&self) -> Vec<JobStatus> {
        self.inner
            .jobs
            .states()
            .iter()
            .map(|job| job.status())
            .collect()
    }

    /// How far this host's wall clock is ahead of the database's clock, by the scheduler's
    /// latest measurement (negative: behind). Fires follow the database's clock whatever this
    /// says; it is here (and in the metric `scheduled_clock_offset_seconds`, and in a `warn`
    /// when over a second) so that a host with a wrong clock is noticed.
    ///
    /// The estimate's error is at most half the quickest round trip of its measurement plus
    /// 100 ppm of its age; a step of the database's clock is seen at the next
    /// [refresh](SchedulerBuilder::clock_refresh).
    ///
    /// ```
    /// # use lock_core::InMemoryLockProvider;
    /// # use lock_scheduler::Scheduler;
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let scheduler = Scheduler::builder().lock_provider(InMemoryLockProvider::new()).jobs([]).start().await?;
    /// // The in-memory provider's clock is this host's.
    /// assert!(scheduler.clock_offset().abs() < chrono::TimeDelta::milliseconds(100));
    /// scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn clock_offset(&self) -> TimeDelta {
        self.inner.clock.host_offset()
    }
}

impl SchedulerBuilder {
    /// Validates every job's lock, installs the executor as the default for direct locked calls
    /// (unless another live scheduler's or an explicitly installed one is there: a second
    /// scheduler in a process logs a warning and leaves direct calls to the first; see
    /// [`install_default_executor`](lock_core::install_default_executor)), and starts one timer
    /// loop per job. Must be called inside a tokio runtime.
    ///
    /// Fails without starting anything when no provider was given, the instance id is invalid,
    /// a type was given to [`state`](Self::state) twice, a job's lock configuration is invalid
    /// (e.g. a default name over 64 bytes, or a `lock_at_most_for` over 1000 years), a job's
    /// initial delay is over 1000 years, two jobs share a name or a lock name, a job's
    /// parameters need state that was not registered (every such job and type is named), or a
    /// [sharded](Job::with_shards) or [broadcast](Job::broadcast) job breaks their rules.
    /// Starting with no jobs logs a warning that says why it happens and how to fix it; so does
    /// a job whose `lock_at_most_for` is more than 10 periods of the job long (a dead holder
    /// would stop it cluster-wide for that long; keep-alive with a short lease is the pattern
    /// for long jobs).
    ///
    /// Before any job fires, it measures the database's clock
    /// ([`LockProvider::database_time`], a few round trips, each bounded by the operation
    /// timeout): every slot is the database's time, never this host's. When the database does
    /// not answer any of them, `start` fails with the provider's error and nothing fires:
    /// a scheduler never fires by a clock it has not measured (start it again, or let the
    /// service's supervisor restart it, once the database is back). A missing lock table is
    /// met here first: the error names it and holds its `CREATE` statement.
    ///
    /// Then it finishes every [`run_once`](Self::run_once) task (a failure fails `start`,
    /// nothing fires), starts the jobs, and logs one INFO line, `scheduler started`, saying
    /// what is on: `history` (`"on, retention 7d"`, or `"off: why"`), `registry`,
    /// `acquire_ahead` and `clock_offset_ms` (this host's clock ahead of the database's).
    pub async fn start(self) -> Result<Scheduler, LockError> {
        let provider = self.provider.ok_or_else(|| {
            LockError::InvalidConfiguration(
                "Scheduler::builder() needs .lock_provider(..) before .start()".into(),
            )
        })?;
        let lock_provider: Arc<dyn LockProvider> = provider.clone();
        let mut executor =
            LockingTaskExecutor::from_shared(lock_provider).with_defaults(self.defaults);
        if let Some(timeout) = self.operation_timeout {
            executor = executor.with_operation_timeout(timeout);
        }
        if let Some(id) = self.instance_id {
            executor = executor.with_instance_id(id)?;
        }
        if let Some(lead) = self.max_slot_lead {
            executor = executor.with_max_slot_lead(lead);
        }
        if let Some(window) = self.batch_window {
            executor = executor.with_batch_window(window);
        }
        executor = executor.with_acquire_ahead(self.acquire_ahead.unwrap_or(DEFAULT_ACQUIRE_AHEAD));
        let clock_refresh = self.clock_refresh.unwrap_or(DEFAULT_CLOCK_REFRESH);
        if clock_refresh.is_zero() {
            return Err(LockError::InvalidConfiguration(
                "clock_refresh: the interval must be more than zero".into(),
            ));
        }
        let heartbeat_interval = self
            .heartbeat_interval
            .unwrap_or(cluster::DEFAULT_HEARTBEAT_INTERVAL);
        if heartbeat_interval.is_zero() || self.history.is_some_and(|r| r.is_zero()) {
            return Err(LockError::InvalidConfiguration(
                "heartbeat_interval and history retention must be more than zero".into(),
            ));
        }
        self.run_logs
            .check()
            .map_err(LockError::InvalidConfiguration)?;
        if !self.state_twice.is_empty() {
            return Err(LockError::InvalidConfiguration(format!(
                "registered twice with .state(..): {}; register each type once (wrap values \
                 of one type in distinct newtypes)",
                self.state_twice.join(", ")
            )));
        }
        let from_registry = self.jobs.is_none();
        let jobs = match self.jobs {
            Some(jobs) => jobs,
            None => registered_jobs()?,
        };
        let mut overrides = self.overrides;
        // Without the feature: refused when any is set, else nothing to hand on.
        #[cfg_attr(not(feature = "alerts"), allow(unused_variables))]
        let alert_vars = overrides.take_alert_vars()?;
        let prepared = overrides.apply(startup::prepare(jobs, &executor, &self.state)?)?;
        if prepared.is_empty() {
            startup::warn_no_jobs(from_registry);
        }
        startup::warn_long_leases(&prepared);
        startup::refuse_names_sharing_a_row(&executor, &prepared).await?;
        let clock = DatabaseClock::for_scheduler(&executor).await?;
        let retention =
            (!self.no_history).then(|| self.history.unwrap_or(DEFAULT_HISTORY_RETENTION));
        let ops = cluster::Operations::set_up(
            &provider,
            executor.instance_id(),
            retention,
            self.history.is_some(),
            heartbeat_interval,
            executor.operation_timeout(),
            executor.batch_window(),
            &clock,
            self.run_logs,
            self.share_jobs,
        )
        .await;
        let summary = StartSummary::new(ops.as_ref(), self.no_history);
        let ops = ops.ok();
        if self.share_jobs && ops.is_none() {
            return Err(LockError::InvalidConfiguration(format!(
                "share_jobs(true) needs the cluster registry (the provider's operations tables) \
                 to know which instances share the jobs, and this scheduler has none ({}): use \
                 a provider that keeps them and call its ensure_schema(), or leave share_jobs off",
                summary.registry
            )));
        }
        // Before any job loop exists: a job that needs the task's work never fires first.
        run_once::run_all(&executor, self.run_once).await?;
        let mut prepared = prepared;
        if let Some(housekeeping) = ops
            .as_ref()
            .map(|o| o.housekeeping_job())
            .transpose()?
            .flatten()
        {
            if prepared
                .iter()
                .any(|(job, _)| job.name() == HOUSEKEEPING_JOB)
            {
                return Err(LockError::InvalidConfiguration(format!(
                    "a job is named `{HOUSEKEEPING_JOB}`, the name of the history's housekeeping job"
                )));
            }
            prepared.extend(startup::prepare(
                vec![housekeeping],
                &executor,
                &self.state,
            )?);
        }
        #[cfg(feature = "alerts")]
        if let Some(evaluation) = self.alerting.job(
            alert_vars,
            &provider,
            ops.is_some(),
            ops.as_ref().is_some_and(|ops| ops.keeps_history()),
        )? {
            if prepared
                .iter()
                .any(|(job, _)| job.name() == alerting::ALERT_RULES_JOB)
            {
                return Err(LockError::InvalidConfiguration(format!(
                    "a job is named `{}`, the name of the alert rules' evaluation job",
                    alerting::ALERT_RULES_JOB
                )));
            }
            alerting::check_store(&*provider).await?;
            if let Some(ops) = &ops {
                ops.leave_on_stop();
            }
            prepared.extend(startup::prepare(vec![evaluation], &executor, &self.state)?);
        }

        shards::require_registry(prepared.iter().map(|(job, _)| &**job), ops.is_some())?;
        let jobs: Vec<&Job> = prepared.iter().map(|(job, _)| &**job).collect();
        dependents::check(&jobs, ops.is_some())?;
        drop(jobs);
        // Before any job loop runs: a parent's first fire already writes its children's
        // requests.
        let children = match &ops {
            Some(ops) => {
                dependents::register_all(&ops.dependents, prepared.iter().map(|(job, _)| &**job))
            }
            None => 0,
        };
        let permits = self
            .limits
            .permits(prepared.iter().map(|(job, _)| &**job))?;
        breaker::require_history(
            prepared.iter().map(|(job, _)| &**job),
            ops.as_ref().is_some_and(|ops| ops.keeps_history()),
        )?;
        install_scheduler_executor(&executor);
        let inner = Arc::new(Inner {
            executor: Arc::new(executor),
            trigger_texts: Default::default(),
            stop: CancellationToken::new(),
            loops: TaskTracker::new(),
            beats: TaskTracker::new(),
            shutdown_timeout: self.shutdown_timeout.unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT),
            jobs: JobTable::default(),
            values: Arc::new(self.state),
            clock,
            ops,
            permits,
        });
        tokio::spawn(
            inner
                .clock
                .clone()
                .refresh_until(clock_refresh, inner.stop.clone()),
        );
        if let Some(ops) = &inner.ops {
            ops.read_pauses().await;
        }
        let started = tokio::time::Instant::now();
        inner.jobs.lock().reserve_exact(prepared.len());
        for (job, config) in prepared {
            let entry = inner.spawn_job(job, config, started);
            inner.jobs.push(entry);
        }
        if let Some(ops) = inner.ops.clone() {
            if children > 0
                && let Some(due) = ops.dependents.take_receiver()
            {
                tokio::spawn(dependencies::start_due(inner.clone(), ops.clone(), due));
            }
            // Tracked apart from the job loops: it beats until they have ended, then may
            // leave the registry (sharded and broadcast jobs), which shutdown waits for.
            let heartbeat = cluster::heartbeat_loop(inner.clone(), ops);
            inner.beats.spawn(heartbeat);
        }
        tracing::info!(
            instance = inner.executor.instance_id(),
            provider = %inner.executor.provider().describe(),
            jobs = inner.jobs.len(),
            history = ?summary.history,
            registry = ?summary.registry,
            acquire_ahead = ?inner.executor.acquire_ahead(),
            clock_offset_ms = inner.clock.host_offset().num_milliseconds(),
            "scheduler started"
        );
        Ok(Scheduler { inner })
    }
}
