//! What the run history (`SchedulerBuilder::history`) costs per run, per provider.
//!
//! `cargo bench -p benchmarks --bench history_cost` runs the full measurement; without
//! `--bench` (as under `cargo test`) it is a short smoke pass.
//!
//! A run with history writes two more statements than a run without: the start row after the
//! acquire (before the body) and the end after the release. Interleaved, on one provider and
//! table of the bench's own:
//! - `cycle`: `acquire` + `release`, what every fire costs;
//! - `cycle + history`: `acquire` + `run_started` + `release` + `run_ended`, what a fire with
//!   history costs.
//!
//! No target: the figure is what an operator pays for the history, printed as the median
//! difference per run and the ratio of the means. SQLite runs on a file in a temporary
//! directory; PostgreSQL, MariaDB and Redis at `LOCK_TEST_POSTGRES_URL` / `LOCK_TEST_MYSQL_URL` /
//! `LOCK_TEST_REDIS_URL` (skipped unless `CI` when unreachable; on Redis the "table" is a key
//! prefix of the bench's own, its keys deleted at the end).

use lock_cluster::ClusterProvider;
use std::sync::Arc;
use std::time::{Duration, Instant};

use benchmarks::stats::{comparison_line, median_difference_line};
use benchmarks::{Mode, Samples, Unit};
use lock_cluster::{RunEnd, RunStart, RunState};
use lock_core::{AcquireOutcome, FireKind, testkit};
use lock_providers::{OpenOptions, SchemaAction};

fn main() {
    let mode = Mode::from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = format!("sqlite://{}", dir.path().join("history.db").display());
    println!("history_cost ({} mode)", mode.name());
    runtime.block_on(async {
        for (backend, url) in [
            ("postgres", test_support::db::postgres_url()),
            ("mysql", test_support::db::mysql_url()),
            ("sqlite", sqlite),
            ("redis", test_support::db::redis_url()),
        ] {
            measure(backend, &url, mode).await;
        }
    });
}

async fn measure(backend: &str, url: &str, mode: Mode) {
    let table = test_support::table::unique_table("bench_history");
    let _cleanup = cleanup(backend, &table);
    let options = OpenOptions::new()
        .table(&table)
        .schema(SchemaAction::Create);
    let opened = options.open(url).await;
    let Some(opened) = test_support::skip::or_unreachable(backend, url, opened) else {
        return;
    };
    let provider: &dyn ClusterProvider = opened.provider().as_ref();
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let name: Arc<str> = "history_cost".into();
    let request = testkit::request(&name, "bench:1:aa", Duration::from_secs(60), None);
    let samples = mode.pick(2_000, 20);
    let mut cycle = Samples::new("cycle (acquire + release)");
    let mut with_history = Samples::new("cycle + history (+ run start and end)");
    for i in 0..samples * 2 {
        let started = Instant::now();
        let AcquireOutcome::Acquired(lease) = provider.acquire(&request).await.expect("acquire")
        else {
            panic!("the bench's own lock was refused");
        };
        let history = i % 2 == 1;
        let run = if history {
            let start = RunStart {
                job: "history_cost".into(),
                slot: None,
                fire_kind: FireKind::Scheduled,
                instance_id: "bench:1:aa".into(),
                fence: lease.fence(),
                attempt: 1,
                params: Default::default(),
            };
            Some(store.run_started(&start).await.expect("run start"))
        } else {
            None
        };
        assert!(
            provider
                .release(&lease, Duration::ZERO)
                .await
                .expect("release")
        );
        if let Some(id) = run {
            store
                .run_ended(&RunEnd::new(id, RunState::Succeeded, None))
                .await
                .expect("run end");
            with_history.record(started);
        } else {
            cycle.record(started);
        }
    }
    println!("{backend} ({}):", provider.describe());
    cycle.print(Unit::Millis);
    with_history.print(Unit::Millis);
    comparison_line(
        &format!("{backend}: with history / without"),
        &with_history,
        &cycle,
    );
    median_difference_line(
        &format!("{backend}: history adds per run (median difference)"),
        &with_history,
        &cycle,
        Unit::Millis,
    );
    if let Some(redis) = opened.downcast_ref::<lock_provider_redis::RedisLockProvider>() {
        delete_redis_keys(redis).await;
    }
    opened.close().await;
}

/// The bench's lock and every operations key of its prefix.
async fn delete_redis_keys(provider: &lock_provider_redis::RedisLockProvider) {
    use lock_provider_redis::redis;
    let mut conn = provider.connection().clone();
    let prefix = &provider.config().key_prefix;
    let mut keys = vec![provider.key("history_cost")];
    for what in [
        "ids",
        "runs",
        "runs:started",
        "runs:by_job",
        "runs:last",
        "runs:succeeded",
    ] {
        keys.push(format!("{{{prefix}:ops}}:{what}"));
    }
    let deleted: redis::RedisResult<i64> =
        redis::cmd("DEL").arg(&keys).query_async(&mut conn).await;
    if let Err(e) = deleted {
        eprintln!("could not delete the bench's Redis keys {keys:?}: {e}");
    }
}

fn cleanup(backend: &str, table: &str) -> Option<test_support::table::Cleanup> {
    // The lock table and the operations tables next to it.
    match backend {
        "postgres" => Some(test_support::table::drop_postgres_table(table)),
        "mysql" => Some(test_support::table::drop_mysql_table(table)),
        _ => None,
    }
}
