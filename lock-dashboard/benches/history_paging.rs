//! How fast the dashboard's pages are with a big cluster: 1,000 registered jobs and 1,000,000
//! history rows in PostgreSQL, each page fetched over HTTP from a dashboard served on
//! loopback (as a browser or a script would), one at a time and then by 200 clients at once.
//!
//! `cargo bench -p lock-dashboard --bench history_paging` runs the full measurement; without
//! `--bench` (as under `cargo test`) it is a smoke pass on 1,000 rows, 50 jobs and 8 clients.
//!
//! Targets:
//! - a page of a job's history (the HTML Job page and `/api/jobs/{name}/runs`, newest or deep
//!   in the history) under 100 ms at p99: keyset paging on the history's `(job_name, id)`
//!   index reads one page's rows whatever the depth;
//! - the Jobs page (every job's last run and last success, one index seek per job) under 50 ms
//!   at p99;
//! - 200 clients fetching the Jobs page at once (each one request after another, a new
//!   connection each) served at 500 requests a second or more.
//!
//! The floor, measured in the same run the same ways: `/api/locks`, the cheapest page that goes
//! to the database (its clock and the lock table, no history).

use lock_cluster::ClusterProvider;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::TimeDelta;
use lock_cluster::{Heartbeat, InstanceInfo, JobRegistration};
use lock_core::LockProvider;
use lock_provider_postgres::PostgresLockProvider;
use test_support::stats::verdict;
use test_support::{Mode, Samples, Unit};

/// The p99 a history page must stay under.
const TARGET: Duration = Duration::from_millis(100);

/// The p99 the Jobs page must stay under.
const JOBS_TARGET: Duration = Duration::from_millis(50);

/// The Jobs page requests a second 200 clients must be served at, at least.
const THROUGHPUT_TARGET: f64 = 500.0;

fn main() {
    let mode = Mode::from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(bench(mode));
}

async fn bench(mode: Mode) {
    let rows: i64 = mode.pick(1_000_000, 1_000);
    let jobs: usize = mode.pick(1_000, 50);
    let samples = mode.pick(200, 5);
    let clients: usize = mode.pick(200, 8);
    let per_client: usize = mode.pick(10, 2);
    println!(
        "history_paging ({} mode): {rows} history rows, {jobs} jobs, {clients} clients, PostgreSQL",
        mode.name()
    );
    let url = test_support::db::postgres_url();
    let connected = PostgresLockProvider::connect(&url).await;
    let Some(provider) = test_support::skip::or_unreachable("postgres", &url, connected) else {
        return;
    };
    let table = test_support::table::unique_table("bench_dashboard");
    let _cleanup = test_support::table::drop_postgres_table(&table);
    let provider = Arc::new(provider.with_table(&table).expect("table"));
    provider.ensure_schema().await.expect("ensure_schema");
    let busy_before = fill(&provider, &table, rows, jobs).await;

    let app = lock_dashboard::router(Arc::clone(&provider));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });

    let pages = [
        ("Job page, newest runs", "/jobs/busy".to_owned(), true),
        (
            "Job page, deep (near the oldest runs)",
            format!("/jobs/busy?before={busy_before}"),
            true,
        ),
        (
            "runs JSON, deep",
            format!("/api/jobs/busy/runs?before={busy_before}"),
            true,
        ),
        ("Jobs page (every job)", "/".to_owned(), true),
        ("/api/jobs (every job, JSON)", "/api/jobs".to_owned(), false),
        ("/api/locks (floor)", "/api/locks".to_owned(), false),
    ];
    let mut measured = Vec::new();
    for (label, path, _) in &pages {
        // One warm-up fetch: connections in the pool, plans cached.
        fetch(address, path).await;
        let mut times = Samples::new(*label);
        for _ in 0..samples {
            let started = Instant::now();
            fetch(address, path).await;
            times.record(started);
        }
        times.print(Unit::Millis);
        measured.push(times);
    }
    let floor = measured
        .last()
        .expect("the floor")
        .percentile_in(0.99, Unit::Millis);
    for ((label, path, judged), times) in pages.iter().zip(&measured) {
        if *judged {
            let target = if path == "/" { JOBS_TARGET } else { TARGET };
            let p99 = times.percentile_in(0.99, Unit::Millis);
            println!(
                "  {label}: p99 {p99:.1} ms (floor /api/locks {floor:.1} ms), target < {} ms: {}",
                target.as_millis(),
                verdict(p99 < target.as_secs_f64() * 1000.0, mode.judged())
            );
        }
    }

    reads(&provider, samples).await;

    let jobs_page = load(address, "/", clients, per_client).await;
    let floor = load(address, "/api/locks", clients, per_client).await;
    for served in [&jobs_page, &floor] {
        served.latencies.print(Unit::Millis);
    }
    println!(
        "  Jobs page, {clients} clients at once: {:.0} requests/s ({} of {} answered 200; \
         floor /api/locks {:.0} requests/s), target >= {THROUGHPUT_TARGET:.0}/s: {}",
        jobs_page.per_second,
        jobs_page.ok,
        clients * per_client,
        floor.per_second,
        verdict(
            jobs_page.per_second >= THROUGHPUT_TARGET && jobs_page.ok == clients * per_client,
            mode.judged()
        )
    );
}

/// The Jobs page's reads one by one through the store, for context: what the page spends
/// where (it sends them side by side).
async fn reads(provider: &PostgresLockProvider, samples: usize) {
    let store = provider.cluster().expect("operations tables");
    macro_rules! time {
        ($label:literal, $read:expr) => {{
            let mut times = Samples::new($label);
            for _ in 0..samples {
                let started = Instant::now();
                $read.await.expect($label);
                times.record(started);
            }
            times.print(Unit::Millis);
        }};
    }
    time!("  read: last_runs (every job)", store.last_runs());
    time!("  read: last_successes (every job)", store.last_successes());
    time!("  read: registry", store.registry());
    time!("  read: control", store.control());
    time!("  read: list_locks", provider.list_locks());
}

/// What [`load`] measured.
struct Served {
    /// Requests answered 200 a second, over the whole run.
    per_second: f64,
    /// How many were answered 200.
    ok: usize,
    /// Each request's time, as its client saw it.
    latencies: Samples,
}

/// `clients` clients at once, each fetching `path` `per_client` times one after another (a new
/// connection each, as a browser's refresh or a script does).
async fn load(address: SocketAddr, path: &str, clients: usize, per_client: usize) -> Served {
    let started = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let path = path.to_owned();
            tokio::task::spawn_blocking(move || {
                (0..per_client)
                    .map(|_| {
                        let sent = Instant::now();
                        let ok = matches!(test_support::http::get(address, &path), Ok((200, _)));
                        (ok, sent.elapsed())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut latencies = Samples::new(format!("{path}, {clients} clients at once"));
    let mut ok = 0;
    for task in tasks {
        for (answered, took) in task.await.expect("client thread") {
            ok += usize::from(answered);
            latencies.push(took);
        }
    }
    Served {
        per_second: ok as f64 / started.elapsed().as_secs_f64(),
        ok,
        latencies,
    }
}

/// `GET path`, asserting 200.
async fn fetch(address: SocketAddr, path: &str) {
    let path = path.to_owned();
    let (status, body) =
        tokio::task::spawn_blocking(move || test_support::http::get(address, &path))
            .await
            .expect("request thread")
            .expect("GET");
    assert_eq!(status, 200, "{body}");
}

/// Registers `jobs` jobs (`busy` and `job_1`...) on one instance and writes `rows` runs, nine
/// in ten of them `busy`'s; returns the id with 1,000 of `busy`'s runs (or a tenth in a smoke
/// run) below it.
async fn fill(provider: &PostgresLockProvider, table: &str, rows: i64, jobs: usize) -> i64 {
    let store = provider.cluster().expect("operations tables");
    let now = provider.database_time().await.expect("now");
    let registration = |name: String| JobRegistration {
        lock_name: name.clone(),
        name,
        trigger: "fixed rate 60s".to_owned(),
        zone: None,
        next_fire: Some(now + TimeDelta::seconds(60)),
        following_fire: Some(now + TimeDelta::seconds(120)),
    };
    let mut registered = vec![registration("busy".to_owned())];
    registered.extend((1..jobs).map(|i| registration(format!("job_{i}"))));
    store
        .heartbeat(&Heartbeat {
            instance: InstanceInfo {
                instance_id: "bench-instance".to_owned(),
                host: "bench".to_owned(),
                pid: std::process::id(),
                version: "0.1.0".to_owned(),
                started_at: now,
                clock_offset_ms: 0,
                heartbeat_ms: 3_600_000,
            },
            jobs: registered,
        })
        .await
        .expect("heartbeat");
    let client = provider.pool().get().await.expect("a connection");
    let others = jobs as i64 - 1;
    client
        .batch_execute(&format!(
            "INSERT INTO {table}_runs (job_name, slot_at, fire_kind, instance_id, fence, \
             started_at, ended_at, outcome, error_text) \
             SELECT CASE WHEN g % 10 = 0 THEN 'job_' || (1 + g / 10 % {others}) ELSE 'busy' END, \
                    at, 'scheduled', 'bench-instance', g, at + interval '15 milliseconds', \
                    at + interval '135 milliseconds', \
                    CASE WHEN g % 50 = 0 THEN 'failed' ELSE 'succeeded' END, \
                    CASE WHEN g % 50 = 0 THEN 'error in run ' || g END \
             FROM (SELECT g, timezone('utc', now()) - ({rows} - g) * interval '1 second' AS at \
                   FROM generate_series(1, {rows}) AS g) AS runs; \
             ANALYZE {table}_runs"
        ))
        .await
        .expect("insert the history");
    let depth = (rows / 100).min(1_000);
    let row = client
        .query_one(
            &format!(
                "SELECT id FROM {table}_runs WHERE job_name = 'busy' ORDER BY id OFFSET $1 LIMIT 1"
            ),
            &[&depth],
        )
        .await
        .expect("a deep id");
    row.get(0)
}
