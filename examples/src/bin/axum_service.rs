//! An axum HTTP service and the scheduler in one process, stopped by one signal: what a
//! service deployed on Kubernetes looks like (README, "Running on Kubernetes").
//!
//! ```text
//! cargo run -p examples --bin axum_service -- --database-url postgres://postgres@127.0.0.1/test
//! curl -s http://127.0.0.1:8080/jobs
//! kill -TERM <pid>    # what Kubernetes sends: HTTP drains, the job stops, its lease is released
//! ```
//!
//! On SIGTERM or SIGINT ([`scheduled_locks::shutdown_signal`]) one token is cancelled; axum stops
//! accepting connections and finishes the requests in flight (`with_graceful_shutdown`) while
//! the scheduler stops firing, resolves the running body's `cancelled()`, waits for it and
//! releases its lease (`run_until`). The process exits 0 when both are done, 1 if either failed
//! (for the scheduler: a job still running at the shutdown timeout, named in the error).
//!
//! The job, `export`, runs every 5 s for up to 3 s in steps, stopping between steps when
//! cancelled, under a 10 s lease kept alive while it runs: the recommended shape of a job whose
//! length is not known in advance. Options also come from `DATABASE_URL` and `LISTEN`;
//! `RUST_LOG` sets the log filter.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use scheduled_locks::postgres::PostgresLockProvider;
use scheduled_locks::provider::LockConfiguration;
use scheduled_locks::scheduler::RunOutcome;
use scheduled_locks::{Job, JobContext, Scheduler, Trigger};
use tokio_util::sync::CancellationToken;

/// Below Kubernetes' default 30 s grace period, with room for a preStop sleep of 5 s and the
/// releases (README, "Running on Kubernetes").
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(15);

struct Options {
    listen: SocketAddr,
    database_url: String,
    table: Option<String>,
}

const USAGE: &str = "usage: axum_service --database-url URL [--listen ADDR] [--table NAME]\n  \
    --database-url URL  the PostgreSQL lock database (or $DATABASE_URL)\n  \
    --listen ADDR       where to serve HTTP (default 127.0.0.1:8080, or $LISTEN; port 0: any)\n  \
    --table NAME        the lock table (default shedlock)";

fn options() -> Result<Options, String> {
    let mut listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let mut database_url = std::env::var("DATABASE_URL").ok();
    let mut table = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--listen" => listen = value("--listen")?,
            "--database-url" => database_url = Some(value("--database-url")?),
            "--table" => table = Some(value("--table")?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        listen: listen
            .parse()
            .map_err(|e| format!("listen address {listen:?}: {e}"))?,
        database_url: database_url.ok_or("no database: give --database-url or DATABASE_URL")?,
        table,
    })
}

/// Up to 3 s of work in 100 ms steps; between steps, stops if the lease was lost or the
/// service is stopping (its history row then says `cancel_requested`; a body that must be
/// recorded `cancelled`, not `succeeded`, returns an error when it stops early).
async fn export() {
    let ctx = JobContext::current().expect("a scheduled body runs under its lock");
    tracing::info!(fence = ctx.fence(), "export started");
    for step in 0..30 {
        tokio::select! {
            _ = ctx.cancelled() => {
                tracing::info!(step, "export stopping early: shutting down or lease lost");
                return;
            }
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
    }
    tracing::info!("export finished");
}

fn jobs() -> Result<Vec<Job>, scheduled_locks::LockError> {
    // A 10 s lease extended every 5 s while the body runs: a crashed holder blocks the job
    // for 10 s at most, however long a run takes.
    let lease = LockConfiguration::new("export", Duration::from_secs(10), Duration::ZERO)?
        .with_keep_alive(true);
    Ok(vec![
        Job::new(
            "export",
            Trigger::fixed_rate(Duration::from_secs(5))?,
            export,
        )
        .with_lock(lease),
    ])
}

/// `GET /jobs`: one line per job of this instance.
async fn job_status(State(scheduler): State<Scheduler>) -> String {
    let mut out = String::new();
    for job in scheduler.jobs() {
        let outcome = match &job.last_outcome {
            None => "-".to_owned(),
            Some(RunOutcome::Succeeded) => "succeeded".to_owned(),
            Some(other) => format!("{other:?}"),
        };
        out.push_str(&format!(
            "{} running={} last={outcome}\n",
            job.name, job.running
        ));
    }
    out
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
    // The signal first: a SIGTERM that arrives while connecting is a graceful stop too.
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            scheduled_locks::shutdown_signal().await;
            stop.cancel();
        }
    });

    let mut provider = PostgresLockProvider::connect(&options.database_url).await?;
    if let Some(table) = &options.table {
        provider = provider.with_table(table)?;
    }
    provider.ensure_schema().await?;
    let scheduler = Scheduler::builder()
        .lock_provider(provider)
        .shutdown_timeout(SHUTDOWN_TIMEOUT)
        .jobs(jobs()?)
        .start()
        .await?;

    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/jobs", get(job_status))
        .with_state(scheduler.clone());
    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    println!("listening on http://{}", listener.local_addr()?);

    // One stop for both: axum drains its requests while the scheduler drains its jobs.
    let server = axum::serve(listener, app).with_graceful_shutdown(stop.clone().cancelled_owned());
    let (served, scheduled) =
        tokio::join!(server.into_future(), scheduler.run_until(stop.cancelled()));
    served?;
    scheduled?;
    tracing::info!("stopped cleanly");
    Ok(())
}
