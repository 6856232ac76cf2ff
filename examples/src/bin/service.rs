//! A complete service: an axum HTTP API and locked scheduled jobs in one process, on the
//! service's own sqlx pool, with the cluster's dashboard and Prometheus metrics served by the
//! same app, stopped by one SIGTERM. It depends on `scheduled-locks` alone (features
//! `sqlx-postgres`, `dashboard`, `metrics`); sqlx comes from it (`scheduled_locks::sqlx::sqlx`).
//!
//! ```text
//! cargo run -p examples --bin service -- --database-url postgres://postgres@127.0.0.1/test
//! curl -s http://127.0.0.1:8080/reports                 # the service's own API
//! curl -s http://127.0.0.1:8080/ops/api/jobs            # the dashboard (its pages: /ops/)
//! curl -s http://127.0.0.1:8080/metrics | grep '^scheduled_'
//! kill -TERM <pid>    # HTTP drains, running jobs stop, their leases are released
//! ```
//!
//! At start, in this order:
//!
//! 1. the Prometheus recorder, before the scheduler: metric handles registered without a
//!    recorder stay no-ops;
//! 2. the pool, and the lock and operations tables (`ensure_schema`);
//! 3. the migration `create_reports` v1, a run-once task: across every replica starting at once,
//!    one runs it and the others wait until it is done. It runs before the scheduler starts, so
//!    no job can fire into a table that does not exist yet, under the scheduler's instance id,
//!    so the lock rows it leaves name the same holder as the jobs' rows do;
//! 4. the scheduler, with the two `#[scheduled]` jobs below, which receive the pool as
//!    `State<AppState>` and the fire as `JobContext`, and a run history kept for a week;
//! 5. HTTP: the service's routes with its state, the dashboard nested under `/ops`, `/metrics`.
//!
//! On SIGTERM or SIGINT ([`scheduled_locks::shutdown_signal`]) one token is cancelled: axum
//! stops accepting connections and finishes the requests in flight while the scheduler stops
//! firing, resolves the running bodies' `cancelled()`, waits for them and releases their leases.
//! The process exits 0 when both are done, 1 if either failed. Options also come from
//! `DATABASE_URL` and `LISTEN`; `RUST_LOG` sets the log filter. Each replica prints its
//! instance id, what the migration did and where it listens on stdout.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use chrono::{DateTime, Utc};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use scheduled_locks::metrics::JOB_DURATION_SECONDS;
use scheduled_locks::provider::{LockingTaskExecutor, RunOnceOutcome};
use scheduled_locks::scheduler::default_instance_id;
use scheduled_locks::sqlx::SqlxLockProvider;
use scheduled_locks::sqlx::sqlx::{self, PgPool};
use scheduled_locks::{JobContext, Scheduler, State, scheduled, scheduler_lock};
use tokio_util::sync::CancellationToken;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Below Kubernetes' default 30 s grace period (README, "Running on Kubernetes").
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(15);

/// Histogram buckets (seconds) for the jobs' durations: histograms rather than the exporter's
/// default summaries, because histograms of several replicas can be summed in PromQL.
const DURATION_BUCKETS: &[f64] = &[0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 30.0, 300.0];

/// The migration's statements, in one transaction: a failure leaves nothing behind, so the
/// next replica can run it again. A plain `CREATE TABLE` (no `IF NOT EXISTS`): run-once is what
/// keeps it from running twice.
const CREATE_REPORTS: &str = "CREATE TABLE reports (
    slot timestamptz PRIMARY KEY,
    fence bigint NOT NULL,
    instance_id text NOT NULL,
    written_at timestamptz NOT NULL DEFAULT now(),
    exported_fence bigint
)";

/// What the HTTP handlers and the jobs share: the service's own pool.
#[derive(Clone)]
struct AppState {
    pool: PgPool,
}

/// One report per slot (every second here; an hour in a real service). The slot is the primary
/// key: once per slot across the cluster is what keeps the insert from failing.
#[scheduled(fixed_rate = "1s")]
#[scheduler_lock(name = "write_report", lock_at_most_for = "5s")]
async fn write_report(State(app): State<AppState>, ctx: JobContext) -> Result<(), BoxError> {
    let slot = ctx.scheduled_at().ok_or("a fixed-rate fire has a slot")?;
    sqlx::query("INSERT INTO reports (slot, fence, instance_id) VALUES ($1, $2, $3)")
        .bind(slot)
        .bind(i64::try_from(ctx.fence())?)
        .bind(ctx.instance_id())
        .execute(&app.pool)
        .await?;
    Ok(())
}

/// Every 3 s, the reports not exported yet, one at a time, each marked with this run's fence:
/// a job whose length is not known in advance, under a 10 s lease kept alive while it runs
/// (a crashed holder blocks it for 10 s at most). Between reports, and during an upload, it
/// stops if the lease was lost or the service is stopping; the rest waits for the next run.
#[scheduled(fixed_rate = "3s")]
#[scheduler_lock(name = "export_reports", lock_at_most_for = "10s", keep_alive = true)]
async fn export_reports(State(app): State<AppState>, ctx: JobContext) -> Result<(), BoxError> {
    let fence = i64::try_from(ctx.fence())?;
    let mut exported = 0;
    loop {
        let next: Option<(DateTime<Utc>,)> = sqlx::query_as(
            "SELECT slot FROM reports WHERE exported_fence IS NULL ORDER BY slot LIMIT 1",
        )
        .fetch_optional(&app.pool)
        .await?;
        let Some((slot,)) = next else { break };
        tokio::select! {
            // Not marked: the next run exports it again.
            _ = ctx.cancelled() => break,
            // Stands for the upload to a slow system elsewhere.
            _ = tokio::time::sleep(Duration::from_millis(300)) => {}
        }
        sqlx::query("UPDATE reports SET exported_fence = $1 WHERE slot = $2")
            .bind(fence)
            .bind(slot)
            .execute(&app.pool)
            .await?;
        exported += 1;
    }
    tracing::info!(exported, fence, "reports exported");
    Ok(())
}

/// `GET /reports`: the newest ten, one line each.
async fn latest_reports(
    axum::extract::State(app): axum::extract::State<AppState>,
) -> Result<String, (axum::http::StatusCode, String)> {
    let rows: Vec<(DateTime<Utc>, i64, String)> =
        sqlx::query_as("SELECT slot, fence, instance_id FROM reports ORDER BY slot DESC LIMIT 10")
            .fetch_all(&app.pool)
            .await
            .map_err(|e| (axum::http::StatusCode::SERVICE_UNAVAILABLE, e.to_string()))?;
    Ok(rows
        .iter()
        .map(|(slot, fence, instance)| format!("{slot} fence={fence} by={instance}\n"))
        .collect())
}

async fn create_reports(pool: &PgPool) -> Result<(), sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query(CREATE_REPORTS).execute(&mut *tx).await?;
    tx.commit().await
}

struct Options {
    listen: SocketAddr,
    database_url: String,
}

const USAGE: &str = "usage: service --database-url URL [--listen ADDR]\n  \
    --database-url URL  the service's PostgreSQL database, locks included (or $DATABASE_URL)\n  \
    --listen ADDR       where to serve HTTP (default 127.0.0.1:8080, or $LISTEN; port 0: any)";

fn options() -> Result<Options, String> {
    let mut listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:8080".into());
    let mut database_url = std::env::var("DATABASE_URL").ok();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--listen" => listen = value("--listen")?,
            "--database-url" => database_url = Some(value("--database-url")?),
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Options {
        listen: listen
            .parse()
            .map_err(|e| format!("listen address {listen:?}: {e}"))?,
        database_url: database_url.ok_or("no database: give --database-url or DATABASE_URL")?,
    })
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

async fn run(options: Options) -> Result<(), BoxError> {
    // The signal first: a SIGTERM that arrives while starting is a graceful stop too.
    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            scheduled_locks::shutdown_signal().await;
            stop.cancel();
        }
    });

    let metrics = install_metrics()?;

    let pool = PgPool::connect(&options.database_url).await?;
    let provider = SqlxLockProvider::postgres(pool.clone());
    provider.ensure_schema().await?;

    let instance = default_instance_id();
    println!("instance {instance}");
    let migrations =
        LockingTaskExecutor::new(provider.clone()).with_instance_id(instance.clone())?;
    let migrated = migrations
        .run_once("create_reports", "v1")
        .run(|| create_reports(&pool))
        .await?;
    match migrated {
        RunOnceOutcome::Ran(()) => println!("migration create_reports v1: ran"),
        RunOnceOutcome::AlreadyDone => println!("migration create_reports v1: already done"),
        RunOnceOutcome::Failed(error) => {
            return Err(format!("migration create_reports v1 failed: {error}").into());
        }
        RunOnceOutcome::TimedOut => {
            return Err("migration create_reports v1 still running on another replica".into());
        }
    }

    let state = AppState { pool: pool.clone() };
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id(instance)
        .state(state.clone())
        .history(Duration::from_secs(7 * 24 * 3600))
        .shutdown_timeout(SHUTDOWN_TIMEOUT)
        .start()
        .await?;

    let app = Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/reports", get(latest_reports))
        .with_state(state)
        // `router()` is a `Router<()>`: nested after the service's own state is given, as a
        // service so that `/ops/` answers as well as `/ops` (`Router::nest` answers `/ops` only).
        .nest_service("/ops", scheduled_locks::dashboard::router(provider))
        .route(
            "/metrics",
            get(move || std::future::ready(metrics.render())),
        );
    let listener = tokio::net::TcpListener::bind(options.listen).await?;
    println!("listening on http://{}", listener.local_addr()?);

    // One stop for both: axum drains its requests while the scheduler drains its jobs.
    let server = axum::serve(listener, app).with_graceful_shutdown(stop.clone().cancelled_owned());
    let (served, scheduled) =
        tokio::join!(server.into_future(), scheduler.run_until(stop.cancelled()));
    served?;
    scheduled?;
    pool.close().await;
    tracing::info!("stopped cleanly");
    Ok(())
}

/// The `metrics` recorder, rendered by `GET /metrics`; its upkeep (draining histograms) on a
/// timer, as the exporter asks of a recorder it does not serve itself.
fn install_metrics() -> Result<PrometheusHandle, BoxError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(JOB_DURATION_SECONDS.into()), DURATION_BUCKETS)?
        .install_recorder()?;
    tokio::spawn({
        let handle = handle.clone();
        async move {
            let mut every = tokio::time::interval(Duration::from_secs(5));
            loop {
                every.tick().await;
                handle.run_upkeep();
            }
        }
    });
    Ok(handle)
}
