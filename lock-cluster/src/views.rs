//! The cluster as an operator sees it: instances alive or gone, every registered job with its
//! next fire, last run, pause and whether a fire was missed. Computed here once from the raw
//! rows, so every tool (lockctl, a dashboard) shows the same thing.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::ClusterProvider;
use crate::{ControlKind, ControlRequest, InstanceInfo, RegistryRow, RunRecord, RunState};
use lock_core::{LockError, LockRecord};

/// An instance counts as gone after this many of its heartbeat intervals without a heartbeat
/// (5 s at the default 1 s interval).
pub const GONE_AFTER_HEARTBEATS: i64 = 5;

/// How long past its next fire a job may go without a run before it is reported as missed
/// (default of [`ClusterOptions::missed_grace`]).
pub const DEFAULT_MISSED_GRACE: Duration = Duration::from_secs(60);

/// How [`ClusterView`] judges what it reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterOptions {
    /// A job whose next fire passed by more than this without a run is missed.
    pub missed_grace: Duration,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            missed_grace: DEFAULT_MISSED_GRACE,
        }
    }
}

/// One instance of the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceView {
    /// Who it is.
    pub info: InstanceInfo,
    /// Its last heartbeat (database time).
    pub last_heartbeat: DateTime<Utc>,
    /// Whether it heartbeated within [`GONE_AFTER_HEARTBEATS`] of its intervals.
    pub alive: bool,
    /// The jobs it registered (its job rows: a complete heartbeat deletes those of jobs it
    /// no longer runs).
    pub jobs: Vec<String>,
}

/// One run as shown: a [`RunRecord`] whose `running` outcome became
/// [`RunState::Unfinished`] when its instance is gone.
pub type RunView = RunRecord;

/// One job of the cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobView {
    /// The job's name.
    pub name: String,
    /// Its lock.
    pub lock_name: Option<String>,
    /// Its trigger as text (None for a job only known from a pause).
    pub trigger: Option<String>,
    /// The cron trigger's zone.
    pub zone: Option<String>,
    /// The next fire: the earliest of the live instances', or, with none alive, the last one
    /// registered.
    pub next_fire: Option<DateTime<Utc>>,
    /// Paused cluster-wide.
    pub paused: bool,
    /// The live instances that run it.
    pub live_instances: Vec<String>,
    /// Its newest run in the history.
    pub last_run: Option<RunView>,
    /// The end of its latest successful run in the history.
    pub last_success: Option<DateTime<Utc>>,
    /// Its next fire passed by more than the grace without a run, and it is not paused.
    pub missed: bool,
    /// Trigger requests not yet claimed.
    pub pending_triggers: usize,
}

/// Everything `lockctl status` and `instances` show, read in a few queries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterView {
    /// The database's clock when read.
    pub database_now: DateTime<Utc>,
    /// Every instance in the registry, alive or gone.
    pub instances: Vec<InstanceView>,
    /// Every registered or paused job, by name.
    pub jobs: Vec<JobView>,
}

/// The error of an operation on a provider without operations tables.
pub(crate) fn no_operations(provider: &dyn ClusterProvider) -> LockError {
    LockError::InvalidConfiguration(format!(
        "{} has no operations tables (job registry, run history, pause, trigger): this \
         provider does not keep them",
        provider.describe()
    ))
}

fn alive(info: &InstanceInfo, last: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    let window = TimeDelta::milliseconds(info.heartbeat_ms.max(1) * GONE_AFTER_HEARTBEATS);
    now - last <= window
}

impl ClusterView {
    /// Reads the registry, the control table, the last runs and the lock table, and puts
    /// them together at the database's now.
    ///
    /// Fails with [`LockError::InvalidConfiguration`] when the provider keeps no operations
    /// tables, and with the provider's error when they cannot be read.
    pub async fn read(
        provider: &dyn ClusterProvider,
        options: &ClusterOptions,
    ) -> Result<Self, LockError> {
        let store = provider.cluster().ok_or_else(|| no_operations(provider))?;
        let now = provider.database_time().await?;
        let registry = store.registry().await?;
        let control = store.control().await?;
        let last_runs = store.last_runs().await?;
        let successes = store.last_successes().await?;
        let locks = provider.list_locks().await?;
        Ok(Self::assemble(
            now, registry, control, last_runs, successes, locks, options,
        ))
    }

    /// The newest `limit` runs of `job`, newest first, a `running` run of a gone instance
    /// shown as [`RunState::Unfinished`].
    pub async fn history(
        provider: &dyn ClusterProvider,
        job: &str,
        limit: u32,
    ) -> Result<Vec<RunView>, LockError> {
        let store = provider.cluster().ok_or_else(|| no_operations(provider))?;
        let now = provider.database_time().await?;
        let registry = store.registry().await?;
        let runs = store.history(job, limit).await?;
        let instances = instances(&registry, now);
        Ok(runs
            .into_iter()
            .map(|run| resolve(run, &instances))
            .collect())
    }

    /// `runs` as this view shows them: a `running` run whose instance is not alive becomes
    /// [`RunState::Unfinished`]. For runs read apart from the view, such as a page of
    /// [`OperatorStore::history_page`](crate::OperatorStore::history_page).
    pub fn resolve_runs(&self, runs: Vec<RunRecord>) -> Vec<RunView> {
        runs.into_iter()
            .map(|run| resolve(run, &self.instances))
            .collect()
    }

    /// Puts the rows together (see [`read`](Self::read)).
    pub fn assemble(
        now: DateTime<Utc>,
        registry: Vec<RegistryRow>,
        control: Vec<ControlRequest>,
        last_runs: Vec<RunRecord>,
        successes: Vec<(String, DateTime<Utc>)>,
        locks: Vec<LockRecord>,
        options: &ClusterOptions,
    ) -> Self {
        let instances = instances(&registry, now);
        let grace = TimeDelta::from_std(options.missed_grace).unwrap_or(TimeDelta::MAX);
        // Every job row is current: a heartbeat rewrites a job row when its registration
        // changed (a next fire that the job reached and moved on from within the last 10 s
        // is not a change), and a complete one deletes the rows of jobs the instance no
        // longer runs. A job row is live when its instance's own row is.
        let alive_by_id: HashMap<&str, bool> = instances
            .iter()
            .map(|i| (i.info.instance_id.as_str(), i.alive))
            .collect();
        let mut by_job: BTreeMap<String, Vec<(&RegistryRow, bool)>> = BTreeMap::new();
        for row in &registry {
            let Some(job) = &row.job else { continue };
            let live = alive_by_id
                .get(row.instance.instance_id.as_str())
                .copied()
                .unwrap_or(false);
            by_job
                .entry(job.name.clone())
                .or_default()
                .push((row, live));
        }
        for request in &control {
            by_job.entry(request.job.clone()).or_default();
        }
        // A sharded job's runs are kept per shard, under `<job>#<index>`: each run is filed
        // under its own name and, for a shard, its job's, so that a job finds its newest run
        // in one lookup (a page of 1,000 jobs would otherwise compare every pair).
        let mut newest: HashMap<&str, &RunRecord> = HashMap::new();
        for run in &last_runs {
            for name in own_and_sharded(&run.job) {
                let entry = newest.entry(name).or_insert(run);
                if run.id > entry.id {
                    *entry = run;
                }
            }
        }
        // The same for the lock rows: a sharded job's slots are in its shards' rows, and the
        // latest one's counts.
        let mut latest_lock: HashMap<&str, &LockRecord> = HashMap::new();
        for lock in &locks {
            for name in own_and_sharded(&lock.name) {
                let entry = latest_lock.entry(name).or_insert(lock);
                if (lock.last_fire, lock.locked_at) > (entry.last_fire, entry.locked_at) {
                    *entry = lock;
                }
            }
        }
        let succeeded: HashMap<&str, DateTime<Utc>> = successes
            .iter()
            .map(|(job, at)| (job.as_str(), *at))
            .collect();
        let jobs = by_job
            .into_iter()
            .map(|(name, rows)| {
                let latest = rows
                    .iter()
                    .max_by_key(|(row, _)| row.heartbeat_at)
                    .and_then(|(row, _)| row.job.as_ref());
                let live: Vec<&RegistryRow> = rows
                    .iter()
                    .filter(|(_, live)| *live)
                    .map(|(row, _)| *row)
                    .collect();
                // The next fire and the one after it, of the row that fires first.
                let fires = if live.is_empty() {
                    latest.map(|job| (job.next_fire, job.following_fire))
                } else {
                    live.iter()
                        .filter_map(|row| row.job.as_ref())
                        .filter(|job| job.next_fire.is_some())
                        .min_by_key(|job| job.next_fire)
                        .map(|job| (job.next_fire, job.following_fire))
                };
                let (next_fire, following_fire) = fires.unwrap_or((None, None));
                let paused = control
                    .iter()
                    .any(|c| c.job == name && c.kind == ControlKind::Pause);
                let pending_triggers = control
                    .iter()
                    .filter(|c| {
                        c.job == name && c.kind == ControlKind::Trigger && c.claimed_by.is_none()
                    })
                    .count();
                let last_run = newest
                    .get(name.as_str())
                    .map(|run| resolve((*run).clone(), &instances));
                let last_success = succeeded.get(name.as_str()).copied();
                let lock_name = latest.map(|job| job.lock_name.clone());
                let lock = lock_name
                    .as_deref()
                    .and_then(|lock| latest_lock.get(lock).copied());
                // A slot that ran is in `last_fire` (and a run's slot); a fire without a slot
                // (fixed delay, or a ShedLock table without `last_fire`) is judged by when the
                // lock was taken, with a quarter second for the estimate of its planned time.
                let ran_since = |at: DateTime<Utc>| {
                    let near = at - TimeDelta::milliseconds(250);
                    let by_lock = lock.is_some_and(|l| match l.last_fire {
                        Some(fired) => fired >= at,
                        None => l.locked_at >= near,
                    });
                    let by_history = last_run.as_ref().is_some_and(|r| match r.slot {
                        Some(slot) => slot >= at,
                        None => r.started_at >= near,
                    });
                    by_lock || by_history
                };
                // A registered next fire that already ran is followed by the one after it:
                // with no instance alive, it may have run just before they all stopped, and
                // then the one after it is what should have run; with instances alive, the
                // row was not rewritten when the job fired and moved on (a heartbeat rewrites
                // such a row only once its next fire is 10 s old, `REWRITE_PASSED_AFTER` in
                // the scheduler). When that one ran too (a job due every few seconds whose
                // row is that old), the next is estimated as one such interval after the
                // last fire that ran: such schedules are regular.
                let next_fire = match (next_fire, following_fire) {
                    (Some(at), Some(following)) if ran_since(at) && ran_since(following) => {
                        let last = [
                            lock.map(|l| l.last_fire.unwrap_or(l.locked_at)),
                            last_run.as_ref().map(|r| r.slot.unwrap_or(r.started_at)),
                        ]
                        .into_iter()
                        .flatten()
                        .max()
                        .unwrap_or(following);
                        last.checked_add_signed(following - at)
                    }
                    (Some(at), following) if ran_since(at) => following.or(Some(at)),
                    (next, _) => next,
                };
                let missed = !paused
                    && next_fire.is_some_and(|at| {
                        at.checked_add_signed(grace).is_some_and(|due| now > due) && !ran_since(at)
                    });
                let mut live_instances: Vec<String> = live
                    .iter()
                    .map(|row| row.instance.instance_id.clone())
                    .collect();
                live_instances.sort();
                JobView {
                    name,
                    lock_name,
                    trigger: latest.map(|job| job.trigger.clone()),
                    zone: latest.and_then(|job| job.zone.clone()),
                    next_fire,
                    paused,
                    live_instances,
                    last_run,
                    last_success,
                    missed,
                    pending_triggers,
                }
            })
            .collect();
        ClusterView {
            database_now: now,
            instances,
            jobs,
        }
    }
}

/// The names a run or lock row of `name` counts for: its own and, for a shard's
/// (`<base>#<index>`), its job's: every `base` for which `is_or_shard_of(name, base)`.
fn own_and_sharded(name: &str) -> impl Iterator<Item = &str> {
    let base = name.rfind('#').and_then(|at| {
        name[at + 1..]
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| &name[..at])
    });
    std::iter::once(name).chain(base)
}

/// Whether `name` is `base` or one of its shards' names (`<base>#<index>`).
#[cfg(test)]
fn is_or_shard_of(name: &str, base: &str) -> bool {
    name.strip_prefix(base).is_some_and(|rest| {
        rest.is_empty()
            || rest
                .strip_prefix('#')
                .is_some_and(|i| i.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// The instances of the registry (their own rows), with their jobs' names.
fn instances(registry: &[RegistryRow], now: DateTime<Utc>) -> Vec<InstanceView> {
    let mut instances: Vec<InstanceView> = registry
        .iter()
        .filter(|row| row.job.is_none())
        .map(|row| InstanceView {
            info: row.instance.clone(),
            last_heartbeat: row.heartbeat_at,
            alive: alive(&row.instance, row.heartbeat_at, now),
            jobs: Vec::new(),
        })
        .collect();
    instances.sort_by(|a, b| a.info.instance_id.cmp(&b.info.instance_id));
    for row in registry {
        if let Some(job) = &row.job
            && let Ok(at) = instances
                .binary_search_by(|i| i.info.instance_id.as_str().cmp(&row.instance.instance_id))
        {
            instances[at].jobs.push(job.name.clone());
        }
    }
    instances
}

fn resolve(mut run: RunRecord, instances: &[InstanceView]) -> RunView {
    if run.outcome == RunState::Running
        && !instances
            .iter()
            .any(|i| i.info.instance_id == run.instance_id && i.alive)
    {
        run.outcome = RunState::Unfinished;
    }
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::JobRegistration;
    use lock_core::FireKind;

    fn at(seconds: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + seconds, 0).unwrap()
    }

    fn info(id: &str) -> InstanceInfo {
        InstanceInfo {
            instance_id: id.into(),
            host: "h".into(),
            pid: 1,
            version: "0".into(),
            started_at: at(0),
            clock_offset_ms: 0,
            heartbeat_ms: 1000,
        }
    }

    fn rows(id: &str, beat: i64, next_fire: i64) -> [RegistryRow; 2] {
        [
            RegistryRow {
                instance: info(id),
                heartbeat_at: at(beat),
                job: None,
            },
            RegistryRow {
                instance: info(id),
                heartbeat_at: at(beat),
                job: Some(JobRegistration {
                    name: "daily".into(),
                    lock_name: "daily".into(),
                    trigger: "cron".into(),
                    zone: None,
                    next_fire: Some(at(next_fire)),
                    following_fire: Some(at(next_fire + 10)),
                }),
            },
        ]
    }

    fn running(instance: &str) -> RunRecord {
        RunRecord {
            id: 1,
            job: "daily".into(),
            slot: None,
            fire_kind: FireKind::Scheduled,
            instance_id: instance.into(),
            fence: 1,
            started_at: at(5),
            ended_at: None,
            outcome: RunState::Running,
            error: None,
            attempt: 1,
            cancel_requested: false,
            params: Default::default(),
        }
    }

    #[test]
    fn a_sharded_jobs_runs_and_locks_are_its_shards() {
        assert!(is_or_shard_of("daily", "daily"));
        assert!(is_or_shard_of("daily#3", "daily"));
        assert!(!is_or_shard_of("daily#x", "daily"));
        assert!(!is_or_shard_of("daily_2", "daily"));
        assert!(!is_or_shard_of("dail", "daily"));
        // What `assemble` files rows under agrees with it.
        for name in ["daily", "daily#3", "daily#", "daily#x", "daily_2", "a#1#2"] {
            for base in own_and_sharded(name) {
                assert!(is_or_shard_of(name, base), "{name} under {base}");
            }
        }
        assert_eq!(
            own_and_sharded("a#1#2").collect::<Vec<_>>(),
            ["a#1#2", "a#1"]
        );
        // The newest shard run is the job's last run; a shard's lock row says the slot ran.
        let registry: Vec<RegistryRow> = rows("a", 10, 20).into_iter().collect();
        let mut run = running("a");
        run.job = "daily#1".into();
        let lock = LockRecord {
            name: "daily#2".into(),
            lock_until: at(21),
            locked_at: at(20),
            locked_by: "a".into(),
            fence: 3,
            last_fire: Some(at(20)),
            held: false,
        };
        let options = ClusterOptions {
            missed_grace: Duration::from_secs(3),
        };
        let view = ClusterView::assemble(
            at(24),
            registry,
            vec![],
            vec![run],
            vec![],
            vec![lock],
            &options,
        );
        assert_eq!(view.jobs[0].last_run.as_ref().unwrap().job, "daily#1");
        assert!(!view.jobs[0].missed);
    }

    #[test]
    fn instances_gone_and_a_missed_fire() {
        let registry: Vec<RegistryRow> = rows("a", 10, 20)
            .into_iter()
            .chain(rows("b", 10, 20))
            .collect();
        let options = ClusterOptions {
            missed_grace: Duration::from_secs(3),
        };
        // Both alive at 12: nothing missed, the run of `a` still running.
        let view = ClusterView::assemble(
            at(12),
            registry.clone(),
            vec![],
            vec![running("a")],
            vec![],
            vec![],
            &options,
        );
        assert!(view.instances.iter().all(|i| i.alive));
        assert_eq!(view.jobs[0].live_instances, ["a", "b"]);
        assert_eq!(view.jobs[0].next_fire, Some(at(20)));
        assert!(!view.jobs[0].missed);
        assert_eq!(
            view.jobs[0].last_run.as_ref().unwrap().outcome,
            RunState::Running
        );
        // At 30 both are gone (silent 20 s > 5 heartbeats), the fire at 20 passed by more than
        // the grace without a run: missed, and the run of `a` unfinished.
        let view = ClusterView::assemble(
            at(30),
            registry.clone(),
            vec![],
            vec![running("a")],
            vec![],
            vec![],
            &options,
        );
        assert!(view.instances.iter().all(|i| !i.alive));
        assert!(view.jobs[0].live_instances.is_empty());
        assert!(view.jobs[0].missed);
        assert_eq!(
            view.jobs[0].last_run.as_ref().unwrap().outcome,
            RunState::Unfinished
        );
        // Paused: never missed.
        let pause = ControlRequest {
            id: 1,
            job: "daily".into(),
            kind: ControlKind::Pause,
            requested_at: at(1),
            requested_by: "op".into(),
            claimed_by: None,
            claimed_at: None,
            slot: None,
            params: Default::default(),
        };
        let view = ClusterView::assemble(
            at(30),
            registry,
            vec![pause],
            vec![],
            vec![],
            vec![],
            &options,
        );
        assert!(view.jobs[0].paused && !view.jobs[0].missed);
    }

    #[test]
    fn a_job_row_older_than_its_instances_last_heartbeat_is_current() {
        // The job row was written at 3 (its registration last changed then); the instance
        // beat at 10 without it: the job is still the instance's, and live.
        let [own, mut job] = rows("a", 10, 20);
        job.heartbeat_at = at(3);
        let view = ClusterView::assemble(
            at(11),
            vec![own, job],
            vec![],
            vec![],
            vec![],
            vec![],
            &ClusterOptions::default(),
        );
        assert_eq!(view.instances[0].jobs, ["daily"]);
        assert_eq!(view.jobs[0].live_instances, ["a"]);
        assert_eq!(view.jobs[0].next_fire, Some(at(20)));
    }

    #[test]
    fn a_next_fire_that_ran_before_every_instance_died_moves_to_the_following_one() {
        let registry: Vec<RegistryRow> = rows("a", 10, 20).into_iter().collect();
        let options = ClusterOptions {
            missed_grace: Duration::from_secs(3),
        };
        // The fire at 20 ran (its slot is the lock's last fire); the instance died after it.
        let lock = LockRecord {
            name: "daily".into(),
            lock_until: at(21),
            locked_at: at(20),
            locked_by: "a".into(),
            fence: 3,
            last_fire: Some(at(20)),
            held: false,
        };
        let view = ClusterView::assemble(
            at(31),
            registry.clone(),
            vec![],
            vec![],
            vec![],
            vec![lock.clone()],
            &options,
        );
        // The following fire (30) is the one to judge: not yet past its grace at 31 ...
        assert_eq!(view.jobs[0].next_fire, Some(at(30)));
        assert!(!view.jobs[0].missed);
        // ... and missed at 34.
        let view = ClusterView::assemble(
            at(34),
            registry,
            vec![],
            vec![],
            vec![],
            vec![lock],
            &options,
        );
        assert!(view.jobs[0].missed);
    }

    #[test]
    fn a_live_jobs_next_fire_that_ran_shows_the_following_one() {
        // The row still says 20 (a heartbeat does not rewrite a row whose next fire the job
        // reached and moved on from); the lock says which fire ran last.
        let [mut own, job] = rows("a", 10, 20);
        own.heartbeat_at = at(33);
        let options = ClusterOptions {
            missed_grace: Duration::from_secs(3),
        };
        let ran = |last: i64| LockRecord {
            name: "daily".into(),
            lock_until: at(last + 1),
            locked_at: at(last),
            locked_by: "a".into(),
            fence: 3,
            last_fire: Some(at(last)),
            held: false,
        };
        let assemble = |now, lock: LockRecord| {
            ClusterView::assemble(
                at(now),
                vec![own.clone(), job.clone()],
                vec![],
                vec![],
                vec![],
                vec![lock],
                &options,
            )
        };
        // The fire at 20 ran: the following one (30) is next.
        let view = assemble(22, ran(20));
        assert_eq!(view.jobs[0].live_instances, ["a"]);
        assert_eq!(view.jobs[0].next_fire, Some(at(30)));
        assert!(!view.jobs[0].missed);
        // The instance is alive but the fire at 30 did not run: missed once past the grace.
        let view = assemble(34, ran(20));
        assert_eq!(view.jobs[0].live_instances, ["a"]);
        assert!(view.jobs[0].missed);
        // The fires at 30 and 40 ran too (the row is older than its job's next two fires):
        // the next is one interval after the last that ran, and missed once past its grace.
        let view = assemble(42, ran(40));
        assert_eq!(view.jobs[0].next_fire, Some(at(50)));
        assert!(!view.jobs[0].missed);
        assert!(assemble(54, ran(40)).jobs[0].missed);
    }
}
