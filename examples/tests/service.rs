//! The complete example, `service`, as two replicas of one service started at once on a fresh
//! PostgreSQL schema: one of them runs the migration, both start their schedulers only after it
//! is recorded done, every slot of `write_report` runs once across both, the dashboard under
//! `/ops` and `/metrics` answer on each, and SIGTERM stops both with exit 0 and their leases
//! released in the database.

use scheduled_locks::cluster::ClusterProvider;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use scheduled_locks::cluster::RunState;
use scheduled_locks::provider::LockProvider;
use scheduled_locks::sqlx::SqlxLockProvider;
use scheduled_locks::sqlx::sqlx::{self, PgPool};
use test_support::http::get;
use test_support::process::{Process, eventually, signal};

/// The test database's URL with `search_path` set to `schema`: the service's table, the lock
/// table and the operations tables all land there.
fn in_schema(url: &str, schema: &str) -> String {
    let join = if url.contains('?') { '&' } else { '?' };
    format!("{url}{join}options[search_path]={schema}")
}

/// A replica once it listens, with what it printed at start.
struct Replica {
    process: Process,
    instance: String,
    migration: String,
    address: String,
}

fn spawn(name: &str, url: &str) -> Process {
    Process::spawn(
        name,
        Command::new(env!("CARGO_BIN_EXE_service"))
            .args(["--database-url", url, "--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "info"),
    )
    .show_output_if("SHOW_OUTPUT")
}

async fn ready(mut process: Process) -> Replica {
    let stdout = process.stdout.clone();
    let listening = process
        .wait_for_line(&stdout, Duration::from_secs(30), "listening", |l| {
            l.starts_with("listening on http://")
        })
        .await;
    let after = |prefix: &str| {
        let line = stdout
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line before listening:\n{}", stdout.text()));
        line[prefix.len()..].to_owned()
    };
    Replica {
        instance: after("instance "),
        migration: after("migration create_reports v1: "),
        address: listening["listening on http://".len()..].to_owned(),
        process,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_migrate_once_before_any_fire_then_run_serve_and_stop_on_sigterm() {
    let url = test_support::db::postgres_url();
    let Some(admin) =
        test_support::skip::or_unreachable("postgres", &url, PgPool::connect(&url).await)
    else {
        return;
    };
    let schema = test_support::table::unique_table("service");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    let _drop =
        test_support::table::postgres_cleanup(format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    let url = in_schema(&url, &schema);

    // Both at once: they race for the migration, as replicas of a deployment do.
    let started = [spawn("service-a", &url), spawn("service-b", &url)];
    let mut replicas = Vec::new();
    for process in started {
        replicas.push(ready(process).await);
    }

    // The migration is a plain CREATE TABLE: had both run it, one would have failed to start.
    let outcomes: Vec<&str> = replicas.iter().map(|r| r.migration.as_str()).collect();
    let migrator = match outcomes.as_slice() {
        ["ran", "already done"] => &replicas[0],
        ["already done", "ran"] => &replicas[1],
        other => panic!("exactly one replica runs the migration: {other:?}"),
    };
    let instances: BTreeSet<&str> = replicas.iter().map(|r| r.instance.as_str()).collect();
    assert_eq!(instances.len(), 2, "{instances:?}");

    let pool = PgPool::connect(&url).await.unwrap();
    let provider = SqlxLockProvider::postgres(pool.clone());

    // The run-once rows carry the scheduler's instance id: the executor was given it.
    let done = provider
        .read_lock("create_reports@v1:done")
        .await
        .unwrap()
        .expect("the migration's done marker");
    assert!(done.last_fire.is_some(), "marked done: {done:?}");
    assert_eq!(done.locked_by, migrator.instance, "{done:?}");
    let run_lock = provider
        .read_lock("create_reports@v1")
        .await
        .unwrap()
        .expect("the migration's run lock");
    // The run lock's last holder is the migrator, or the other replica when it took the lock
    // after the migration had ended and found it done there (both are correct runs of
    // `run_once`): either way one of the two schedulers' ids.
    assert!(
        instances.contains(run_lock.locked_by.as_str()),
        "{run_lock:?} not held by {instances:?}"
    );

    // The jobs write into the migrated table.
    let reports: Vec<(DateTime<Utc>, i64, String)> =
        eventually(Duration::from_secs(15), "four reports", || async {
            let rows: Vec<(DateTime<Utc>, i64, String)> =
                sqlx::query_as("SELECT slot, fence, instance_id FROM reports ORDER BY slot")
                    .fetch_all(&pool)
                    .await
                    .unwrap();
            (rows.len() >= 4).then_some(rows)
        })
        .await;
    for (slot, fence, instance) in &reports {
        assert!(
            instances.contains(instance.as_str()) && *fence > 0,
            "report of {slot}: fence {fence} by {instance}"
        );
    }
    let (status, listed) = get(&replicas[0].address, "/reports").unwrap();
    assert_eq!(status, 200, "{listed}");
    assert!(listed.contains("fence="), "{listed}");

    // Before the first fire: each scheduler started (its registry row) after the migration was
    // recorded done, and no run of write_report started earlier or failed (an insert into a
    // missing table, or into a slot written twice, fails the run).
    let ops = provider
        .cluster()
        .expect("the sqlx provider keeps operations tables");
    let registry = ops.instances().await.unwrap();
    for replica in &replicas {
        let row = registry
            .iter()
            .find(|row| row.instance.instance_id == replica.instance)
            .unwrap_or_else(|| panic!("{} is not in the registry", replica.instance));
        assert!(
            row.instance.started_at >= done.locked_at,
            "{}'s scheduler started at {}, before the migration was done at {}",
            replica.instance,
            row.instance.started_at,
            done.locked_at
        );
    }
    let runs = ops.history("write_report", 100).await.unwrap();
    assert!(!runs.is_empty(), "write_report has a history");
    let first = runs.iter().map(|run| run.started_at).min().unwrap();
    assert!(
        first >= done.locked_at,
        "a run started at {first}, before the migration was done at {}",
        done.locked_at
    );
    let failed: Vec<_> = runs
        .iter()
        .filter(|run| run.outcome == RunState::Failed)
        .collect();
    assert!(failed.is_empty(), "failed runs: {failed:#?}");
    let slots: BTreeSet<_> = runs.iter().map(|run| run.slot).collect();
    assert_eq!(slots.len(), runs.len(), "each slot ran once across both");

    // The dashboard under /ops sees both replicas; /metrics is served by the same app.
    let mut durations = 0.0;
    for replica in &replicas {
        for jobs_page in ["/ops", "/ops/"] {
            let (status, body) = get(&replica.address, jobs_page).unwrap();
            assert_eq!(status, 200, "GET {jobs_page}: {body}");
            assert!(body.contains("export_reports"), "GET {jobs_page}: {body}");
        }
        let (status, body) = get(&replica.address, "/ops/api/jobs").unwrap();
        assert_eq!(status, 200, "{body}");
        let jobs: Vec<serde_json::Value> = serde_json::from_str(&body).unwrap();
        let job = |name: &str| {
            jobs.iter()
                .find(|job| job["name"] == name)
                .unwrap_or_else(|| panic!("no {name} in /ops/api/jobs: {body}"))
        };
        job("export_reports");
        let live = &job("write_report")["live_instances"];
        for instance in &instances {
            assert!(
                live.as_array().unwrap().iter().any(|i| i == instance),
                "{instance} not live in {live}"
            );
        }

        let (status, metrics) = get(&replica.address, "/metrics").unwrap();
        assert_eq!(status, 200, "{metrics}");
        assert!(
            metrics.lines().any(|l| l.starts_with(
                r#"scheduled_job_next_fire_timestamp_seconds{scheduled_job="write_report"}"#
            )),
            "{metrics}"
        );
        durations += metrics
            .lines()
            .find_map(|l| {
                l.strip_prefix(
                    r#"scheduled_job_duration_seconds_count{scheduled_job="write_report"} "#,
                )
            })
            .map_or(0.0, |v| v.parse::<f64>().unwrap());
    }
    assert!(durations >= 1.0, "no write_report run in either /metrics");

    // SIGTERM while export_reports holds its lease (it exports one report per 300 ms).
    let held = eventually(
        Duration::from_secs(12),
        "export_reports to hold its lease",
        || async {
            provider
                .read_lock("export_reports")
                .await
                .unwrap()
                .filter(|row| row.held)
        },
    )
    .await;
    let sent = Instant::now();
    for replica in &replicas {
        assert!(signal(replica.process.id(), "TERM"), "kill -TERM");
    }
    for replica in &mut replicas {
        let status = replica
            .process
            .wait_exit(Duration::from_secs(5))
            .await
            .unwrap_or_else(|| {
                panic!(
                    "{} still running 5 s after SIGTERM:\n{}",
                    replica.process.name,
                    replica.process.stderr.text()
                )
            });
        let logs = replica.process.stderr.text();
        assert!(
            status.success(),
            "{}: exit {status}:\n{logs}",
            replica.process.name
        );
        assert!(logs.contains("stopped cleanly"), "{logs}");
        assert!(
            get(&replica.address, "/healthz").is_err(),
            "HTTP stopped too"
        );
    }
    assert!(
        sent.elapsed() < Duration::from_secs(5),
        "took {:?}",
        sent.elapsed()
    );

    // Released, not left to run out: the lease was kept alive at 10 s and ended at once.
    let row = provider
        .read_lock("export_reports")
        .await
        .unwrap()
        .expect("the lock row");
    assert!(!row.held, "released after SIGTERM: {row:?}");
    assert!(
        row.lock_until < held.lock_until,
        "released before its lease would have ended: {row:?} vs {held:?}"
    );
    let still_held: Vec<_> = provider
        .list_locks()
        .await
        .unwrap()
        .into_iter()
        .filter(|row| row.held)
        .collect();
    assert!(
        still_held.is_empty(),
        "held after both stopped: {still_held:#?}"
    );
    pool.close().await;
}
