//! Sharded and broadcast jobs against the in-memory provider (which keeps the registry): every
//! (slot, shard) once across schedulers, the shard in the context, the start-time refusals.
//! The multi-process scenarios on PostgreSQL and MariaDB are `fault-tests/tests/shards_processes.rs`.

use lock_cluster::ClusterProvider;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_core::{
    AcquireOutcome, InMemoryLockProvider, JobContext, Lease, LockError, LockProvider, LockRecord,
    LockRequest,
};
use lock_scheduler::{Distribution, Job, RunOutcome, Scheduler, Trigger};

/// (slot, lock name, shard, instance) of every run.
type Runs = Arc<Mutex<Vec<(DateTime<Utc>, String, (u32, u32), String)>>>;

/// Per slot: (lock name, shard, instance) of each run.
type Slots = BTreeMap<DateTime<Utc>, Vec<(String, (u32, u32), String)>>;

fn recording(name: &str, runs: &Runs) -> Job {
    let runs = runs.clone();
    Job::new(
        name,
        Trigger::fixed_rate(Duration::from_millis(500)).unwrap(),
        move |ctx: JobContext| {
            let runs = runs.clone();
            async move {
                runs.lock().unwrap().push((
                    ctx.scheduled_at().expect("a slot"),
                    ctx.lock_name().to_owned(),
                    ctx.shard().expect("a shard"),
                    ctx.instance_id().to_owned(),
                ));
            }
        },
    )
}

async fn start(provider: &Arc<InMemoryLockProvider>, id: &str, job: Job) -> Scheduler {
    Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id(id)
        .heartbeat_interval(Duration::from_millis(100))
        .jobs([job])
        .start()
        .await
        .expect("start")
}

/// The runs by slot, for the slots after `from` whose runs are all in.
fn by_slot(runs: &Runs, from: DateTime<Utc>, to: DateTime<Utc>) -> Slots {
    let mut slots: BTreeMap<_, Vec<_>> = BTreeMap::new();
    for (slot, lock, shard, instance) in runs.lock().unwrap().iter() {
        if *slot >= from && *slot < to {
            slots
                .entry(*slot)
                .or_default()
                .push((lock.clone(), *shard, instance.clone()));
        }
    }
    slots
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shard_runs_once_per_slot_spread_over_the_instances() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs: Runs = Arc::default();
    let mut schedulers = Vec::new();
    for id in ["a", "b"] {
        schedulers.push(start(&provider, id, recording("bills", &runs).with_shards(3)).await);
    }
    // A few heartbeats: both see each other.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let from = Utc::now();
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let to = Utc::now() - chrono::TimeDelta::milliseconds(600);
    for scheduler in &schedulers {
        scheduler.shutdown().await.unwrap();
    }
    let slots = by_slot(&runs, from, to);
    assert!(slots.len() >= 3, "{slots:?}");
    let mut instances = BTreeSet::new();
    for (slot, runs) in &slots {
        let mut shards: Vec<(String, (u32, u32))> =
            runs.iter().map(|(l, s, _)| (l.clone(), *s)).collect();
        shards.sort();
        assert_eq!(
            shards,
            [
                ("bills#0".to_owned(), (0, 3)),
                ("bills#1".to_owned(), (1, 3)),
                ("bills#2".to_owned(), (2, 3))
            ],
            "slot {slot}: {runs:?}"
        );
        instances.extend(runs.iter().map(|(_, _, i)| i.clone()));
    }
    assert_eq!(instances.len(), 2, "both instances ran shards: {slots:?}");
    // Each shard has its own lock row, with the latest slot as its last fire.
    let locks: Vec<LockRecord> = provider.list_locks().await.unwrap();
    let names: BTreeSet<&str> = locks.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["bills#0", "bills#1", "bills#2"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broadcast_runs_once_per_instance_with_its_rank() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs: Runs = Arc::default();
    let mut schedulers = Vec::new();
    for id in ["a", "b", "c"] {
        schedulers.push(start(&provider, id, recording("evict", &runs).broadcast()).await);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let from = Utc::now();
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let to = Utc::now() - chrono::TimeDelta::milliseconds(600);
    // `b` stops gracefully: it leaves the registry, `a` and `c` are ranks 0 and 1 of 2.
    schedulers.remove(1).shutdown().await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let after = Utc::now();
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let end = Utc::now() - chrono::TimeDelta::milliseconds(600);
    for scheduler in &schedulers {
        scheduler.shutdown().await.unwrap();
    }
    let ranks = |slots: Slots| {
        assert!(slots.len() >= 2, "{slots:?}");
        slots
            .into_values()
            .map(|runs| {
                let mut ranks: Vec<(u32, u32, String)> =
                    runs.into_iter().map(|(_, (r, n), i)| (r, n, i)).collect();
                ranks.sort();
                ranks
            })
            .collect::<BTreeSet<_>>()
    };
    let three = |r: u32, i: &str| (r, 3, i.to_owned());
    assert_eq!(
        ranks(by_slot(&runs, from, to)),
        BTreeSet::from([vec![three(0, "a"), three(1, "b"), three(2, "c")]])
    );
    let two = |r: u32, i: &str| (r, 2, i.to_owned());
    assert_eq!(
        ranks(by_slot(&runs, after, end)),
        BTreeSet::from([vec![two(0, "a"), two(1, "c")]])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_manual_run_of_a_sharded_job_runs_every_shard_here() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let job = {
        let seen = seen.clone();
        Job::new(
            "report",
            Trigger::cron("0 0 3 * * *").unwrap(),
            move |ctx: JobContext| {
                let seen = seen.clone();
                async move { seen.lock().unwrap().push(ctx.shard()) }
            },
        )
        .with_shards(2)
    };
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .jobs([job])
        .start()
        .await
        .unwrap();
    assert_eq!(
        scheduler.trigger("report").await.unwrap(),
        RunOutcome::Succeeded
    );
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, [Some((0, 2)), Some((1, 2))]);
    // Each shard's run is in the history under the shard's name, none under the job's.
    let store = provider.cluster().unwrap();
    for shard in ["report#0", "report#1"] {
        let runs = store.history(shard, 10).await.unwrap();
        assert_eq!(runs.len(), 1, "{shard}: {runs:?}");
        assert_eq!(runs[0].fire_kind, lock_core::FireKind::Manual);
    }
    assert!(store.history("report", 10).await.unwrap().is_empty());
    scheduler.shutdown().await.unwrap();
}

/// The in-memory provider without its operations tables.
struct NoRegistry(InMemoryLockProvider);

// No cluster tables: the scheduler runs without them.
impl lock_cluster::ClusterProvider for NoRegistry {}

#[async_trait]
impl LockProvider for NoRegistry {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        self.0.acquire(request).await
    }
    async fn extend(&self, lease: &Lease, at_most: Duration) -> Result<bool, LockError> {
        self.0.extend(lease, at_most).await
    }
    async fn release(&self, lease: &Lease, at_least: Duration) -> Result<bool, LockError> {
        self.0.release(lease, at_least).await
    }
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.0.list_locks().await
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.0.force_unlock(name).await
    }
    fn describe(&self) -> String {
        "in-memory without registry".into()
    }
}

#[tokio::test]
async fn start_refuses_what_cannot_be_spread() {
    let job = || Job::new("cache", Trigger::cron("* * * * * *").unwrap(), || async {});
    let refused = |jobs: Vec<Job>, provider: Arc<dyn ClusterProvider>| async move {
        Scheduler::builder()
            .lock_provider(provider)
            .jobs(jobs)
            .start()
            .await
            .unwrap_err()
            .to_string()
    };
    let memory = || -> Arc<dyn ClusterProvider> { Arc::new(InMemoryLockProvider::new()) };
    let error = refused(
        vec![job().broadcast()],
        Arc::new(NoRegistry(InMemoryLockProvider::new())),
    )
    .await;
    assert!(
        error.contains("broadcast job(s) `cache` need the cluster registry"),
        "{error}"
    );
    let error = refused(vec![job().with_shards(0)], memory()).await;
    assert!(error.contains("a job has from 1 to 1024 shards"), "{error}");
    let delayed = Job::new(
        "poll",
        Trigger::fixed_delay(Duration::from_secs(1)).unwrap(),
        || async {},
    );
    let error = refused(vec![delayed.with_shards(2)], memory()).await;
    assert!(
        error.contains("job `poll`: a job with 2 shards needs a cron or fixed-rate"),
        "{error}"
    );
    let long = Job::new(
        "x".repeat(63),
        Trigger::cron("* * * * * *").unwrap(),
        || async {},
    );
    let error = refused(vec![long.with_shards(4)], memory()).await;
    assert!(error.contains("may be at most 62 bytes"), "{error}");
    // Fixed shards without a registry: fine (ranks from a hash of the instance id).
    let scheduler = Scheduler::builder()
        .lock_provider(NoRegistry(InMemoryLockProvider::new()))
        .jobs([job().with_shards(4)])
        .start()
        .await
        .unwrap();
    assert_eq!(scheduler.jobs().len(), 1);
    assert_eq!(job().with_shards(4).distribution(), Distribution::Shards(4));
    scheduler.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_names_a_sharded_job_while_one_shard_still_runs() {
    // Shard 0 returns at once; shard 1 ignores cancellation and runs 5 s.
    let job = Job::new(
        "slow",
        Trigger::fixed_rate(Duration::from_millis(200)).unwrap(),
        |ctx: JobContext| async move {
            if ctx.shard() == Some((1, 2)) {
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        },
    )
    .with_shards(2);
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .shutdown_timeout(Duration::from_millis(300))
        .jobs([job])
        .start()
        .await
        .unwrap();
    // The first slot is at most 200 ms away; then shard 0 has ended and shard 1 runs.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(scheduler.jobs()[0].running);
    assert_eq!(scheduler.jobs()[0].trigger, "fixed rate 200ms, 2 shards");
    match scheduler.shutdown().await {
        Err(LockError::ShutdownTimedOut { running, .. }) => assert_eq!(running, ["slow"]),
        other => panic!("expected the sharded job named at the timeout, got {other:?}"),
    }
}

/// Shard `k` of a job `x` is locked as `x#k`; a job locked as `x#k` itself would share that
/// row, its lease and its last fire. `start()` refuses the pair, in either order, naming both;
/// a name no shard has (`x#2` beside two shards, `x#01`) is fine.
#[tokio::test]
async fn start_refuses_a_job_locked_under_another_jobs_shard() {
    let job = |name: &str| Job::new(name, Trigger::cron("* * * * * *").unwrap(), || async {});
    let start = |jobs: Vec<Job>| async move {
        Scheduler::builder()
            .lock_provider(InMemoryLockProvider::new())
            .no_history() // the jobs counted below are these alone
            .jobs(jobs)
            .start()
            .await
    };
    for jobs in [
        vec![job("cache").with_shards(2), job("cache#1")],
        vec![job("cache#0"), job("cache").with_shards(2)],
        vec![job("cache").broadcast(), job("cache#7")],
    ] {
        let error = start(jobs).await.expect_err("a shared row").to_string();
        assert!(error.contains("also the lock of shard"), "{error}");
        assert!(error.contains("job `cache`"), "{error}");
        assert!(error.contains("job `cache#"), "{error}");
    }
    let scheduler = start(vec![
        job("cache").with_shards(2),
        job("cache#2"),
        job("cache#01"),
    ])
    .await
    .expect("no shared row");
    assert_eq!(scheduler.jobs().len(), 3);
    // A job added later is held to the same rule, against the running ones.
    let error = scheduler
        .add_job(job("cache#0"))
        .await
        .expect_err("a shared row")
        .to_string();
    assert!(error.contains("job `cache#0`"), "{error}");
    assert!(error.contains("shard 0 of job `cache`"), "{error}");
    scheduler.add_job(job("cache#3")).await.expect("no shard 3");
    scheduler.shutdown().await.unwrap();
}
