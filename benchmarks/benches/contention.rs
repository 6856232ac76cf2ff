//! Contention on PostgreSQL: N instances (OS processes) running the same every-second jobs.
//!
//! `cargo bench -p benchmarks --bench contention` runs 1, 2, 4 and 8 instances with 10, 50 and
//! 100 jobs each, 20 s per configuration (one instance is the floor: the same fires without
//! contention); without `--bench` (as under `cargo test`) a smoke pass of 2 instances, 10 jobs,
//! 3 s. Needs `LOCK_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`); when the server is unreachable the bench fails
//! if `CI` is set and prints `SKIPPED` otherwise.
//!
//! Each instance is this binary re-executed as a child process (`--contention-child ...`)
//! running a `Scheduler` on its own `PostgresLockProvider` (deadpool's default pool size), with
//! the same job names and `cron = "* * * * * *"`, so every second all N instances try every job
//! at the same instant and exactly one per job wins. The provider is wrapped in a decorator
//! that times each `acquire` (pool checkout + round trip, as the scheduler sees it). Each child
//! reports every acquire (slot, latency, outcome) and every slot whose body it ran; the parent
//! counts attempts and grants per second in the measured window, the latency distribution, how
//! long each second's burst took to drain, and duplicates: a (job, slot) run by more than one
//! instance, which must never happen.

use std::collections::{BTreeMap, HashMap};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use benchmarks::process::{sleep_until_wall, thread_cpu_between};
use benchmarks::stats::verdict;
use benchmarks::{Mode, Samples, Unit};
use chrono::{DateTime, TimeDelta, Utc};
use lock_core::{
    AcquireOutcome, JobContext, Lease, LockError, LockProvider, LockRecord, LockRequest,
};
use lock_provider_postgres::PostgresLockProvider;
use lock_provider_postgres::deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use lock_provider_postgres::tokio_postgres::{self, NoTls};
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::process::expect_success;

const CHILD_FLAG: &str = "--contention-child";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Some(at) = args.iter().position(|a| a == CHILD_FLAG) {
        let child = ChildArgs::parse(&args[at + 1..]);
        runtime.block_on(child.run());
        return;
    }
    runtime.block_on(parent(Mode::from_args()));
}

/// One configuration: how many instances, how many jobs, for how long.
#[derive(Clone, Copy, Debug)]
struct Config {
    instances: usize,
    jobs: usize,
    secs: u64,
    /// Connections per instance; `None`: `PostgresLockProvider::connect`'s default pool.
    pool: Option<usize>,
}

async fn parent(mode: Mode) {
    let table = format!("bench_contention_{}", std::process::id());
    let Some(provider) = benchmarks::postgres::connect_or_skip(&table).await else {
        return;
    };
    provider.ensure_schema().await.expect("ensure_schema");
    let configs: Vec<Config> = match mode {
        Mode::Full => [10, 50, 100]
            .into_iter()
            .flat_map(|jobs| {
                [1, 2, 4, 8].map(|instances| Config {
                    instances,
                    jobs,
                    secs: 20,
                    pool: None,
                })
            })
            // A larger pool for the largest bursts: shows how much of the latency is waiting
            // for a connection rather than the database (4 x 16 stays under max_connections).
            .chain([1, 4].map(|instances| Config {
                instances,
                jobs: 100,
                secs: 20,
                pool: Some(16),
            }))
            .collect(),
        Mode::Smoke => vec![Config {
            instances: 2,
            jobs: 10,
            secs: 3,
            pool: None,
        }],
    };
    let default_pool = provider.pool().status().max_size;
    let mut results = Vec::new();
    for config in &configs {
        results.push(run_config(&table, *config));
    }
    provider
        .pool()
        .get()
        .await
        .expect("a connection")
        .batch_execute(&format!("DROP TABLE IF EXISTS {table}"))
        .await
        .expect("drop the bench table");

    println!(
        "contention ({} run): PostgreSQL at {}, every instance a separate process with the same \
         every-second jobs and a pool of up to {} connections, acquire timed around the provider \
         (pool checkout + round trip)",
        mode.name(),
        benchmarks::postgres::redact(&benchmarks::postgres::url()),
        default_pool
    );
    println!(
        "  {:>4} {:>5} {:>4} {:>4}  {:>10} {:>9} {:>6}  {:>9} {:>9} {:>9} {:>9}  {:>10} {:>10}  {:>9}  {:>4} {:>6}",
        "inst",
        "jobs",
        "pool",
        "s",
        "attempts/s",
        "grants/s",
        "errors",
        "acq mean",
        "acq p50",
        "acq p99",
        "acq max",
        "drain p50",
        "drain max",
        "CPU/inst",
        "dups",
        "missed"
    );
    for r in &results {
        println!(
            "  {:>4} {:>5} {:>4} {:>4}  {:>10.1} {:>9.1} {:>6}  {:>9.3} {:>9.3} {:>9.3} {:>9.3}  {:>10.2} {:>10.2}  {:>8.2}%  {:>4} {:>6}",
            r.config.instances,
            r.config.jobs,
            r.config.pool.unwrap_or(default_pool),
            r.config.secs,
            r.attempts as f64 / r.config.secs as f64,
            r.grants as f64 / r.config.secs as f64,
            r.errors,
            r.latency.mean_in(Unit::Millis),
            r.latency.percentile_in(0.50, Unit::Millis),
            r.latency.percentile_in(0.99, Unit::Millis),
            r.latency.max() / 1e6,
            r.drain.percentile_in(0.50, Unit::Millis),
            r.drain.max() / 1e6,
            r.cpu_percent_per_instance,
            r.duplicates,
            r.missed
        );
    }
    println!(
        "  (times in ms; drain = per second, from the slot to the last acquire answered; CPU/inst \
         = mean on-CPU time of one instance over the window, % of one core; missed = (job, slot) \
         pairs in the window that no instance ran)"
    );
    // Growth: against the fewest instances with the same job count.
    for r in &results {
        if let Some(base) = results
            .iter()
            .filter(|b| b.config.jobs == r.config.jobs && b.config.pool == r.config.pool)
            .min_by_key(|b| b.config.instances)
            && base.config.instances != r.config.instances
        {
            println!(
                "growth {} -> {} instances, {} jobs, pool {}: attempts/s x{:.2}, acquire p99 x{:.2}, \
                 mean x{:.2}, drain max x{:.2}",
                base.config.instances,
                r.config.instances,
                r.config.jobs,
                r.config.pool.unwrap_or(default_pool),
                r.attempts as f64 / base.attempts as f64,
                r.latency.percentile(0.99) / base.latency.percentile(0.99),
                r.latency.mean() / base.latency.mean(),
                r.drain.max() / base.drain.max(),
            );
        }
    }
    // And against the fewest jobs with the same instance count.
    for r in &results {
        if let Some(base) = results
            .iter()
            .filter(|b| b.config.instances == r.config.instances && b.config.pool.is_none())
            .min_by_key(|b| b.config.jobs)
            && base.config.jobs != r.config.jobs
            && r.config.pool.is_none()
        {
            println!(
                "growth {} -> {} jobs, {} instances: attempts/s x{:.2}, acquire p99 x{:.2}, \
                 mean x{:.2}, drain max x{:.2}, CPU per instance x{:.2}",
                base.config.jobs,
                r.config.jobs,
                r.config.instances,
                r.attempts as f64 / base.attempts as f64,
                r.latency.percentile(0.99) / base.latency.percentile(0.99),
                r.latency.mean() / base.latency.mean(),
                r.drain.max() / base.drain.max(),
                r.cpu_percent_per_instance / base.cpu_percent_per_instance,
            );
        }
    }
    // The same burst with more connections per instance.
    for r in results.iter().filter(|r| r.config.pool.is_some()) {
        if let Some(base) = results.iter().find(|b| {
            b.config.pool.is_none()
                && b.config.instances == r.config.instances
                && b.config.jobs == r.config.jobs
        }) {
            println!(
                "pool {} -> {} connections, {} instances, {} jobs: acquire p99 x{:.2}, mean x{:.2}, \
                 drain max x{:.2}",
                default_pool,
                r.config.pool.unwrap_or(default_pool),
                r.config.instances,
                r.config.jobs,
                r.latency.percentile(0.99) / base.latency.percentile(0.99),
                r.latency.mean() / base.latency.mean(),
                r.drain.max() / base.drain.max(),
            );
        }
    }
    let duplicates: usize = results.iter().map(|r| r.duplicates).sum();
    println!(
        "target: duplicates = 0: {duplicates}, {}",
        verdict(duplicates == 0, true)
    );
    assert_eq!(duplicates, 0, "a slot ran on more than one instance");
    let errors: usize = results.iter().map(|r| r.errors).sum();
    assert!(
        errors == 0 || mode.judged(),
        "{errors} acquires failed in the smoke run"
    );
}

/// What one configuration measured.
struct Outcome {
    config: Config,
    attempts: usize,
    grants: usize,
    errors: usize,
    latency: Samples,
    drain: Samples,
    cpu_percent_per_instance: f64,
    duplicates: usize,
    missed: usize,
}

fn run_config(table: &str, config: Config) -> Outcome {
    // Job names unique per configuration, so configurations never see each other's rows.
    let label = format!(
        "n{}j{}p{}",
        config.instances,
        config.jobs,
        config.pool.unwrap_or(0)
    );
    // Whole seconds, far enough ahead for every child to connect and start.
    let from = (Utc::now().timestamp_millis() / 1000 + 4) * 1000;
    let until = from + config.secs as i64 * 1000;
    let exe = std::env::current_exe().expect("own executable");
    let children: Vec<_> = (0..config.instances)
        .map(|index| {
            Command::new(&exe)
                .args([
                    CHILD_FLAG,
                    table,
                    &config.jobs.to_string(),
                    &from.to_string(),
                    &until.to_string(),
                    &label,
                    &index.to_string(),
                    &config.pool.unwrap_or(0).to_string(),
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn an instance")
        })
        .collect();

    let mut latency = Samples::new("acquire");
    let mut drain_by_slot = BTreeMap::<i64, f64>::new();
    let mut runs = HashMap::<(usize, i64), usize>::new();
    let (mut attempts, mut grants, mut errors) = (0, 0, 0);
    let mut cpu_ms = 0.0;
    for child in children {
        let out = child.wait_with_output().expect("instance output");
        let stdout = expect_success(&out, "an instance");
        for line in stdout.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["A", slot, latency_us, outcome, done_us] => {
                    let slot: i64 = slot.parse().expect("slot");
                    if !(from..until).contains(&slot) {
                        continue;
                    }
                    attempts += 1;
                    match *outcome {
                        "G" => grants += 1,
                        "E" => errors += 1,
                        _ => {}
                    }
                    latency.push_nanos(latency_us.parse::<f64>().expect("latency") * 1e3);
                    let done = done_us.parse::<f64>().expect("done") * 1e3;
                    let last = drain_by_slot.entry(slot).or_insert(done);
                    *last = last.max(done);
                }
                ["R", job, slot] => {
                    let key = (job.parse().expect("job"), slot.parse().expect("slot"));
                    *runs.entry(key).or_default() += 1;
                }
                ["U", ms] => cpu_ms += ms.parse::<f64>().expect("cpu ms"),
                _ => {}
            }
        }
    }
    let mut drain = Samples::new("drain");
    for done in drain_by_slot.values() {
        drain.push_nanos(*done);
    }
    let duplicates = runs.values().filter(|&&n| n > 1).count();
    let ran_in_window = runs
        .keys()
        .filter(|(_, slot)| (from..until).contains(slot))
        .count();
    Outcome {
        config,
        attempts,
        grants,
        errors,
        latency,
        drain,
        cpu_percent_per_instance: cpu_ms / config.instances as f64 / (config.secs as f64 * 1e3)
            * 100.0,
        duplicates,
        missed: (config.jobs * config.secs as usize).saturating_sub(ran_in_window),
    }
}

/// One acquire as the decorator saw it.
struct Attempt {
    slot_ms: i64,
    latency: Duration,
    outcome: char,
    /// When the answer came, after the slot.
    done_after_slot: TimeDelta,
}

/// A provider that times every `acquire` of the provider it wraps.
struct TimedProvider {
    inner: PostgresLockProvider,
    attempts: Arc<Mutex<Vec<Attempt>>>,
}

// No cluster tables: the scheduler runs without registry or history, as before.
impl lock_cluster::ClusterProvider for TimedProvider {}

#[async_trait]
impl LockProvider for TimedProvider {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        let started = Instant::now();
        let result = self.inner.acquire(request).await;
        let latency = started.elapsed();
        if let Some(slot) = request.slot {
            let outcome = match &result {
                Ok(AcquireOutcome::Acquired(_)) => 'G',
                Ok(AcquireOutcome::Refused(_)) => 'R',
                Err(_) => 'E',
            };
            self.attempts.lock().unwrap().push(Attempt {
                slot_ms: slot.unix_millis(),
                latency,
                outcome,
                done_after_slot: Utc::now() - slot.instant(),
            });
        }
        result
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        self.inner.extend(lease, lock_at_most_for).await
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        self.inner.release(lease, lock_at_least_for).await
    }

    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.inner.list_locks().await
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner.force_unlock(name).await
    }

    // The scheduler fires by this clock: the wrapped database's, not the host's default.
    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        self.inner.database_time().await
    }

    fn describe(&self) -> String {
        format!("timed {}", self.inner.describe())
    }
}

/// What a child instance is told.
struct ChildArgs {
    table: String,
    jobs: usize,
    from_ms: i64,
    until_ms: i64,
    label: String,
    index: usize,
    /// 0: the default pool of `PostgresLockProvider::connect`.
    pool: usize,
}

impl ChildArgs {
    fn parse(args: &[String]) -> Self {
        ChildArgs {
            table: args[0].clone(),
            jobs: args[1].parse().expect("jobs"),
            from_ms: args[2].parse().expect("from"),
            until_ms: args[3].parse().expect("until"),
            label: args[4].clone(),
            index: args[5].parse().expect("index"),
            pool: args[6].parse().expect("pool"),
        }
    }

    async fn run(self) {
        let url = benchmarks::postgres::url();
        let provider = if self.pool == 0 {
            PostgresLockProvider::connect(&url)
                .await
                .expect("an instance connects")
        } else {
            // As `connect` builds it, with another size.
            let config: tokio_postgres::Config = url.parse().expect("LOCK_TEST_POSTGRES_URL");
            let manager = Manager::from_config(
                config,
                NoTls,
                ManagerConfig {
                    recycling_method: RecyclingMethod::Fast,
                },
            );
            let pool = Pool::builder(manager)
                .max_size(self.pool)
                .build()
                .expect("pool");
            PostgresLockProvider::new(pool)
        }
        .with_table(&self.table)
        .expect("table");
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let runs = Arc::new(Mutex::new(Vec::<(usize, i64)>::new()));
        let jobs = (0..self.jobs).map(|job| {
            let runs = runs.clone();
            Job::new(
                format!("{}-{job:03}", self.label),
                Trigger::cron("* * * * * *").expect("cron"),
                move || {
                    let runs = runs.clone();
                    async move {
                        let slot = JobContext::current()
                            .and_then(|ctx| ctx.scheduled_at())
                            .expect("a slotted fire");
                        runs.lock().unwrap().push((job, slot.timestamp_millis()));
                    }
                },
            )
        });
        let scheduler = Scheduler::builder()
            .lock_provider(TimedProvider {
                inner: provider,
                attempts: attempts.clone(),
            })
            .instance_id(format!(
                "{}-i{}-{}",
                self.label,
                self.index,
                std::process::id()
            ))
            .jobs(jobs)
            .start()
            .await
            .expect("start the scheduler");

        let from = wall(self.from_ms);
        let until = wall(self.until_ms);
        // CPU over the window, from half a second before its first burst.
        let half = TimeDelta::milliseconds(500);
        let cpu = thread_cpu_between(from - half, until - half).await;
        // Let the last second's burst finish everywhere, then stop.
        sleep_until_wall(until + TimeDelta::milliseconds(1500)).await;
        scheduler.shutdown().await.expect("shutdown");

        let mut out = String::new();
        for a in attempts.lock().unwrap().iter() {
            out.push_str(&format!(
                "A {} {} {} {}\n",
                a.slot_ms,
                a.latency.as_micros(),
                a.outcome,
                a.done_after_slot.num_microseconds().unwrap_or(i64::MAX)
            ));
        }
        for (job, slot) in runs.lock().unwrap().iter() {
            out.push_str(&format!("R {job} {slot}\n"));
        }
        out.push_str(&format!("U {:.3}\n", cpu.as_secs_f64() * 1e3));
        print!("{out}");
    }
}

fn wall(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).expect("a valid instant")
}
