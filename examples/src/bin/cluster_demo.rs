//! Several instances of one service sharing a schedule: each job runs once per slot.
//!
//! ```text
//! cargo run -p examples --bin cluster_demo                       # 3 instances, 10 s, SQLite
//! cargo run -p examples --bin cluster_demo -- --instances 5 --seconds 20
//! cargo run -p examples --bin cluster_demo -- --postgres postgres://postgres@127.0.0.1/test
//! cargo run -p examples --bin cluster_demo -- --mysql mysql://root@127.0.0.1:3306/test
//! cargo run -p examples --bin cluster_demo -- --redis redis://127.0.0.1:6379
//! ```
//!
//! The program starts N child processes of itself (the "instances"), each running the same
//! three annotated jobs with the same lock table, stops them gracefully with SIGTERM after the
//! given time, and prints per job: slots due while every instance was up, runs, runs per
//! instance, slots run twice and slots missed. It exits non-zero if any slot ran twice or a
//! due slot was missed.

use std::collections::{BTreeMap, HashMap};
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use scheduled_locks::cluster::ClusterProvider;
use scheduled_locks::mysql::MySqlLockProvider;
use scheduled_locks::postgres::PostgresLockProvider;
use scheduled_locks::redis::RedisLockProvider;
use scheduled_locks::sqlite::SqliteLockProvider;
use scheduled_locks::{JobContext, Scheduler, scheduled, scheduler_lock};
use tokio::io::{AsyncBufReadExt, BufReader};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

// The service's jobs. Every instance runs the same binary, so every instance has these.

/// Every second.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "every_second", lock_at_most_for = "5s")]
async fn every_second() {
    report("every_second");
}

/// Every 2 s, slots aligned to the Unix epoch so all instances agree on them.
#[scheduled(fixed_rate = "2s")]
#[scheduler_lock(name = "fixed_rate", lock_at_most_for = "10s")]
async fn fixed_rate() {
    report("fixed_rate");
}

/// Every 5 s, runs 3 s with a 2 s lease kept alive by extensions.
#[scheduled(cron = "*/5 * * * * *")]
#[scheduler_lock(name = "slow_report", lock_at_most_for = "2s", keep_alive = true)]
async fn slow_report() {
    report("slow_report");
    let ctx = JobContext::current().expect("inside a locked job");
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_secs(3)) => {}
        _ = ctx.cancelled() => tracing::warn!("slow_report: lock lost or shutting down"),
    }
}

/// One line per run on stdout, read by the parent.
fn report(job: &str) {
    let ctx = JobContext::current().expect("inside a locked job");
    let slot = ctx.scheduled_at().map_or(-1, |s| s.timestamp_millis());
    println!("RUN {job} {slot} {} {}", ctx.instance_id(), ctx.fence());
}

#[derive(Clone, Debug)]
enum Backend {
    Sqlite(String),
    Postgres(String),
    MySql(String),
    Redis(String),
}

impl Backend {
    fn args(&self) -> [&str; 2] {
        match self {
            Backend::Sqlite(path) => ["--sqlite", path],
            Backend::Postgres(url) => ["--postgres", url],
            Backend::MySql(url) => ["--mysql", url],
            Backend::Redis(url) => ["--redis", url],
        }
    }

    async fn provider(&self) -> Result<Arc<dyn ClusterProvider>, BoxError> {
        Ok(match self {
            Backend::Sqlite(path) => Arc::new(SqliteLockProvider::open(path)?),
            Backend::Postgres(url) => Arc::new(PostgresLockProvider::connect(url).await?),
            Backend::MySql(url) => Arc::new(MySqlLockProvider::connect(url).await?),
            Backend::Redis(url) => Arc::new(RedisLockProvider::connect(url).await?),
        })
    }

    async fn ensure_schema(&self) -> Result<(), BoxError> {
        match self {
            Backend::Sqlite(path) => SqliteLockProvider::open(path)?.ensure_schema().await?,
            Backend::Postgres(url) => {
                PostgresLockProvider::connect(url)
                    .await?
                    .ensure_schema()
                    .await?
            }
            Backend::MySql(url) => {
                MySqlLockProvider::connect(url)
                    .await?
                    .ensure_schema()
                    .await?
            }
            Backend::Redis(url) => {
                RedisLockProvider::connect(url)
                    .await?
                    .ensure_schema()
                    .await?
            }
        }
        Ok(())
    }
}

struct Options {
    instances: usize,
    seconds: u64,
    backend: Option<Backend>,
    child: Option<String>,
}

fn parse_args() -> Result<Options, String> {
    let mut options = Options {
        instances: 3,
        seconds: 10,
        backend: None,
        child: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--instances" => {
                options.instances = value("--instances")?
                    .parse()
                    .map_err(|e| format!("--instances: {e}"))?;
                if options.instances < 2 {
                    return Err("--instances must be at least 2 to show anything".into());
                }
            }
            "--seconds" => {
                options.seconds = value("--seconds")?
                    .parse()
                    .map_err(|e| format!("--seconds: {e}"))?
            }
            "--postgres" => options.backend = Some(Backend::Postgres(value("--postgres")?)),
            "--mysql" => options.backend = Some(Backend::MySql(value("--mysql")?)),
            "--redis" => options.backend = Some(Backend::Redis(value("--redis")?)),
            "--sqlite" => options.backend = Some(Backend::Sqlite(value("--sqlite")?)),
            "--child" => options.child = Some(value("--child")?),
            "-h" | "--help" => {
                return Err("usage: cluster_demo [--instances N] [--seconds S] [--postgres URL | --mysql URL | --redis URL | --sqlite PATH]".into());
            }
            other => return Err(format!("unknown argument `{other}`; see --help")),
        }
    }
    Ok(options)
}

fn main() -> ExitCode {
    let options = match parse_args() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = tokio::runtime::Runtime::new().expect("a tokio runtime");
    let result = match options.child.clone() {
        Some(instance) => runtime
            .block_on(child(options, instance))
            .map(|()| ExitCode::SUCCESS),
        None => runtime.block_on(parent(options)),
    };
    result.unwrap_or_else(|error| {
        eprintln!("cluster_demo: {error}");
        let mut source = error.source();
        while let Some(cause) = source {
            eprintln!("  caused by: {cause}");
            source = cause.source();
        }
        ExitCode::FAILURE
    })
}

/// One instance of the service.
async fn child(options: Options, instance: String) -> Result<(), BoxError> {
    let backend = options.backend.ok_or("a child needs a backend")?;
    let scheduler = Scheduler::builder()
        .lock_provider(backend.provider().await?)
        .instance_id(instance)
        .shutdown_timeout(Duration::from_secs(5))
        .start()
        .await?;
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    println!("READY {}", Utc::now().timestamp_millis());
    scheduler
        .run_until(async {
            terminate.recv().await;
            println!("STOPPING {}", Utc::now().timestamp_millis());
        })
        .await?;
    Ok(())
}

#[derive(Default)]
struct Observed {
    ready: Vec<i64>,
    stopping: Vec<i64>,
    /// job -> slot -> instances that ran it
    runs: BTreeMap<String, BTreeMap<i64, Vec<String>>>,
}

async fn parent(options: Options) -> Result<ExitCode, BoxError> {
    let temp = tempfile::tempdir()?;
    let backend = options.backend.clone().unwrap_or_else(|| {
        Backend::Sqlite(temp.path().join("locks.db").to_string_lossy().into_owned())
    });
    backend.ensure_schema().await?;
    println!(
        "cluster_demo: {} instances for {} s on {backend:?}",
        options.instances, options.seconds
    );

    let exe = std::env::current_exe()?;
    let observed = Arc::new(Mutex::new(Observed::default()));
    let mut children = Vec::new();
    let mut readers = Vec::new();
    for i in 0..options.instances {
        let instance = format!("instance-{}", (b'a' + i as u8) as char);
        let mut child = tokio::process::Command::new(&exe)
            .args(["--child", &instance])
            .args(backend.args())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().expect("piped stdout");
        let observed = observed.clone();
        readers.push(tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                record(&mut observed.lock().unwrap(), &line);
            }
        }));
        children.push(child);
    }

    tokio::time::sleep(Duration::from_secs(options.seconds)).await;
    for child in &children {
        if let Some(pid) = child.id() {
            // Graceful stop, as an orchestrator would do it.
            tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await?;
        }
    }
    let mut failed_children = 0;
    for mut child in children {
        let status = tokio::time::timeout(Duration::from_secs(15), child.wait()).await;
        match status {
            Ok(Ok(status)) if status.success() => {}
            other => {
                eprintln!("an instance did not stop cleanly: {other:?}");
                failed_children += 1;
            }
        }
    }
    for reader in readers {
        reader.await?;
    }

    let observed = observed.lock().unwrap();
    let verdict = print_table(&observed, options.instances)?;
    Ok(
        if verdict.duplicates > 0 || verdict.missed > 0 || failed_children > 0 {
            eprintln!(
                "FAILED: {} slots ran twice, {} due slots were missed, {failed_children} instances did not stop cleanly",
                verdict.duplicates, verdict.missed
            );
            ExitCode::FAILURE
        } else {
            println!("OK: every due slot ran exactly once");
            ExitCode::SUCCESS
        },
    )
}

fn record(observed: &mut Observed, line: &str) {
    let fields: Vec<&str> = line.split_whitespace().collect();
    match fields.as_slice() {
        ["READY", at] => observed.ready.extend(at.parse::<i64>().ok()),
        ["STOPPING", at] => observed.stopping.extend(at.parse::<i64>().ok()),
        ["RUN", job, slot, instance, _fence] => {
            if let Ok(slot) = slot.parse::<i64>() {
                observed
                    .runs
                    .entry((*job).to_owned())
                    .or_default()
                    .entry(slot)
                    .or_default()
                    .push((*instance).to_owned());
            }
        }
        _ => {}
    }
}

struct Verdict {
    duplicates: usize,
    missed: usize,
}

fn print_table(observed: &Observed, instances: usize) -> Result<Verdict, BoxError> {
    if observed.ready.len() != instances || observed.stopping.len() != instances {
        return Err(format!(
            "only {} of {instances} instances started and {} stopped; see their errors above",
            observed.ready.len(),
            observed.stopping.len()
        )
        .into());
    }
    // Slots count as due while every instance was up, with a margin for start-up and stop.
    let margin = TimeDelta::milliseconds(200);
    let from =
        DateTime::from_timestamp_millis(*observed.ready.iter().max().unwrap()).unwrap() + margin;
    let until =
        DateTime::from_timestamp_millis(*observed.stopping.iter().min().unwrap()).unwrap() - margin;
    let jobs = scheduled_locks::scheduler::registered_jobs()?;

    println!();
    println!(
        "{:<12} {:>9} {:>5}  {:<18} {:>10} {:>6}",
        "job", "slots due", "runs", "runs per instance", "duplicates", "missed"
    );
    let mut verdict = Verdict {
        duplicates: 0,
        missed: 0,
    };
    for job in &jobs {
        let label = job.name().rsplit("::").next().unwrap_or(job.name());
        let empty = BTreeMap::new();
        let runs = observed.runs.get(label).unwrap_or(&empty);
        let mut due = Vec::new();
        let mut at = from;
        while let Some(slot) = job.trigger().next_slot(at) {
            if slot.instant() > until {
                break;
            }
            due.push(slot.unix_millis());
            at = slot.instant();
        }
        let duplicates = runs.values().filter(|who| who.len() > 1).count();
        let missed = due.iter().filter(|slot| !runs.contains_key(slot)).count();
        let mut per_instance: HashMap<&str, usize> = HashMap::new();
        for who in runs.values().flatten() {
            *per_instance.entry(who.as_str()).or_default() += 1;
        }
        let spread = (0..instances)
            .map(|i| {
                let name = format!("instance-{}", (b'a' + i as u8) as char);
                per_instance
                    .get(name.as_str())
                    .copied()
                    .unwrap_or(0)
                    .to_string()
            })
            .collect::<Vec<_>>()
            .join("/");
        let total: usize = runs.values().map(Vec::len).sum();
        println!(
            "{label:<12} {:>9} {total:>5}  {spread:<18} {duplicates:>10} {missed:>6}",
            due.len()
        );
        verdict.duplicates += duplicates;
        verdict.missed += missed;
    }
    println!();
    Ok(verdict)
}
