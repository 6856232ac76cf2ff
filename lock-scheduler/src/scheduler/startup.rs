//! What `start()` checks before any job fires: job names by the macros' rule
//! (`lock_trigger::check_job_name`), unique job names, one job per lock name, each
//! job's lock configuration, no job locked under another's shard lock (`x#0` beside a sharded
//! `x`), and every job's parameters against the registered state; and
//! what it warns about: no jobs, leases many periods long; and what its INFO line says is on.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use lock_trigger::Firing;

use super::Job;
use super::cluster::Operations;
use crate::StateMap;
use lock_core::{LockConfiguration, LockError, LockingTaskExecutor};

/// A checked job with its resolved lock configuration.
///
/// The job is behind an `Arc` from here on, the one its runner keeps: moved through
/// start-up as a pointer, a job's few hundred bytes are allocated once, and the list of
/// 10,000 prepared jobs, alive until the last loop is spawned, is 96 bytes a job instead of
/// 424 (`idle_cost`'s peak memory).
pub(super) type Prepared = (Arc<Job>, LockConfiguration);

/// The jobs with their lock configurations, or every problem of the first kind found.
pub(super) fn prepare(
    jobs: Vec<Job>,
    executor: &LockingTaskExecutor,
    state: &StateMap,
) -> Result<Vec<Prepared>, LockError> {
    let mut prepared: Vec<Prepared> = Vec::with_capacity(jobs.len());
    // Maps, not scans of `prepared`: start-up stays linear with 10,000 jobs. They hold the
    // jobs' shared names, not copies: 40,000 short strings made and freed here would leave
    // holes between the jobs that stay (`idle_cost`'s peak memory).
    // Each job name with its job's place in `prepared`, for the message about a second one.
    let mut names: HashMap<Arc<str>, usize> = HashMap::with_capacity(jobs.len());
    // Each lock name with its job's name.
    let mut lock_holders: HashMap<Arc<str>, Arc<str>> = HashMap::with_capacity(jobs.len());
    let mut missing = Vec::new();
    for job in jobs {
        // The macros' rule, also for a job whose lock has another name (`with_lock`): the job
        // name is shown by lockctl and the dashboard and logged. `{:?}`: the refused name is
        // shown escaped, so this message cannot forge a line either.
        lock_trigger::check_job_name(job.name()).map_err(|e| {
            LockError::InvalidConfiguration(format!("invalid job name {:?}: {e}", job.name()))
        })?;
        if let Some(first) = names.insert(job.shared_name(), prepared.len()) {
            let first = prepared[first].0.origin();
            return Err(duplicate_name(job.name(), &first, &job.origin()));
        }
        // An initial delay set by `with_initial_delay` is first checked here.
        job.trigger()
            .check_limits()
            .map_err(|e| LockError::InvalidConfiguration(format!("job `{}`: {e}", job.name())))?;
        let config = job.lock_configuration(executor)?;
        job.run_policy()
            .check(&config)
            .map_err(|e| LockError::InvalidConfiguration(format!("job `{}`: {e}", job.name())))?;
        super::shards::check_job(&job, &config)?;
        super::breaker::check_job(&job)?;
        // Two jobs under one lock share its `last_fire`: each would refuse the other's slots
        // as already run.
        if let Some(other) = lock_holders.insert(config.shared_name().clone(), job.shared_name()) {
            return Err(LockError::InvalidConfiguration(format!(
                "jobs `{other}` and `{}` are both locked under `{}`: they would share the lock's \
                 last fire, so one job's fires would be refused as already run whenever the \
                 other ran a later slot; give one of them another lock name",
                job.name(),
                config.name()
            )));
        }
        missing.extend(
            job.missing_state(state)
                .into_iter()
                .map(|need| format!("job {} needs {need}", job.name())),
        );
        prepared.push((Arc::new(job), config));
    }
    if !missing.is_empty() {
        return Err(LockError::InvalidConfiguration(missing.join("; ")));
    }
    let jobs: Vec<_> = prepared
        .iter()
        .map(|(job, config)| (&**job, config))
        .collect();
    super::shards::check_shard_rows(&jobs)?;
    Ok(prepared)
}

/// Refuses jobs whose lock names the lock table keeps in one row although they differ (a
/// MySQL/MariaDB table made by ShedLock's DDL ignores case and trailing spaces: `Report` and
/// `report` would share one lease and one last fire); names both jobs. The provider warns with
/// the `ALTER TABLE` that makes the column compare bytes.
pub(super) async fn refuse_names_sharing_a_row(
    executor: &LockingTaskExecutor,
    prepared: &[Prepared],
) -> Result<(), LockError> {
    let names: Vec<&str> = prepared.iter().map(|(_, config)| config.name()).collect();
    let pairs = executor.provider().names_sharing_a_row(&names).await?;
    let Some((a, b)) = pairs.first() else {
        return Ok(());
    };
    let job_of = |lock: &str| {
        prepared
            .iter()
            .find(|(_, config)| config.name() == lock)
            .map_or(lock.to_owned(), |(job, _)| job.name().to_owned())
    };
    Err(LockError::InvalidConfiguration(format!(
        "jobs `{}` and `{}` are locked under `{a}` and `{b}`, which {} compares as one name \
         (its name column ignores case or trailing spaces): they would share one lock and its \
         last fire; make the column compare bytes (the warning above has the ALTER TABLE) or \
         give one of them another lock name",
        job_of(a),
        job_of(b),
        executor.provider().describe()
    )))
}

/// What `start()`'s INFO line says of the operations tables: history (with its retention)
/// and the registry, each `on` or `off: why`.
pub(super) struct StartSummary {
    pub(super) history: String,
    pub(super) registry: String,
}

impl StartSummary {
    /// From what setting up the operations tables gave (or why it did not), and whether
    /// `.no_history()` was called.
    pub(super) fn new(ops: Result<&Arc<Operations>, &String>, no_history: bool) -> Self {
        match ops {
            Ok(ops) => StartSummary {
                history: match ops.retention() {
                    Some(retention) => format!("on, retention {}", retention_text(retention)),
                    None if no_history => "off: .no_history() was called".into(),
                    None => "off".into(),
                },
                registry: "on".into(),
            },
            Err(why) => StartSummary {
                history: format!("off: {why}"),
                registry: format!("off: {why}"),
            },
        }
    }
}

/// A retention in the largest whole unit that states it exactly: `7d`, `36h`, `90m`, `45s`.
fn retention_text(retention: Duration) -> String {
    let secs = retention.as_secs();
    if retention.subsec_nanos() != 0 || secs == 0 {
        return format!("{retention:?}");
    }
    for (unit, per) in [("d", 86_400), ("h", 3_600), ("m", 60)] {
        if secs.is_multiple_of(per) {
            return format!("{}{unit}", secs / per);
        }
    }
    format!("{secs}s")
}

/// The warning for a scheduler started without jobs: why it happens, and the fix.
pub(super) fn warn_no_jobs(from_registry: bool) {
    if from_registry {
        tracing::warn!(
            "scheduler started with no jobs: no #[scheduled] function is linked into this binary. \
             Jobs defined in a library crate are registered only when the binary links that \
             crate, and a crate the binary never names is not linked. Name it once in the \
             binary, e.g. `use my_jobs as _;` in main.rs (with your crate's name), or pass the \
             jobs with .jobs(..)"
        );
    } else {
        tracing::warn!("scheduler started with no jobs: .jobs(..) was given an empty list");
    }
}

/// A `lock_at_most_for` longer than this many periods of its job is warned about at start.
///
/// The lease is how long a dead holder blocks its job cluster-wide: 10 periods means up to ten
/// fires missed after a crash, more than any job that fits in its period needs (a job that
/// overruns its period skips slots anyway). 10 leaves the common "every minute, at most 10
/// minutes" quiet and catches the 30-minute default on a job every few seconds.
pub(super) const LONG_LEASE_PERIODS: u32 = 10;

/// Warns about each job whose `lock_at_most_for` is over [`LONG_LEASE_PERIODS`] periods long:
/// if its holder dies, no instance runs it until the lease ends. The recommended pattern for a
/// job of unknown length is keep-alive with a short lease.
pub(super) fn warn_long_leases(prepared: &[Prepared]) {
    for (job, config) in prepared {
        let at_most = config.lock_at_most_for();
        let Some(period) = period_too_short_for(job, at_most) else {
            continue;
        };
        tracing::warn!(
            job = job.name(),
            lock = config.name(),
            lock_at_most_for = ?at_most,
            period = ?period,
            periods = at_most.as_secs_f64() / period.as_secs_f64(),
            "lock_at_most_for is more than {LONG_LEASE_PERIODS} periods of the job: if the \
             instance running it dies, no instance runs the job until the lease ends. Set \
             lock_at_most_for a little above the job's longest run, or for a job of unknown \
             length use keep_alive = true with a short lock_at_most_for (the lease is then \
             extended while the body runs and ends soon after a crash)"
        );
    }
}

/// The job's period if `at_most` is more than [`LONG_LEASE_PERIODS`] of it: an after-run
/// delay, or the first of a slotted trigger's next gaps that is short enough (its slots need
/// not be evenly spaced: weekdays only, DST).
fn period_too_short_for(job: &Job, at_most: Duration) -> Option<Duration> {
    let too_long = |period: Duration| {
        period
            .checked_mul(LONG_LEASE_PERIODS)
            .is_some_and(|limit| at_most > limit)
    };
    match job.trigger().spec().kind.firing() {
        Firing::AfterRun { delay } => too_long(delay).then_some(delay),
        Firing::AfterParents => None,
        // No gap is shorter than min_gap: skipping the slot arithmetic keeps a start with
        // 10,000 cron jobs fast.
        Firing::Slotted { min_gap } if !too_long(min_gap) => None,
        Firing::Slotted { .. } => {
            // Four gaps: enough to meet a short one in a weekday or weekend pattern.
            let mut at = job.trigger().next_slot(Utc::now())?.instant();
            for _ in 0..4 {
                let next = job.trigger().next_slot(at)?.instant();
                let gap = (next - at).to_std().ok()?;
                if !gap.is_zero() && too_long(gap) {
                    return Some(gap);
                }
                at = next;
            }
            None
        }
    }
}

/// Two jobs with the name `name`, from `first` and `second` ([`Job::origin`]): names both and
/// how to tell them apart.
pub(super) fn duplicate_name(name: &str, first: &str, second: &str) -> LockError {
    LockError::InvalidConfiguration(format!(
        "two jobs are named `{name}`: {first} and {second}; a name is the job's lock and \
         identity in the cluster, so give one of them another with \
         `#[scheduler_lock(name = \"..\")]` (or `#[scheduled(name = \"..\")]`, or the name \
         given to `Job::new`)"
    ))
}
