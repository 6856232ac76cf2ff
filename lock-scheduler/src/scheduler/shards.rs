//! Sharded and broadcast jobs: one slot's work spread over the live instances.
//!
//! Here are a spread's shard locks, its start checks and its rules; the fire itself is
//! `JobRunner::fire_spread` (`runner.rs`), beside the runner's other fire paths.
//!
//! Decisions, and why:
//! - **Each shard is a lock of its own**, `<lock name>#<index>`, with its own lease, fence and
//!   once-per-slot record (`last_fire`), and each is fired through the same per-fire path as
//!   an unsharded job (`JobRunner::fire_one` with the shard's [`LockConfiguration`]): pause,
//!   history, metrics and whatever else applies to a fire applies per shard. Exactly once per
//!   (slot, shard) is the lock's guarantee, whoever tries; the spread below only decides who
//!   tries first.
//! - **Spread by rank.** An instance's rank `r` among the `n` live instances comes from the
//!   cluster registry, read right after each heartbeat (one statement reading the instances'
//!   own rows, only in a scheduler with such jobs; never per fire). At a slot it fires at once the shards
//!   with `index % n == r`, and [`SHARD_TAKEOVER_DELAY`] later (at most a quarter of the gap between
//!   slots) tries the others, which run only where their preferred instance did not: that is
//!   how the shards of an instance that died are run from the next slot (once their leases
//!   have ended), before the registry notices it is gone. Without a registry (a provider with
//!   no operations tables) the rank is a stable hash of the instance id, preferring one shard.
//!   With fewer instances than shards an instance runs several shards concurrently; with at
//!   least as many, each runs at most one.
//! - **Broadcast** runs rank `r` of `n` on each instance, locked as `<lock name>#<r>` with the
//!   slot: if two instances see the same rank during a membership change, one runs it. It
//!   needs the registry; `start` refuses a broadcast job without it. An instance that stops
//!   gracefully leaves the registry at once (its last heartbeat says so), so the others
//!   re-rank at their next heartbeat; a killed one counts as gone after
//!   [`GONE_AFTER_HEARTBEATS`](lock_cluster::GONE_AFTER_HEARTBEATS) intervals.
//! - **A manual run** (`Scheduler::trigger`, a trigger request) of a sharded job runs every
//!   shard on this instance; of a broadcast job, this instance's rank.
//! - **History and metrics carry the shard in the name**: a shard's runs are kept under
//!   `<job>#<index>` and its metrics under the shard's lock name (label `scheduled_job`), so
//!   the history tables need no new column and `lockctl history 'job#2'` shows one shard.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use lock_trigger::{Distribution, Firing, MAX_SHARDS};

use super::Job;
use super::job::trigger_text;
use super::status::{JobState, RunOutcome};
use lock_core::{LockConfiguration, LockError};

/// How long after a slot an instance tries the shards other instances prefer (at most a
/// quarter of the time between two slots): long enough for a live preferred instance's
/// acquire to commit first on a loaded host, short enough that a dead instance's shard starts
/// well within its slot.
pub const SHARD_TAKEOVER_DELAY: Duration = Duration::from_millis(250);

/// A sharded or broadcast job's locks, one per shard (or rank).
pub(super) struct Spread {
    pub(super) distribution: Distribution,
    /// The job's own lock, which the shards' locks derive from.
    base: LockConfiguration,
    /// Each shard's lock and status. Fixed shards: built at start. Broadcast: built at a
    /// rank's first fire. A shard's own status, so that concurrent shards do not clear each
    /// other's "in its body"; the job's status covers the whole fire (`fire_spread`).
    shards: Vec<OnceLock<(LockConfiguration, Arc<JobState>)>>,
    pub(super) takeover: Duration,
}

/// Checks a job's distribution at start: the count, a slotted trigger, the derived names.
pub(super) fn check_job(job: &Job, config: &LockConfiguration) -> Result<(), LockError> {
    let distribution = job.distribution();
    if distribution == Distribution::Single {
        return Ok(());
    }
    let refuse =
        |why: String| LockError::InvalidConfiguration(format!("job `{}`: {why}", job.name()));
    if let Firing::AfterRun { .. } = job.trigger().spec().kind.firing() {
        return Err(refuse(format!(
            "a job with {distribution} needs a cron or fixed-rate trigger: each shard runs once \
             per slot, and a fixed-delay job has no slots"
        )));
    }
    distribution
        .check(config.name())
        .map_err(|e| refuse(e.to_string()))
}

/// Refuses a job whose lock name is a shard's of another job: `x#0` is both the lock of a job
/// locked as `x#0` and the row of shard 0 of a job `x` with shards (or broadcast), so the two
/// would share its lease and its last fire. Linear in the jobs: a shard's row names its base
/// (the text before the last `#`, the index being digits), so only that base is looked up.
pub(super) fn check_shard_rows(jobs: &[(&Job, &LockConfiguration)]) -> Result<(), LockError> {
    let spread: HashMap<&str, &Job> = jobs
        .iter()
        .filter(|(job, _)| job.distribution() != Distribution::Single)
        .map(|(job, config)| (config.name(), *job))
        .collect();
    if spread.is_empty() {
        return Ok(());
    }
    for (job, config) in jobs {
        let Some((base, index)) = config.name().rsplit_once('#') else {
            continue;
        };
        let Some(other) = spread.get(base).filter(|other| other.name() != job.name()) else {
            continue;
        };
        let count = match other.distribution() {
            Distribution::Shards(n) => n,
            Distribution::Broadcast => MAX_SHARDS,
            Distribution::Single => continue,
        };
        // `x#00` is not a shard's name: shards are named by the index as `format!` writes it.
        let Some(shard) = index.parse::<u32>().ok().filter(|k| k.to_string() == index) else {
            continue;
        };
        if shard < count {
            return Err(LockError::InvalidConfiguration(format!(
                "job `{}` is locked under `{}`, which is also the lock of shard {shard} of job \
                 `{}` ({}, locked as `{base}#<index>`): they would share its lease and last \
                 fire, so each would refuse the other's slots as already run; give one of \
                 them another lock name",
                job.name(),
                config.name(),
                other.name(),
                other.distribution(),
            )));
        }
    }
    Ok(())
}

/// Refuses to start a broadcast job without the registry (which gives the ranks).
pub(super) fn require_registry<'a>(
    jobs: impl IntoIterator<Item = &'a Job>,
    has_registry: bool,
) -> Result<(), LockError> {
    if has_registry {
        return Ok(());
    }
    let broadcast: Vec<&str> = jobs
        .into_iter()
        .filter(|job| job.distribution() == Distribution::Broadcast)
        .map(Job::name)
        .collect();
    if broadcast.is_empty() {
        return Ok(());
    }
    Err(LockError::InvalidConfiguration(format!(
        "broadcast job(s) {} need the cluster registry (the provider's operations tables) to \
         know the live instances, and this scheduler has none: use a provider that keeps them \
         and call its ensure_schema(), or remove `broadcast`",
        broadcast
            .iter()
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// The spread of a job about to be spawned (checked at start by [`check_job`]); asks the
/// heartbeat to keep the view of the live instances when there is one.
pub(super) fn spread_of(
    job: &Job,
    config: &LockConfiguration,
    ops: Option<&super::cluster::Operations>,
) -> Option<Arc<Spread>> {
    let spread = Spread::for_job(job, config).unwrap_or_else(|error| {
        // check_job refused this at start already.
        tracing::error!(job = job.name(), %error, "the job's shard locks are invalid; it runs unsharded");
        None
    })?;
    if let Some(ops) = ops {
        ops.members.want();
    }
    Some(spread)
}

impl Spread {
    /// The locks of `job` (None for an unsharded job); `config` is the job's own lock.
    pub(super) fn for_job(
        job: &Job,
        config: &LockConfiguration,
    ) -> Result<Option<Arc<Spread>>, LockError> {
        let distribution = job.distribution();
        let count = match distribution {
            Distribution::Single => return Ok(None),
            Distribution::Shards(n) => n,
            Distribution::Broadcast => MAX_SHARDS,
        };
        let shards = (0..count).map(|_| OnceLock::new()).collect();
        let min_gap = match job.trigger().spec().kind.firing() {
            Firing::Slotted { min_gap } => min_gap,
            Firing::AfterRun { delay } => delay,
            // A dependent job's runs come at its parents' slots, at least a second apart.
            Firing::AfterParents => Duration::from_secs(1),
        };
        let spread = Spread {
            distribution,
            base: config.clone(),
            shards,
            takeover: SHARD_TAKEOVER_DELAY.min(min_gap / 4),
        };
        if let Distribution::Shards(n) = distribution {
            for index in 0..n {
                spread.shard(index, job)?;
            }
        }
        Ok(Some(Arc::new(spread)))
    }

    /// The lock and status of shard (or rank) `index` of `job`.
    pub(super) fn shard(
        &self,
        index: u32,
        job: &Job,
    ) -> Result<&(LockConfiguration, Arc<JobState>), LockError> {
        let slot = &self.shards[index as usize];
        if let Some(shard) = slot.get() {
            return Ok(shard);
        }
        let base = &self.base;
        let lock = LockConfiguration::new(
            self.distribution.lock_name(base.name(), index),
            base.lock_at_most_for(),
            base.lock_at_least_for(),
        )?
        .with_keep_alive(base.keep_alive())
        .with_release_linger(base.release_linger());
        Ok(slot.get_or_init(|| {
            (
                lock,
                Arc::new(JobState::new(job.shared_name(), trigger_text(job).into())),
            )
        }))
    }
}

/// One outcome for a fire of several shards: the first failure, else success if any shard
/// ran here, else the first other outcome (skipped: the shards ran elsewhere).
pub(super) fn combine(outcomes: impl Iterator<Item = RunOutcome>) -> RunOutcome {
    let mut best: Option<RunOutcome> = None;
    for outcome in outcomes {
        let rank = |o: &RunOutcome| match o {
            RunOutcome::Failed(_) | RunOutcome::Panicked(_) | RunOutcome::LockFailed(_) => 3,
            RunOutcome::Cancelled => 2,
            RunOutcome::Succeeded => 1,
            _ => 0,
        };
        if best.as_ref().is_none_or(|b| rank(&outcome) > rank(b)) {
            best = Some(outcome);
        }
    }
    best.unwrap_or(RunOutcome::Skipped)
}

/// FNV-1a: the same on every instance and every build, unlike `std`'s hasher.
pub(super) fn stable_hash(text: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in text.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_combine_to_the_worst_that_ran() {
        let all = |o: Vec<RunOutcome>| combine(o.into_iter());
        assert_eq!(all(vec![]), RunOutcome::Skipped);
        assert_eq!(
            all(vec![RunOutcome::Skipped, RunOutcome::Succeeded]),
            RunOutcome::Succeeded
        );
        assert_eq!(
            all(vec![
                RunOutcome::Succeeded,
                RunOutcome::Failed(lock_core::JobError::new("x")),
                RunOutcome::Skipped
            ]),
            RunOutcome::Failed(lock_core::JobError::new("x"))
        );
        assert_eq!(stable_hash("a"), stable_hash("a"));
        assert_ne!(stable_hash("a"), stable_hash("b"));
    }
}
