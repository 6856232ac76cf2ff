//! A job: a name, a trigger, a lock and a body.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::attempts::RunPolicy;
use crate::__private::{self, BoxFuture, JobBody, JobResult, LockSpec, ScheduledJob};
use crate::{
    BlockingJobHandler, Distribution, ExtractError, JobHandler, Overlap, StateMap, Trigger,
};
use lock_core::{JobContext, JobError, LockConfiguration, LockError, LockingTaskExecutor};

/// One job the [`Scheduler`](crate::Scheduler) runs: a name, a [`Trigger`], how it is locked
/// and what it runs.
///
/// Every `#[scheduled]` function in the binary is a job already ([`registered_jobs`]); build
/// one by hand for schedules only known at run time:
///
/// ```
/// use lock_core::LockConfiguration;
/// use lock_scheduler::{Job, Trigger};
/// use std::time::Duration;
///
/// let job = Job::new("cleanup", Trigger::fixed_rate(Duration::from_secs(60))?, || async {
///     // ... delete expired sessions
///     Ok::<(), std::io::Error>(())
/// })
/// .with_lock(LockConfiguration::new("cleanup", Duration::from_secs(300), Duration::from_secs(5))?);
/// assert_eq!(job.name(), "cleanup");
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone)]
pub struct Job {
    name: Arc<str>,
    trigger: Trigger,
    lock: JobLock,
    body: Body,
    /// Checks the body's extractors against the registered state (at start).
    check: fn(&StateMap) -> Vec<ExtractError>,
    /// The `#[scheduled]` function's path; `None` for a job built with [`Job::new`].
    function: Option<&'static str>,
    /// What the job does beyond one run per slot; `None` for none of it.
    policies: Option<Box<Policies>>,
}

/// A job's policies: boxed, and absent from a job built with [`Job::new`] or
/// [`Job::blocking`] that sets none (a service's 10,000 runtime jobs are each 88 bytes
/// smaller for their life). A `#[scheduled]` function's job always has them: there are few.
#[derive(Clone)]
struct Policies {
    /// Retries and timeout of each run.
    run: RunPolicy,
    /// How each slot's work is spread over the cluster.
    distribution: Distribution,
    /// What a fire does when the previous run still holds the lock.
    overlap: Overlap,
    /// The circuit breaker: pause after this many failed runs in a row.
    breaker: Option<Breaker>,
    /// The concurrency group (`#[scheduled(group = "..")]`), bounded by
    /// [`SchedulerBuilder::group_limit`](crate::SchedulerBuilder::group_limit).
    group: Option<Arc<str>>,
    /// The dead-man switch pinged at each run's start and end (`dead_man.rs`).
    #[cfg(feature = "alerts")]
    dead_man: Option<Arc<lock_alerts::DeadManSwitch>>,
}

/// The policies of a job that has none.
static PLAIN: Policies = Policies {
    run: RunPolicy::PLAIN,
    distribution: Distribution::Single,
    overlap: Overlap::Skip,
    breaker: None,
    group: None,
    #[cfg(feature = "alerts")]
    dead_man: None,
};

/// A job's circuit breaker (`pause_after_failures`, `pause_for`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Breaker {
    /// Failed runs in a row, across the cluster, that pause the job.
    pub(crate) after: u32,
    /// How long the pause lasts; None: until an operator resumes the job.
    pub(crate) pause_for: Option<Duration>,
}

#[derive(Clone)]
enum JobLock {
    /// From the macro: resolved against the executor's defaults at start.
    Spec(&'static LockSpec),
    /// Boxed: a job of the other two kinds (nearly all) is 72 bytes smaller, and a service of
    /// 10,000 jobs keeps each one for its life.
    Config(Box<LockConfiguration>),
    /// The job's own name, the executor's defaults.
    Default,
}

#[derive(Clone)]
pub(crate) enum Body {
    Registered(JobBody),
    Async(Arc<dyn Fn(Arc<StateMap>) -> BoxFuture<JobResult> + Send + Sync>),
    Blocking(Arc<dyn Fn(&StateMap) -> JobResult + Send + Sync>),
}

impl fmt::Debug for Job {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("name", &self.name)
            .field("trigger", &self.trigger)
            .finish_non_exhaustive()
    }
}

impl Job {
    /// A job running the async closure `body` at each fire. `body` returns `()` or
    /// `Result<(), E>`; an `Err` is logged as a failed run.
    ///
    /// Its parameters, if any, are extractors ([`FromJob`](crate::FromJob)), as for a
    /// `#[scheduled]` function: [`State<T>`](crate::State) for a value registered with
    /// [`SchedulerBuilder::state`](crate::SchedulerBuilder::state), and
    /// [`JobContext`](lock_core::JobContext).
    ///
    /// ```
    /// use lock_core::JobContext;
    /// use lock_scheduler::{Job, State, Trigger};
    /// use std::time::Duration;
    ///
    /// #[derive(Clone)]
    /// struct Pool;
    ///
    /// let job = Job::new(
    ///     "purge",
    ///     Trigger::fixed_rate(Duration::from_secs(60))?,
    ///     |State(_pool): State<Pool>, ctx: JobContext| async move {
    ///         println!("purging with fence {}", ctx.fence());
    ///     },
    /// );
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    ///
    /// The job is locked under its own name with the scheduler's default `lock_at_most_for`
    /// unless [`with_lock`](Self::with_lock) says otherwise.
    pub fn new<H, Args>(name: impl Into<Arc<str>>, trigger: Trigger, body: H) -> Self
    where
        H: JobHandler<Args>,
    {
        let body = Arc::new(body);
        Job {
            name: name.into(),
            trigger,
            lock: JobLock::Default,
            body: Body::Async(Arc::new(move |state| body.clone().call(state))),
            check: H::check,
            function: None,
            policies: None,
        }
    }

    /// A job running the synchronous closure `body` on tokio's blocking pool at each fire.
    ///
    /// ```
    /// # use lock_scheduler::{Job, Trigger};
    /// let job = Job::blocking("export", Trigger::cron("0 0 3 * * *")?, || {
    ///     // ... write a file
    /// });
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    ///
    /// Its parameters are extractors, as for [`Job::new`].
    pub fn blocking<H, Args>(name: impl Into<Arc<str>>, trigger: Trigger, body: H) -> Self
    where
        H: BlockingJobHandler<Args>,
    {
        Job {
            name: name.into(),
            trigger,
            lock: JobLock::Default,
            body: Body::Blocking(Arc::new(move |state| body.call(state))),
            check: H::check,
            function: None,
            policies: None,
        }
    }

    /// Locks the job with `config` (name, `lock_at_most_for`, `lock_at_least_for`,
    /// keep-alive) instead of its own name and the scheduler's defaults.
    #[must_use]
    pub fn with_lock(mut self, config: LockConfiguration) -> Self {
        self.lock = JobLock::Config(Box::new(config));
        self
    }

    /// Runs the body again, up to `retries` times, when it returns `Err` or panics
    /// (`#[scheduler_lock(retries = N, retry_backoff = "..")]`): under the same lease and
    /// slot, after a pause of `backoff`, doubled at each further retry (capped at
    /// `max(backoff, 10 min)`, less a random jitter of up to a quarter). Without keep-alive the
    /// lease is extended to a whole `lock_at_most_for` before each retry, and the pauses must
    /// fit in `lock_at_most_for` ([`start`](crate::SchedulerBuilder::start) refuses a plan
    /// that does not). [`JobContext::attempt`] tells the body which attempt it is.
    ///
    /// ```
    /// use lock_core::JobContext;
    /// use lock_scheduler::{Job, Trigger};
    /// use std::time::Duration;
    ///
    /// let job = Job::new("sync", Trigger::cron("0 */5 * * * *")?, |ctx: JobContext| async move {
    ///     if ctx.attempt() < 3 { Err("upstream busy") } else { Ok(()) }
    /// })
    /// .with_retries(2, Duration::from_secs(10));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    #[must_use]
    pub fn with_retries(mut self, retries: u32, backoff: Duration) -> Self {
        let run = &mut self.policies_mut().run;
        run.retries = retries;
        run.backoff = backoff;
        self
    }

    /// Bounds each attempt of a run (`#[scheduler_lock(timeout = "..")]`): at `timeout` the
    /// body's [`JobContext::cancelled`] resolves; a body still running a grace later (a tenth
    /// of the timeout, between 1 s and 30 s) is **dropped**: its future is never polled again, so no code after the `.await` it is
    /// suspended at runs, while the destructors of everything it holds do run (guards,
    /// connections returned to their pools, transactions rolled back by their drop). The run
    /// is recorded as [`RunOutcome::TimedOut`](crate::RunOutcome::TimedOut), is not retried,
    /// and the lease is released. A blocking body (`Job::blocking`, a sync `fn`) cannot be
    /// dropped: it is told to stop, and keeps the lease until it returns.
    ///
    /// ```
    /// use lock_scheduler::{Job, Trigger};
    /// use std::time::Duration;
    ///
    /// let job = Job::new("report", Trigger::cron("0 0 * * * *")?, || async {})
    ///     .with_timeout(Duration::from_secs(300));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.policies_mut().run.timeout = Some(timeout);
        self
    }

    pub(crate) fn run_policy(&self) -> RunPolicy {
        self.policies().run
    }

    fn policies(&self) -> &Policies {
        self.policies.as_deref().unwrap_or(&PLAIN)
    }

    fn policies_mut(&mut self) -> &mut Policies {
        self.policies.get_or_insert_with(|| Box::new(PLAIN.clone()))
    }

    /// What a fire does when it finds the job's previous run still holding the lock, on any
    /// instance (`#[scheduler_lock(overlap = "..")]`): [`Overlap::Skip`] (the default) does
    /// not run it, [`Overlap::Queue`] runs it once right after the running one ends (later
    /// fires coalesce into it), [`Overlap::Replace`] tells the running body to stop and runs
    /// once the lock is free.
    ///
    /// ```
    /// use lock_scheduler::{Job, Overlap, Trigger};
    /// use std::time::Duration;
    ///
    /// let job = Job::new("sync", Trigger::fixed_rate(Duration::from_secs(10))?, || async {})
    ///     .with_overlap(Overlap::Queue);
    /// assert_eq!(job.overlap(), Overlap::Queue);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    #[must_use]
    pub fn with_overlap(mut self, overlap: Overlap) -> Self {
        self.policies_mut().overlap = overlap;
        self
    }

    /// The job's overlap policy.
    pub fn overlap(&self) -> Overlap {
        self.policies().overlap
    }

    /// The circuit breaker (`#[scheduler_lock(pause_after_failures = N, pause_for = "..")]`):
    /// after `failures` failed runs in a row, counted across the cluster, the job is paused
    /// cluster-wide, with the reason in the action log; with `pause_for` it resumes by itself
    /// after that long, without it an operator resumes it. Needs the run history.
    ///
    /// Fires are counted, not attempts: a fire with retries failed when its last attempt did;
    /// `failed`, `panicked` and `timed_out` count, a success resets the count. The pause is
    /// requested by `scheduler:circuit-breaker` (an operator's own pause is never lifted by
    /// the breaker). `start()` refuses `failures` of 0 or above
    /// [`MAX_PAUSE_AFTER_FAILURES`](lock_trigger::MAX_PAUSE_AFTER_FAILURES), a zero
    /// `pause_for`, and a breaker on a scheduler without history.
    ///
    /// ```
    /// use lock_scheduler::{Job, Trigger};
    /// use std::time::Duration;
    ///
    /// let job = Job::new("charge_cards", Trigger::cron("0 */5 * * * *")?, || async {})
    ///     .with_pause_after_failures(3, Some(Duration::from_secs(600)));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    #[must_use]
    pub fn with_pause_after_failures(mut self, failures: u32, pause_for: Option<Duration>) -> Self {
        self.policies_mut().breaker = Some(Breaker {
            after: failures,
            pause_for,
        });
        self
    }

    pub(crate) fn breaker(&self) -> Option<Breaker> {
        self.policies().breaker
    }

    /// Puts the job in the concurrency group `group` (`#[scheduled(group = "..")]`): at most
    /// [`SchedulerBuilder::group_limit`](crate::SchedulerBuilder::group_limit) of the group's
    /// bodies run at once on one instance; an instance at the limit leaves the fire to one
    /// with room.
    ///
    /// ```
    /// use lock_scheduler::{Job, Trigger};
    ///
    /// let job = Job::new("monthly_pdf", Trigger::cron("0 0 3 1 * *")?, || async {})
    ///     .with_group("reports");
    /// assert_eq!(job.group(), Some("reports"));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    #[must_use]
    pub fn with_group(mut self, group: impl Into<Arc<str>>) -> Self {
        self.policies_mut().group = Some(group.into());
        self
    }

    /// The job's concurrency group, if any.
    pub fn group(&self) -> Option<&str> {
        self.policies().group.as_deref()
    }

    /// Pings `switch`, an outside monitor (healthchecks.io, Cronitor), at each run's start
    /// and end (feature `alerts`), so a monitor notices when the runs stop altogether, even
    /// with the whole cluster down:
    ///
    /// - only the instance that won the lock pings: a fire refused by the lock, skipped,
    ///   paused or missed pings nothing;
    /// - `start` when the body starts; then, when the fire ends, `success`, or `fail` with
    ///   the error's message chain (cut to the monitor's limit). A timeout, a cancelled run
    ///   (shutdown, lost lease) and a panic are failures;
    /// - one start and one end per fire: with [`with_retries`](Self::with_retries) the end
    ///   goes after the last attempt;
    /// - both carry a run id that pairs them (Healthchecks' `rid`, Cronitor's `series`): a
    ///   UUID derived from the lock's name, the slot and the lease's fence;
    /// - the pings never delay the body or the lease's release: one task per fire sends them,
    ///   in order. A monitor that does not answer is logged at WARN and retried within the
    ///   switch's [`RetryPolicy`](lock_alerts::RetryPolicy) (by default at most about 17 s per
    ///   ping); [`Scheduler::shutdown`](crate::Scheduler::shutdown) waits for a pending end
    ///   ping within its timeout.
    ///
    /// Each shard of a sharded or broadcast job is a run of its own, with its own pair.
    ///
    /// ```
    /// use lock_alerts::DeadManSwitch;
    /// use lock_scheduler::{Job, Trigger};
    ///
    /// let check = DeadManSwitch::healthchecks("https://hc-ping.com/7a5f0b1e-2f3c-4b6d-9e8f-0a1b2c3d4e5f")?;
    /// let job = Job::new("nightly_report", Trigger::cron("0 0 3 * * *")?, || async {})
    ///     .with_dead_man_switch(check);
    /// assert!(job.dead_man_switch().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[cfg(feature = "alerts")]
    #[cfg_attr(docsrs, doc(cfg(feature = "alerts")))]
    #[must_use]
    pub fn with_dead_man_switch(mut self, switch: lock_alerts::DeadManSwitch) -> Self {
        self.policies_mut().dead_man = Some(Arc::new(switch));
        self
    }

    /// The dead-man switch the job pings, if any ([`with_dead_man_switch`](Self::with_dead_man_switch)).
    #[cfg(feature = "alerts")]
    #[cfg_attr(docsrs, doc(cfg(feature = "alerts")))]
    pub fn dead_man_switch(&self) -> Option<&lock_alerts::DeadManSwitch> {
        self.policies().dead_man.as_deref()
    }

    /// A fire's pings, when the job has a switch; `tasks` runs their task.
    pub(super) fn fire_pings(
        &self,
        slot: Option<lock_core::FireSlot>,
        tasks: &tokio_util::task::TaskTracker,
    ) -> Option<Arc<super::dead_man::FirePings>> {
        #[cfg(feature = "alerts")]
        {
            self.policies()
                .dead_man
                .as_ref()
                .map(|switch| super::dead_man::FirePings::new(switch.clone(), slot, tasks.clone()))
        }
        #[cfg(not(feature = "alerts"))]
        {
            let _ = (slot, tasks);
            None
        }
    }

    /// Runs each slot as `total` shards, as `#[scheduled(shards = N)]` does: shard `i` is
    /// locked under `<lock name>#<i>` (own lease, fence and once-per-slot record), runs exactly
    /// once per slot somewhere in the cluster, and its body reads `(i, total)` from
    /// [`JobContext::shard`]. Shards spread over the live instances; see the workspace's
    /// `book/shards-and-broadcast.md`.
    ///
    /// [`start`](crate::SchedulerBuilder::start) refuses a count outside `1..=`
    /// [`MAX_SHARDS`](crate::MAX_SHARDS), a fixed-delay trigger (no slots), and a lock name
    /// whose shard names would exceed 64 bytes.
    ///
    /// ```
    /// use lock_core::JobContext;
    /// use lock_scheduler::{Distribution, Job, Trigger};
    ///
    /// let job = Job::new("sync_bill", Trigger::cron("0 0 2 * * *")?, |ctx: JobContext| async move {
    ///     let (index, total) = ctx.shard().expect("a sharded job's fire");
    ///     println!("bills with id % {total} = {index}");
    /// })
    /// .with_shards(4);
    /// assert_eq!(job.distribution(), Distribution::Shards(4));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    #[must_use]
    pub fn with_shards(mut self, total: u32) -> Self {
        self.policies_mut().distribution = Distribution::Shards(total);
        self
    }

    /// Runs each slot on every live instance, as `#[scheduled(broadcast = true)]` does: the
    /// body reads `(rank, live instances)` from [`JobContext::shard`], the rank being this
    /// instance's position among the live instances of the cluster registry; each (slot, rank)
    /// runs once, under the lock `<lock name>#<rank>`.
    ///
    /// Needs the provider's operations tables (the registry): without them
    /// [`start`](crate::SchedulerBuilder::start) fails naming the job. A fixed-delay trigger is
    /// refused too.
    ///
    /// ```
    /// use lock_scheduler::{Distribution, Job, Trigger};
    /// use std::time::Duration;
    ///
    /// let job = Job::new("evict_local_cache", Trigger::fixed_rate(Duration::from_secs(60))?, || async {})
    ///     .broadcast();
    /// assert_eq!(job.distribution(), Distribution::Broadcast);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    #[must_use]
    pub fn broadcast(mut self) -> Self {
        self.policies_mut().distribution = Distribution::Broadcast;
        self
    }

    /// How each slot's work is spread: [`Distribution::Single`] unless
    /// [`with_shards`](Self::with_shards) or [`broadcast`](Self::broadcast) said otherwise.
    pub fn distribution(&self) -> Distribution {
        self.policies().distribution
    }

    /// The job's name (for `#[scheduled]` functions, their lock's name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the job comes from, for messages: `function `billing::tick`` for a
    /// `#[scheduled]` function, `a job built with Job::new` otherwise.
    pub(super) fn origin(&self) -> String {
        match self.function {
            Some(path) => format!("function `{path}`"),
            None => "a job built with `Job::new`".to_owned(),
        }
    }

    /// The name, shared (the job's status holds it without a copy of its own).
    pub(crate) fn shared_name(&self) -> Arc<str> {
        self.name.clone()
    }

    /// When it fires.
    pub fn trigger(&self) -> &Trigger {
        &self.trigger
    }

    /// The job firing on `trigger` instead (a configuration override).
    pub(crate) fn with_trigger(mut self, trigger: Trigger) -> Self {
        self.trigger = trigger;
        self
    }

    /// The name the job is locked under (before any executor's defaults apply).
    pub(crate) fn lock_name(&self) -> &str {
        match &self.lock {
            JobLock::Spec(spec) => spec.name(),
            JobLock::Config(config) => config.name(),
            JobLock::Default => &self.name,
        }
    }

    pub(crate) fn body(&self) -> &Body {
        &self.body
    }

    /// Runs the body once with `ctx` as its context, without a lock (for
    /// [`testing`](crate::testing)). A panic of the body continues in the caller.
    pub(crate) async fn run_body(&self, ctx: JobContext, values: Arc<StateMap>) -> JobResult {
        match &self.body {
            Body::Registered(JobBody::Async(body)) => ctx.scope(body(&values)).await,
            Body::Async(body) => ctx.scope(body(values)).await,
            Body::Registered(JobBody::Blocking(body)) => {
                let body = *body;
                run_blocking(ctx, move || body(&values)).await
            }
            Body::Blocking(body) => {
                let body = body.clone();
                run_blocking(ctx, move || body(&values)).await
            }
        }
    }

    /// What the body's parameters need and `state` lacks.
    pub(crate) fn missing_state(&self, state: &StateMap) -> Vec<ExtractError> {
        (self.check)(state)
    }

    /// The lock configuration under `executor`'s defaults.
    pub(crate) fn lock_configuration(
        &self,
        executor: &LockingTaskExecutor,
    ) -> Result<LockConfiguration, LockError> {
        let result = match &self.lock {
            JobLock::Spec(spec) => spec.configuration(executor),
            JobLock::Config(config) => Ok((**config).clone()),
            JobLock::Default => {
                let defaults = executor.defaults();
                LockConfiguration::new(self.name.clone(), defaults.lock_at_most_for, Duration::ZERO)
                    .map(|c| c.with_keep_alive(defaults.keep_alive))
            }
        };
        result
            .map(|config| config.with_release_linger(release_linger(&self.trigger)))
            .map_err(|e| LockError::InvalidConfiguration(format!("job `{}`: {e}", self.name)))
    }

    fn from_registered(job: &'static ScheduledJob) -> Result<Self, LockError> {
        let context =
            |e: LockError| LockError::InvalidConfiguration(format!("job `{}`: {e}", job.name));
        let trigger = Trigger::from_spec_after(&job.trigger, job.after).map_err(context)?;
        let spec = &job.lock.spec;
        let policies = Policies {
            run: RunPolicy::of_spec(&job.lock.spec),
            distribution: job.distribution,
            overlap: spec.overlap,
            breaker: (spec.pause_after_failures > 0).then_some(Breaker {
                after: spec.pause_after_failures,
                pause_for: spec.pause_for,
            }),
            group: job.group.map(Arc::from),
            #[cfg(feature = "alerts")]
            dead_man: None,
        };
        Ok(Job {
            name: job.name.into(),
            trigger,
            lock: JobLock::Spec(job.lock),
            body: Body::Registered(job.body),
            check: job.check,
            function: Some(job.function),
            policies: Some(Box::new(policies)),
        })
    }
}

async fn run_blocking(
    ctx: JobContext,
    body: impl FnOnce() -> JobResult + Send + 'static,
) -> JobResult {
    match tokio::task::spawn_blocking(move || ctx.enter_blocking(body)).await {
        Ok(result) => result,
        Err(error) => match error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(error) => Err(JobError::new(format!(
                "the blocking body did not complete: {error}"
            ))),
        },
    }
}

/// `cron `0 0 2 * * *` in UTC, 4 shards`: what lockctl and the registry show of a job's
/// trigger.
pub(super) fn trigger_text(job: &Job) -> String {
    match job.distribution() {
        Distribution::Single => job.trigger().to_string(),
        spread => format!("{}, {spread}", job.trigger()),
    }
}

/// Every `#[scheduled]` function linked into this binary, sorted by name.
///
/// [`SchedulerBuilder::start`](crate::SchedulerBuilder::start) runs these unless
/// [`SchedulerBuilder::jobs`](crate::SchedulerBuilder::jobs) is given; filter this list to run
/// only some of them:
///
/// ```
/// let jobs: Vec<lock_scheduler::Job> = lock_scheduler::registered_jobs()?
///     .into_iter()
///     .filter(|job| job.name().starts_with("billing-"))
///     .collect();
/// # Ok::<(), lock_core::LockError>(())
/// ```
pub fn registered_jobs() -> Result<Vec<Job>, LockError> {
    let mut jobs = __private::inventory::iter::<ScheduledJob>
        .into_iter()
        .map(Job::from_registered)
        .collect::<Result<Vec<_>, _>>()?;
    jobs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(jobs)
}

/// The longest a scheduled fire's release waits for the others of its instant
/// ([`LockConfiguration::with_release_linger`]).
const RELEASE_LINGER: Duration = Duration::from_millis(250);

/// How long after its slot a fire's release may wait for the releases of the other bodies of
/// that instant: [`RELEASE_LINGER`], at most a quarter of the least gap between two slots.
/// The next slot's acquire is asked at least half that gap after the slot (`runner.rs`), so it
/// never finds the lock held by a release still waiting; a fire that queued or replaced a run
/// comes a whole gap after its slot, past the linger. No slots, no linger.
fn release_linger(trigger: &Trigger) -> Duration {
    match trigger.spec().kind.firing() {
        lock_trigger::Firing::Slotted { min_gap } => RELEASE_LINGER.min(min_gap / 4),
        _ => Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{RELEASE_LINGER, release_linger};
    use crate::Trigger;

    #[test]
    fn a_release_lingers_at_most_a_quarter_of_the_least_gap_between_slots() {
        // Cron slots are at least a second apart.
        let every_second = Trigger::cron("* * * * * *").unwrap();
        assert_eq!(release_linger(&every_second), RELEASE_LINGER);
        let fast = Trigger::fixed_rate(Duration::from_millis(100)).unwrap();
        assert_eq!(release_linger(&fast), Duration::from_millis(25));
        let slow = Trigger::fixed_rate(Duration::from_secs(60)).unwrap();
        assert_eq!(release_linger(&slow), RELEASE_LINGER);
        // No slots: the release goes within a batch window.
        let after_run = Trigger::fixed_delay(Duration::from_secs(1)).unwrap();
        assert_eq!(release_linger(&after_run), Duration::ZERO);
    }
}
