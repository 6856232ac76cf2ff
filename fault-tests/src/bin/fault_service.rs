//! The service the fault tests start as real OS processes.
//!
//! ```text
//! fault-service --backend postgres|mysql|sqlite|redis --lock-url URL_OR_PATH --lock-table T
//!               --runs-table R --instance ID [--runs-url URL_OR_PATH] [--jobs a,b,..]
//!               [--pulse] [--chaos-jobs] [--load-jobs N] [--shutdown-timeout-ms MS]
//!               [--operation-timeout-ms MS] [--schema create|check]
//!               [--max-concurrent-runs N] [--heartbeat-ms MS] [--acquire-ahead-ms MS]
//!               [--hog] [--die-after-parent JOB] [--fail-while PATH] [--share-jobs]
//! ```
//!
//! Its fixed jobs are annotated functions (`#[scheduled]` + `#[scheduler_lock]`), picked by
//! `--jobs`; jobs whose names, number or policies come from the arguments (`--pulse`,
//! `--chaos-jobs`, `--load-jobs`) are built with `Job::new`. Every run writes a row to the runs table over a direct
//! connection (`--runs-url`, by default the lock URL), so a test reads what happened on the
//! database's clock even when the lock provider's link (`--lock-url`, maybe a proxy) is cut.
//!
//! Protocol with the test: `READY <instance> <own clock, Unix ms>` on stdout once the
//! scheduler runs, then `CLOCK <instance> offset_ms=<Scheduler::clock_offset> gauge_ms=<the
//! scheduled_clock_offset_seconds gauge as recorded>`; SIGTERM or SIGINT shuts it down gracefully, then `EXIT errors=<n>
//! warnings=<n> attempts=<n>` (events logged at those levels, and the lock acquires this
//! instance asked for, from `scheduled_lock_attempts_total`) on stdout and exit code 0. Every WARN event
//! that names a job (its `job` or `lock` field, or the `fire` span it is logged in) is also
//! printed on stdout as it happens, `WARN job=<name> at=<own clock, Unix ms> <message>`, so a
//! test can tell which jobs were warned about, and when. A bad argument or
//! a start-up failure prints the error with its causes on stderr and exits with code 2.
//!
//! `--hog` adds a job of this instance's own (`hog_<instance>`) whose first run holds its
//! permit until shutdown: with `--max-concurrent-runs 1` the instance is busy. With
//! `--die-after-parent JOB` the service kills itself with `SIGKILL` the first time the
//! scheduler logs that it wrote the requests of `JOB`'s children (before `JOB`'s end is
//! recorded), after printing `DYING job=<JOB> slot=<the event's slot>` on stdout.
//!
//! The alert settings come from the environment (`LOCK_ALERT_..`, read by
//! `overrides_from_env`, as a deployed service would take them). `--fail-while PATH` makes
//! the job `alert_flaky` fail while that file exists. `--share-jobs` turns on
//! `SchedulerBuilder::share_jobs`.

#![forbid(unsafe_code)]

use std::error::Error;
use std::process::ExitCode;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use test_support::skip::chain;

use fault_tests::{Backend, RunsTable, SchemaAction};
use lock_core::{BoxError, JobContext, LockConfiguration};
use lock_scheduler::{
    Job, MisfirePolicy, Scheduler, Trigger, registered_jobs, scheduled, scheduler_lock,
};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// Exit code for bad arguments and start-up failures (bad credentials, missing table, ...).
const EXIT_CONFIG: u8 = 2;

static RUNS: OnceLock<RunsTable> = OnceLock::new();
static ERRORS: AtomicU64 = AtomicU64::new(0);
static WARNINGS: AtomicU64 = AtomicU64::new(0);
/// `--die-after-parent`: the parent whose requests written end this process, once.
static DIE_AFTER_PARENT: OnceLock<String> = OnceLock::new();
/// `--fail-while`: `alert_flaky` fails while this file exists.
static FAIL_WHILE: OnceLock<std::path::PathBuf> = OnceLock::new();

// ---- The annotated jobs: fixed configuration, chosen with --jobs. ----

// The misfire, retry, timeout, shard and broadcast jobs.
#[path = "fault_service/run_policies.rs"]
mod run_policies;

// Issue 35's job model: dependent jobs, overlap `queue` and `replace`, the circuit breaker.
#[path = "fault_service/job_model.rs"]
mod job_model;

/// Every second, a short run: rolling restarts and slots under clock skew.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "tick", lock_at_most_for = "10s")]
async fn tick() -> Result<(), BoxError> {
    record_once().await
}

/// Every second, runs 20 s on a 4 s lease: the holder is killed mid-run.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "long", lock_at_most_for = "4s")]
async fn long() -> Result<(), BoxError> {
    run_body(Duration::from_secs(20), OnCancel::Stop, false).await
}

/// Every second, a fenced write at start and at end, on a 3 s lease kept alive: the holder
/// is paused past its lease.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "guarded", lock_at_most_for = "3s", keep_alive = true)]
async fn guarded() -> Result<(), BoxError> {
    run_body(Duration::from_secs(30), OnCancel::Stop, true).await
}

/// Every second, waits for cancellation, then needs 1 s to finish; held at least 5 s: the
/// holder is stopped with SIGTERM mid-run.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "graceful", lock_at_most_for = "20s", lock_at_least_for = "5s")]
async fn graceful() -> Result<(), BoxError> {
    run_body(
        Duration::from_secs(30),
        OnCancel::Finish(Duration::from_secs(1)),
        false,
    )
    .await
}

/// Fixed delay (no slot: plain mutual exclusion), runs 5 s on a 3 s lease, so every grant
/// after the first is a takeover of an expired lease: expiry under clock skew.
#[scheduled(fixed_delay = "200ms")]
#[scheduler_lock(name = "exclusive", lock_at_most_for = "3s")]
async fn exclusive() -> Result<(), BoxError> {
    run_body(Duration::from_secs(5), OnCancel::Stop, false).await
}

/// Every second, runs 6 s through a cancellation (work that cannot stop halfway) on a 3 s
/// lease kept alive: the holder's database link is cut mid-run.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "partitioned", lock_at_most_for = "3s", keep_alive = true)]
async fn partitioned() -> Result<(), BoxError> {
    run_body(Duration::from_secs(6), OnCancel::Ignore, false).await
}

/// Every second, a short run that fails while `--fail-while`'s file exists: the alert rules'
/// `failed_in_a_row` and its resolution.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "alert_flaky", lock_at_most_for = "10s")]
async fn alert_flaky() -> Result<(), BoxError> {
    record_once().await?;
    match FAIL_WHILE.get().is_some_and(|path| path.exists()) {
        true => Err("the flag file says fail".into()),
        false => Ok(()),
    }
}

/// Never by its cron during a test (03:00 on 1 January): run by a trigger request, 6 s long,
/// for `running_too_long`.
#[scheduled(cron = "0 0 3 1 1 *")]
#[scheduler_lock(name = "alert_slow", lock_at_most_for = "30s")]
async fn alert_slow() -> Result<(), BoxError> {
    run_body(Duration::from_secs(6), OnCancel::Stop, false).await
}

// ---- Job bodies. ----

/// What a body does once `JobContext::cancelled()` resolves.
#[derive(Clone, Copy)]
enum OnCancel {
    /// Stop at once.
    Stop,
    /// Finish its work in this much more time, then stop.
    Finish(Duration),
    /// Keep working to the planned end.
    Ignore,
}

fn runs() -> &'static RunsTable {
    RUNS.get()
        .expect("the runs table is opened before the scheduler starts")
}

fn context() -> JobContext {
    JobContext::current().expect("a job body runs inside a locked context")
}

fn slot_ms(ctx: &JobContext) -> Option<i64> {
    ctx.scheduled_at().map(|slot| slot.timestamp_millis())
}

/// A whole run in one row.
async fn record_once() -> Result<(), BoxError> {
    let ctx = context();
    runs()
        .record(
            ctx.lock_name(),
            ctx.instance_id(),
            slot_ms(&ctx),
            ctx.fence(),
        )
        .await
}

/// A whole run in one row, with its fire kind and attempt.
async fn record_fire() -> Result<(), BoxError> {
    let ctx = context();
    let kind = format!("{:?}", ctx.fire_kind());
    runs()
        .record_fire(
            ctx.lock_name(),
            ctx.instance_id(),
            slot_ms(&ctx),
            ctx.fence(),
            &kind,
            ctx.attempt(),
        )
        .await
}

/// Records the start, works for `work` (optionally with a fenced write before and after),
/// reacting to cancellation as `on_cancel` says, and records the end.
async fn run_body(work: Duration, on_cancel: OnCancel, fenced: bool) -> Result<(), BoxError> {
    let ctx = context();
    let runs = runs();
    let id = runs
        .start(
            ctx.lock_name(),
            ctx.instance_id(),
            slot_ms(&ctx),
            ctx.fence(),
        )
        .await?;
    let first = match fenced {
        true => Some(runs.guarded_write(ctx.fence(), ctx.instance_id()).await?),
        false => None,
    };
    let end = tokio::time::Instant::now() + work;
    let cancelled = tokio::select! {
        _ = tokio::time::sleep_until(end) => false,
        _ = ctx.cancelled() => true,
    };
    if cancelled {
        tracing::info!(
            job = ctx.lock_name(),
            fence = ctx.fence(),
            "cancelled() resolved"
        );
        match on_cancel {
            OnCancel::Stop => {}
            OnCancel::Finish(rest) => tokio::time::sleep(rest).await,
            OnCancel::Ignore => tokio::time::sleep_until(end).await,
        }
    }
    let late = match fenced {
        true => Some(runs.guarded_write(ctx.fence(), ctx.instance_id()).await?),
        false => None,
    };
    if late == Some(0) {
        tracing::info!(
            job = ctx.lock_name(),
            fence = ctx.fence(),
            "fenced write refused: a newer fence wrote first"
        );
    }
    runs.finish(id, cancelled, first, late).await
}

// ---- Arguments. ----

struct Args {
    backend: Backend,
    runs: Backend,
    lock_table: String,
    runs_table: String,
    instance: String,
    jobs: Vec<String>,
    pulse: bool,
    chaos_jobs: bool,
    load_jobs: usize,
    shutdown_timeout: Duration,
    operation_timeout: Option<Duration>,
    schema: SchemaAction,
    max_concurrent_runs: Option<usize>,
    heartbeat: Option<Duration>,
    acquire_ahead: Option<Duration>,
    hog: bool,
    share_jobs: bool,
    die_after_parent: Option<String>,
    fail_while: Option<std::path::PathBuf>,
}

const USAGE: &str = "usage: fault-service --backend postgres|mysql|sqlite|redis --lock-url URL_OR_PATH \
     --lock-table T --runs-table R --instance ID [--runs-url URL_OR_PATH] [--jobs a,b,..] \
     [--pulse] [--chaos-jobs] [--load-jobs N] [--shutdown-timeout-ms MS] \
     [--operation-timeout-ms MS] [--schema create|check] [--max-concurrent-runs N] \
     [--heartbeat-ms MS] [--acquire-ahead-ms MS] [--hog] [--share-jobs] [--die-after-parent JOB] \
     [--fail-while PATH]";

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut kind, mut lock_url, mut runs_url) = (None, None, None);
    let (mut lock_table, mut runs_table, mut instance) = (None, None, None);
    let mut jobs = Vec::new();
    let (mut pulse, mut chaos_jobs, mut load_jobs) = (false, false, 0);
    let mut shutdown_timeout = Duration::from_secs(10);
    let mut operation_timeout = None;
    let mut schema = SchemaAction::Create;
    let (mut max_concurrent_runs, mut heartbeat, mut acquire_ahead) = (None, None, None);
    let (mut hog, mut die_after_parent, mut fail_while) = (false, None, None);
    let mut share_jobs = false;
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--backend" => kind = Some(value()?),
            "--lock-url" => lock_url = Some(value()?),
            "--runs-url" => runs_url = Some(value()?),
            "--lock-table" => lock_table = Some(value()?),
            "--runs-table" => runs_table = Some(value()?),
            "--instance" => instance = Some(value()?),
            "--jobs" => jobs.extend(
                value()?
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            ),
            "--pulse" => pulse = true,
            "--chaos-jobs" => chaos_jobs = true,
            "--load-jobs" => {
                load_jobs = value()?.parse().map_err(|e| format!("--load-jobs: {e}"))?
            }
            "--shutdown-timeout-ms" => {
                shutdown_timeout = Duration::from_millis(
                    value()?
                        .parse()
                        .map_err(|e| format!("--shutdown-timeout-ms: {e}"))?,
                )
            }
            "--operation-timeout-ms" => {
                operation_timeout = Some(Duration::from_millis(
                    value()?
                        .parse()
                        .map_err(|e| format!("--operation-timeout-ms: {e}"))?,
                ))
            }
            "--schema" => {
                schema = match value()?.as_str() {
                    "create" => SchemaAction::Create,
                    "check" => SchemaAction::Check,
                    other => return Err(format!("--schema {other:?}: expected create or check")),
                }
            }
            "--max-concurrent-runs" => {
                max_concurrent_runs = Some(
                    value()?
                        .parse()
                        .map_err(|e| format!("--max-concurrent-runs: {e}"))?,
                )
            }
            "--heartbeat-ms" => {
                heartbeat = Some(Duration::from_millis(
                    value()?
                        .parse()
                        .map_err(|e| format!("--heartbeat-ms: {e}"))?,
                ))
            }
            "--acquire-ahead-ms" => {
                acquire_ahead = Some(Duration::from_millis(
                    value()?
                        .parse()
                        .map_err(|e| format!("--acquire-ahead-ms: {e}"))?,
                ))
            }
            "--hog" => hog = true,
            "--share-jobs" => share_jobs = true,
            "--die-after-parent" => die_after_parent = Some(value()?),
            "--fail-while" => fail_while = Some(value()?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let required = |v: Option<String>, name: &str| v.ok_or_else(|| format!("{name} is required"));
    let kind = required(kind, "--backend")?;
    let lock_url = required(lock_url, "--lock-url")?;
    let runs_url = runs_url.unwrap_or_else(|| lock_url.clone());
    Ok(Args {
        backend: Backend::parse(&kind, &lock_url)?,
        runs: Backend::parse(&kind, &runs_url)?,
        lock_table: required(lock_table, "--lock-table")?,
        runs_table: required(runs_table, "--runs-table")?,
        instance: required(instance, "--instance")?,
        jobs,
        pulse,
        chaos_jobs,
        load_jobs,
        shutdown_timeout,
        operation_timeout,
        schema,
        max_concurrent_runs,
        heartbeat,
        acquire_ahead,
        hog,
        share_jobs,
        die_after_parent,
        fail_while,
    })
}

/// The annotated jobs named in `names` (by function name), then the argument-built ones.
fn jobs(args: &Args) -> Result<Vec<Job>, BoxError> {
    let registered = registered_jobs()?;
    let short = |job: &Job| {
        job.name()
            .rsplit("::")
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let mut jobs = Vec::new();
    for name in &args.jobs {
        let job = registered
            .iter()
            .find(|job| short(job) == *name)
            .ok_or_else(|| {
                let known: Vec<String> = registered.iter().map(short).collect();
                format!("unknown job {name:?} (the service has {known:?})")
            })?;
        jobs.push(job.clone());
    }
    let every_second = Trigger::cron("* * * * * *")?;
    if args.pulse {
        // One lock per instance, so each instance runs it every second whoever else is up:
        // it shows whether this instance is firing.
        let name = format!("pulse_{}", args.instance);
        let lock = LockConfiguration::new(name.as_str(), Duration::from_secs(3), Duration::ZERO)?;
        jobs.push(Job::new(name, every_second.clone(), record_once).with_lock(lock));
    }
    if args.chaos_jobs {
        jobs.extend(chaos_jobs()?);
    }
    if args.hog {
        // Its own lock, so it runs here whoever else is up; its first run holds its permit
        // until shutdown, and its later slots are refused by its own lease.
        let name = format!("hog_{}", args.instance);
        let lock = LockConfiguration::new(name.as_str(), Duration::from_secs(300), Duration::ZERO)?;
        jobs.push(
            Job::new(name, every_second.clone(), || {
                run_body(Duration::from_secs(300), OnCancel::Stop, false)
            })
            .with_lock(lock),
        );
    }
    for i in 0..args.load_jobs {
        let name = format!("load_{i:03}");
        let lock = LockConfiguration::new(name.as_str(), Duration::from_secs(10), Duration::ZERO)?;
        jobs.push(Job::new(name, every_second.clone(), record_once).with_lock(lock));
    }
    if jobs.is_empty() {
        return Err("no jobs: give --jobs, --pulse, --chaos-jobs, --load-jobs or --hog".into());
    }
    Ok(jobs)
}

/// The chaos suite's shared jobs (`tests/chaos.rs`; each instance adds its own with `--pulse`).
fn chaos_jobs() -> Result<Vec<Job>, BoxError> {
    // Every second, `fire_once` with the default grace (one period): after an outage the
    // latest missed slot runs once, then the regular slots.
    let once = Job::new(
        "chaos_once",
        Trigger::cron("* * * * * *")?.with_misfire(MisfirePolicy::FireOnce)?,
        record_once,
    )
    .with_lock(LockConfiguration::new(
        "chaos_once",
        Duration::from_secs(10),
        Duration::ZERO,
    )?);
    // Every 6 s, a 4 s body on a 3 s lease kept alive: the lease outlives its first term
    // only by extensions, so a broken server shows in the keep-alive; the body stops when
    // `cancelled()` resolves, and ends before the next slot (no overrun warning of its own).
    let keep = Job::new(
        "chaos_keep",
        Trigger::fixed_rate(Duration::from_secs(6))?,
        || run_body(Duration::from_secs(4), OnCancel::Stop, false),
    )
    .with_lock(
        LockConfiguration::new("chaos_keep", Duration::from_secs(3), Duration::ZERO)?
            .with_keep_alive(true),
    );
    Ok(vec![once, keep])
}

// ---- Logging: stderr, plus counts of errors and warnings for the exit report. ----

struct CountLevels;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for CountLevels {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut named = JobNamed::default();
        attrs.record(&mut named);
        if let (Some(job), Some(span)) = (named.job, ctx.span(id)) {
            span.extensions_mut().insert(SpanJob(job));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        match *event.metadata().level() {
            Level::ERROR => ERRORS.fetch_add(1, Ordering::Relaxed),
            Level::WARN => WARNINGS.fetch_add(1, Ordering::Relaxed),
            _ => 0,
        };
        if *event.metadata().level() != Level::WARN {
            return;
        }
        let mut named = JobNamed::default();
        event.record(&mut named);
        let job = named.job.or_else(|| {
            ctx.event_scope(event)?
                .find_map(|span| span.extensions().get::<SpanJob>().map(|j| j.0.clone()))
        });
        if let Some(job) = job {
            let at = chrono::Utc::now().timestamp_millis();
            println!(
                "WARN job={job} at={at} {}",
                named.message.unwrap_or_default()
            );
        }
    }
}

/// `--die-after-parent`: kills this process with `SIGKILL` at the scheduler's event that the
/// parent's requests for its children are written (before the parent's end is recorded).
struct DieAfterParent;

/// The scheduler's message once a parent's requests are written (`dependencies.rs`).
const AFTER_REQUESTS_WRITTEN: &str = "after requests written";

impl<S: Subscriber> Layer<S> for DieAfterParent {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let Some(parent) = DIE_AFTER_PARENT.get() else {
            return;
        };
        let mut named = JobNamed::default();
        event.record(&mut named);
        if named.message.as_deref() != Some(AFTER_REQUESTS_WRITTEN)
            || named.job.as_deref() != Some(parent.as_str())
        {
            return;
        }
        println!(
            "DYING job={parent} slot={}",
            named.slot.as_deref().unwrap_or("none")
        );
        // A SIGKILL, as a crash or the OOM killer would end it: no unwinding, no destructors;
        // the process ends inside this call (`kill` exits only after the signal is sent).
        let pid = std::process::id().to_string();
        let sent = std::process::Command::new("kill")
            .args(["-9", &pid])
            .status();
        eprintln!("fault-service: kill -9 {pid} did not end the process: {sent:?}");
        std::process::abort();
    }
}

/// The job a span (the scheduler's `fire` span) names.
struct SpanJob(String);

/// The `job` (else `lock`), `message` and `slot` fields of an event or span.
#[derive(Default)]
struct JobNamed {
    job: Option<String>,
    message: Option<String>,
    slot: Option<String>,
}

impl Visit for JobNamed {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record(field, format!("{value:?}"));
    }
}

impl JobNamed {
    fn record(&mut self, field: &Field, value: String) {
        match field.name() {
            "job" => self.job = Some(value),
            "lock" if self.job.is_none() => self.job = Some(value),
            "message" => self.message = Some(value),
            "slot" => self.slot = Some(value),
            _ => {}
        }
    }
}

fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .with_filter(filter),
        )
        .with(CountLevels.with_filter(LevelFilter::WARN))
        .with(DieAfterParent.with_filter(LevelFilter::INFO))
        .init();
}

fn fail(what: &str, error: &dyn Error) -> ExitCode {
    eprintln!("fault-service: {what}: {}", chain(error));
    ExitCode::from(EXIT_CONFIG)
}

/// The value of `scheduled_clock_offset_seconds` for `instance` in the exporter's text, in ms.
fn offset_gauge_ms(
    handle: &metrics_exporter_prometheus::PrometheusHandle,
    instance: &str,
) -> Option<f64> {
    let series = format!(
        "{}{{{}=\"{instance}\"}} ",
        lock_core::metrics::CLOCK_OFFSET_SECONDS,
        lock_core::metrics::INSTANCE_LABEL
    );
    handle
        .render()
        .lines()
        .find_map(|line| line.strip_prefix(&series)?.trim().parse::<f64>().ok())
        .map(|seconds| seconds * 1e3)
}

/// The lock acquires this instance asked for, every job's `scheduled_lock_attempts_total`.
fn lock_attempts(handle: &metrics_exporter_prometheus::PrometheusHandle) -> u64 {
    let series = format!("{}{{", lock_core::metrics::LOCK_ATTEMPTS_TOTAL);
    handle
        .render()
        .lines()
        .filter(|line| line.starts_with(&series))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    init_logging();
    // A recorder, so the metrics the scheduler records can be read back and reported.
    let metrics = match metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder() {
        Ok(handle) => handle,
        Err(e) => return fail("cannot install the metrics recorder", &e),
    };
    // Installed first, so a SIGTERM that arrives during start-up is a graceful stop too.
    let signals = match Signals::new() {
        Ok(signals) => signals,
        Err(e) => return fail("cannot install signal handlers", &e),
    };
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("fault-service: {e}\n{USAGE}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if let Some(parent) = &args.die_after_parent {
        let _ = DIE_AFTER_PARENT.set(parent.clone());
    }
    if let Some(path) = &args.fail_while {
        let _ = FAIL_WHILE.set(path.clone());
    }
    let provider = match args
        .backend
        .lock_provider(&args.lock_table, args.schema)
        .await
    {
        Ok(provider) => provider,
        Err(e) => return fail("cannot open the lock provider", &e),
    };
    match RunsTable::open(&args.runs, &args.runs_table).await {
        Ok(runs) => {
            let _ = RUNS.set(runs);
        }
        Err(e) => return fail("cannot open the runs table", &*e),
    }
    let jobs = match jobs(&args) {
        Ok(jobs) => jobs,
        Err(e) => return fail("bad job configuration", &*e),
    };
    // Opens the pool's connections now (the jobs' first fires come all at once): the clock-skew
    // scenario measures how close to its slot every run starts, the first ones included, and
    // a fresh connection costs a connect and a prepare.
    let warm_up = (0..jobs.len().min(4)).map(|_| provider.database_time());
    if let Err(e) = futures_util::future::try_join_all(warm_up).await {
        return fail("cannot reach the lock database", &e);
    }
    let mut builder = Scheduler::builder()
        .lock_provider(provider)
        .instance_id(args.instance.as_str())
        .shutdown_timeout(args.shutdown_timeout)
        .jobs(jobs)
        .overrides_from_env();
    if let Some(timeout) = args.operation_timeout {
        builder = builder.operation_timeout(timeout);
    }
    if let Some(n) = args.max_concurrent_runs {
        builder = builder.max_concurrent_runs(n);
    }
    if args.share_jobs {
        builder = builder.share_jobs(true);
    }
    if let Some(every) = args.heartbeat {
        builder = builder.heartbeat_interval(every);
    }
    if let Some(ahead) = args.acquire_ahead {
        builder = builder.acquire_ahead(ahead);
    }
    let scheduler = match builder.start().await {
        Ok(scheduler) => scheduler,
        Err(e) => return fail("cannot start the scheduler", &e),
    };
    // The instance's own wall clock, so a test can check that `faketime` took effect.
    println!(
        "READY {} {}",
        args.instance,
        chrono::Utc::now().timestamp_millis()
    );
    let gauge = offset_gauge_ms(&metrics, &args.instance)
        .map_or_else(|| "none".to_owned(), |ms| format!("{ms:.3}"));
    println!(
        "CLOCK {} offset_ms={:.3} gauge_ms={gauge}",
        args.instance,
        scheduler.clock_offset().as_seconds_f64() * 1e3,
    );
    if let Err(e) = scheduler.run_until(signals.wait()).await {
        eprintln!("fault-service: shutdown failed: {}", chain(&e));
        return ExitCode::FAILURE;
    }
    println!(
        "EXIT errors={} warnings={} attempts={}",
        ERRORS.load(Ordering::Relaxed),
        WARNINGS.load(Ordering::Relaxed),
        lock_attempts(&metrics)
    );
    ExitCode::SUCCESS
}

/// SIGTERM and SIGINT.
struct Signals {
    terminate: tokio::signal::unix::Signal,
    interrupt: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Signals {
            terminate: signal(SignalKind::terminate())?,
            interrupt: signal(SignalKind::interrupt())?,
        })
    }

    async fn wait(mut self) {
        let name = tokio::select! {
            _ = self.terminate.recv() => "SIGTERM",
            _ = self.interrupt.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "stopping gracefully");
    }
}
