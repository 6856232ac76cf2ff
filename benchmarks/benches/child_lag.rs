//! Dependent jobs: how long after its parent's end a child starts, across processes, on
//! PostgreSQL (issue 35: p99 under one second).
//!
//! `cargo bench -p benchmarks --bench child_lag` runs three instances for 30 s; without
//! `--bench` (as under `cargo test`) a 4 s smoke pass.
//!
//! Three processes run the same two jobs: `lag_parent`, every 500 ms, and `lag_child`,
//! `Trigger::after("lag_parent")`. The parent's body ends by writing a mark (its slot, the
//! database's `clock_timestamp()`), the child's body starts by writing one: the lag is the
//! difference of the two, both on the database's clock, whichever instances ran them. Every
//! parent run of the window must have exactly one child run (a missing or second child is
//! counted and fails the run).

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use benchmarks::stats::verdict;
use benchmarks::{Mode, Samples, Unit};
use lock_core::JobContext;
use lock_provider_postgres::PostgresLockProvider;
use lock_provider_postgres::tokio_postgres::{self, NoTls};
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::process::expect_success;

const INSTANCE_FLAG: &str = "--child-lag-instance";
const INSTANCES: usize = 3;
const PERIOD: Duration = Duration::from_millis(500);
/// p99 of the child's start after its parent's end, in milliseconds.
const P99_TARGET_MS: f64 = 1000.0;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if let Some(at) = args.iter().position(|a| a == INSTANCE_FLAG) {
        let [table, marks, index, secs] = &args[at + 1..at + 5] else {
            panic!("{INSTANCE_FLAG} TABLE MARKS INDEX SECS");
        };
        let secs = secs.parse().expect("seconds");
        runtime.block_on(instance(table, marks, index, secs));
        return;
    }
    runtime.block_on(bench(Mode::from_args()));
}

async fn client() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&benchmarks::postgres::url(), NoTls)
        .await
        .expect("a connection for the marks");
    tokio::spawn(connection);
    client
}

async fn bench(mode: Mode) {
    let table = format!("bench_child_lag_{}", std::process::id());
    let Some(provider) = benchmarks::postgres::connect_or_skip(&table).await else {
        return;
    };
    provider.ensure_schema().await.expect("ensure_schema");
    let marks = format!("{table}_marks");
    let db = client().await;
    db.batch_execute(&format!(
        "CREATE TABLE {marks} (slot_ms BIGINT NOT NULL, kind TEXT NOT NULL, \
         at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())"
    ))
    .await
    .expect("the marks table");
    let secs: u64 = match mode {
        Mode::Full => 30,
        Mode::Smoke => 4,
    };
    let exe = std::env::current_exe().expect("own executable");
    let instances: Vec<_> = (0..INSTANCES)
        .map(|index| {
            Command::new(&exe)
                .args([
                    INSTANCE_FLAG,
                    &table,
                    &marks,
                    &index.to_string(),
                    &secs.to_string(),
                ])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn an instance")
        })
        .collect();
    for instance in instances {
        let out = instance.wait_with_output().expect("instance output");
        expect_success(&out, "an instance");
    }
    // Each parent run with its children's starts: lag in ms on the database's clock.
    let rows = db
        .query(
            &format!(
                "SELECT p.slot_ms, \
                        COUNT(c.at)::BIGINT, \
                        (EXTRACT(EPOCH FROM MIN(c.at) - p.at) * 1000)::FLOAT8 \
                 FROM {marks} p LEFT JOIN {marks} c ON c.slot_ms = p.slot_ms AND c.kind = 'child' \
                 WHERE p.kind = 'parent' GROUP BY p.slot_ms, p.at ORDER BY p.slot_ms"
            ),
            &[],
        )
        .await
        .expect("the marks");
    // The last parent runs may have ended as the instances stopped: their children are not
    // counted missing.
    let last_child = rows
        .iter()
        .filter(|r| r.get::<_, i64>(1) > 0)
        .map(|r| r.get::<_, i64>(0))
        .max()
        .unwrap_or(i64::MIN);
    let mut lags = Samples::new("child start after parent end");
    let (mut missing, mut twice) = (0, 0);
    for row in &rows {
        let (slot, children): (i64, i64) = (row.get(0), row.get(1));
        match children {
            0 if slot < last_child => missing += 1,
            0 => {}
            1 => lags.push_nanos(row.get::<_, f64>(2) * 1e6),
            _ => twice += 1,
        }
    }
    db.batch_execute(&format!("DROP TABLE {marks}; DROP TABLE IF EXISTS {table}"))
        .await
        .expect("drop the bench tables");
    println!(
        "child_lag ({} run): PostgreSQL at {}, {INSTANCES} processes, a parent every {PERIOD:?} \
         and its child (after = \"lag_parent\"), {secs} s; lag = the child's first statement \
         minus the parent's last, both clock_timestamp() of the database",
        mode.name(),
        benchmarks::postgres::redact(&benchmarks::postgres::url()),
    );
    lags.print(Unit::Millis);
    let p99 = lags.percentile_in(0.99, Unit::Millis);
    println!(
        "child lag p50 {:.1} ms, p99 {p99:.1} ms, max {:.1} ms over {} parent runs; target p99 < \
         {P99_TARGET_MS} ms: {}; ratio p99 / target {:.3}",
        lags.percentile_in(0.50, Unit::Millis),
        lags.max() / 1e6,
        lags.len(),
        verdict(p99 < P99_TARGET_MS, mode == Mode::Full),
        p99 / P99_TARGET_MS
    );
    assert!(!lags.is_empty(), "no child ran");
    assert_eq!(missing, 0, "parent runs without their child");
    assert_eq!(twice, 0, "parent runs whose child ran twice");
}

/// One instance: both jobs, for `secs`, then a graceful shutdown.
async fn instance(table: &str, marks: &str, index: &str, secs: u64) {
    let provider = PostgresLockProvider::connect(&benchmarks::postgres::url())
        .await
        .expect("an instance connects")
        .with_table(table)
        .expect("the bench table");
    let db = Arc::new(client().await);
    let mark = |kind: &'static str| {
        let (db, marks) = (db.clone(), marks.to_owned());
        move |ctx: JobContext| {
            let (db, marks) = (db.clone(), marks.clone());
            async move {
                let slot = ctx.scheduled_at().expect("a slot").timestamp_millis();
                if kind == "parent" {
                    // A little work before the end is marked.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                db.execute(
                    &format!("INSERT INTO {marks} (slot_ms, kind) VALUES ($1, $2)"),
                    &[&slot, &kind],
                )
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
            }
        }
    };
    let scheduler = Scheduler::builder()
        .lock_provider(provider)
        .instance_id(format!("child-lag-{index}"))
        .jobs([
            Job::new(
                "lag_parent",
                Trigger::fixed_rate(PERIOD).expect("a period"),
                mark("parent"),
            ),
            Job::new(
                "lag_child",
                Trigger::after("lag_parent").expect("a parent"),
                mark("child"),
            ),
        ])
        .start()
        .await
        .expect("the scheduler starts");
    scheduler
        .run_until(tokio::time::sleep(Duration::from_secs(secs)))
        .await
        .expect("a clean shutdown");
}
