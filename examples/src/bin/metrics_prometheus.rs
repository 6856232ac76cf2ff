//! A scheduler's metrics served for Prometheus, and its jobs' status from `Scheduler::jobs()`.
//!
//! ```text
//! cargo run -p examples --bin metrics_prometheus                      # 127.0.0.1:9000, until Ctrl-C or SIGTERM
//! cargo run -p examples --bin metrics_prometheus -- --listen 127.0.0.1:9100 --seconds 30
//! curl -s http://127.0.0.1:9000/metrics | grep '^scheduled_'
//! # two replicas, each its own process and endpoint, on one SQLite lock table:
//! cargo run -p examples --bin metrics_prometheus -- --sqlite /tmp/locks.db --instance a --listen 127.0.0.1:9101
//! cargo run -p examples --bin metrics_prometheus -- --sqlite /tmp/locks.db --instance b --listen 127.0.0.1:9102
//! ```
//!
//! By default two scheduler instances share one in-memory lock provider in this process, as two
//! replicas of a service share a lock table, so every fire shows one acquire and one skip. With
//! `--sqlite PATH` the process is one replica on that lock table, as in a deployment (examples/
//! tests/prometheus_alerts.rs scrapes two with a real Prometheus). Jobs:
//! - `tick`: fixed rate 200 ms, succeeds;
//! - `flaky_export`: fixed rate 1 s, always fails (its runs are still attempts, acquires and
//!   durations).
//!
//! scheduled-locks records through the `metrics` facade when built with its `metrics` feature;
//! this program installs `metrics-exporter-prometheus` as the recorder. The recorder must be
//! installed before the scheduler starts: metric handles are registered when a job's lock is
//! first used, and handles registered without a recorder stay no-ops.
//!
//! The listen address also comes from `METRICS_LISTEN`; `RUST_LOG` sets the log filter.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};
use scheduled_locks::provider::{InMemoryLockProvider, LockConfiguration};
use scheduled_locks::scheduler::{JobStatus, RunOutcome};
use scheduled_locks::sqlite::SqliteLockProvider;
use scheduled_locks::{Job, Scheduler, Trigger};

/// Histogram buckets (seconds). Histograms rather than the exporter's default summaries,
/// because histograms from several instances can be summed in PromQL.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 1800.0,
];
/// A fire normally starts within a few milliseconds of its slot.
const FIRE_LAG_BUCKETS: &[f64] = &[0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0];

struct Options {
    listen: SocketAddr,
    seconds: Option<u64>,
    /// One replica on this SQLite lock table instead of two in-memory instances.
    sqlite: Option<String>,
    instance: Option<String>,
}

const USAGE: &str = "usage: metrics_prometheus [--listen ADDR] [--seconds N] [--sqlite PATH [--instance ID]]\n  \
    --listen ADDR  where to serve /metrics (default 127.0.0.1:9000, or $METRICS_LISTEN)\n  \
    --sqlite PATH  run one replica on this SQLite lock table (default: two in-memory instances)\n  \
    --instance ID  this replica's instance id (with --sqlite; default host:pid:random)\n  \
    --seconds N    stop after N seconds (default: at Ctrl-C or SIGTERM)";

fn options() -> Result<Options, String> {
    let mut listen = std::env::var("METRICS_LISTEN").unwrap_or_else(|_| "127.0.0.1:9000".into());
    let mut seconds = None;
    let (mut sqlite, mut instance) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--listen" => listen = value("--listen")?,
            "--seconds" => {
                let n = value("--seconds")?;
                seconds = Some(n.parse().map_err(|e| format!("--seconds {n}: {e}"))?);
            }
            "--sqlite" => sqlite = Some(value("--sqlite")?),
            "--instance" => instance = Some(value("--instance")?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let listen = listen
        .parse()
        .map_err(|e| format!("listen address {listen:?}: {e}"))?;
    if instance.is_some() && sqlite.is_none() {
        return Err(
            "--instance needs --sqlite (the in-memory set-up names its two instances)".into(),
        );
    }
    Ok(Options {
        listen,
        seconds,
        sqlite,
        instance,
    })
}

fn jobs() -> Result<Vec<Job>, scheduled_locks::LockError> {
    Ok(vec![
        Job::new(
            "tick",
            Trigger::fixed_rate(Duration::from_millis(200))?,
            || async {
                tokio::time::sleep(Duration::from_millis(3)).await;
            },
        )
        // Leases of 5 periods: a crashed holder stops a job for 5 fires at most.
        .with_lock(lease("tick", Duration::from_secs(1))?),
        Job::new(
            "flaky_export",
            Trigger::fixed_rate(Duration::from_secs(1))?,
            || async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err::<(), _>("export target answered 503 (this job fails on purpose)")
            },
        )
        .with_lock(lease("flaky_export", Duration::from_secs(5))?),
    ])
}

fn lease(name: &str, at_most: Duration) -> Result<LockConfiguration, scheduled_locks::LockError> {
    LockConfiguration::new(name, at_most, Duration::ZERO)
}

/// One line per job, as an operator's status page would show it.
fn print_status(instance: &str, clock_offset: chrono::TimeDelta, jobs: &[JobStatus]) {
    // How far this host's clock is off the database's (fires follow the database).
    // Rounded to the printed millisecond, and `+ 0.0` turns a -0.0 into 0.0.
    let seconds = (clock_offset.as_seconds_f64() * 1e3).round() / 1e3 + 0.0;
    println!("{instance} (clock {seconds:+.3} s from the database's):");
    for job in jobs {
        let next = job.next_fire.map_or_else(
            || "-".to_owned(),
            |at| at.format("%H:%M:%S%.3f").to_string(),
        );
        let outcome = match &job.last_outcome {
            None => "-".to_owned(),
            Some(RunOutcome::Succeeded) => "succeeded".to_owned(),
            Some(RunOutcome::Cancelled) => "cancelled".to_owned(),
            Some(RunOutcome::Skipped) => "skipped".to_owned(),
            Some(RunOutcome::Failed(error)) => format!("failed: {error}"),
            Some(RunOutcome::Panicked(message)) => format!("panicked: {message}"),
            Some(RunOutcome::LockFailed(error)) => format!("lock failed: {error}"),
            Some(other) => format!("{other:?}"),
        };
        let took = job.last_duration.map_or_else(
            || "-".to_owned(),
            |d| format!("{:.1} ms", d.as_secs_f64() * 1e3),
        );
        println!(
            "  {:<13} {:<26} next {next}  last {took:>8}  {outcome}",
            job.name, job.trigger
        );
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            if !message.is_empty() {
                eprintln!("error: {message}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Logs on stderr, so that stdout carries only the job status lines.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match run(options).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(1)
        }
    }
}

async fn run(options: Options) -> Result<(), Box<dyn std::error::Error>> {
    // First the recorder, then the scheduler (see the module documentation).
    PrometheusBuilder::new()
        .with_http_listener(options.listen)
        .set_buckets_for_metric(
            Matcher::Full(scheduled_locks::metrics::JOB_DURATION_SECONDS.into()),
            DURATION_BUCKETS,
        )?
        .set_buckets_for_metric(
            Matcher::Full(scheduled_locks::metrics::JOB_FIRE_LAG_SECONDS.into()),
            FIRE_LAG_BUCKETS,
        )?
        .install()
        .map_err(|e| format!("cannot serve metrics on {}: {e}", options.listen))?;
    println!(
        "serving Prometheus metrics on http://{}/metrics",
        options.listen
    );

    let jobs = jobs()?;
    let mut instances = Vec::new();
    if let Some(path) = &options.sqlite {
        let provider = SqliteLockProvider::open(path)?;
        provider.ensure_schema().await?;
        // No run history: its housekeeping job would add a third job to every metric, and
        // this example's scrape (and the queries tested on it) is about the two jobs below.
        let mut builder = Scheduler::builder()
            .lock_provider(provider)
            .no_history()
            .shutdown_timeout(Duration::from_secs(5))
            .jobs(jobs);
        if let Some(id) = &options.instance {
            builder = builder.instance_id(id.as_str());
        }
        let scheduler = builder.start().await?;
        let id = scheduler.executor().instance_id().to_owned();
        instances.push((id, scheduler));
    } else {
        let provider = std::sync::Arc::new(InMemoryLockProvider::new());
        for id in ["instance-a", "instance-b"] {
            let scheduler = Scheduler::builder()
                .lock_provider(provider.clone())
                .instance_id(id)
                .shutdown_timeout(Duration::from_secs(5))
                .jobs(jobs.clone())
                .start()
                .await?;
            instances.push((id.to_owned(), scheduler));
        }
    }

    let stop = async {
        match options.seconds {
            Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
            None => scheduled_locks::shutdown_signal().await,
        }
    };
    tokio::pin!(stop);
    let mut report = tokio::time::interval(Duration::from_secs(2));
    report.tick().await;
    loop {
        tokio::select! {
            _ = &mut stop => break,
            _ = report.tick() => {
                for (id, scheduler) in &instances {
                    print_status(id, scheduler.clock_offset(), &scheduler.jobs());
                }
            }
        }
    }
    // Graceful: stop firing, await running bodies, release their locks.
    for (_, scheduler) in &instances {
        scheduler.shutdown().await?;
    }
    Ok(())
}
