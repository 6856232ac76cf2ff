//! A job failing with an `anyhow` error under `RUST_BACKTRACE=1` (as in CI and containers)
//! shows as its message chain, `outer: middle: root cause`, and never with its backtrace: in
//! the run history, the dashboard's JSON, the `job failed` log line and from `TestFire`.
//!
//! Its own test binary without the libtest harness: the backtrace variables are set in `main`
//! before any thread exists, and reach no other test; the log subscriber is global.

mod common;

use lock_cluster::ClusterProvider;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use lock_cluster::RunState;
use lock_core::InMemoryLockProvider;
use lock_scheduler::testing::TestFire;
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::logs::CapturedLogs;
use test_support::process::eventually;

const CHAIN: &str = "outer: middle: root cause";
const JOB: &str = "fails_with_context";
const WAIT: Duration = Duration::from_secs(10);

fn main() {
    // SAFETY: the first statement of the process, before any thread (no runtime, no harness)
    // could read the environment.
    unsafe {
        std::env::set_var("RUST_BACKTRACE", "1");
        std::env::set_var("RUST_LIB_BACKTRACE", "1");
    }
    // Global, not per thread: the job fails on a worker thread of the runtime.
    let logs = CapturedLogs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(a_failed_run_shows_its_message_chain_without_a_backtrace(
            logs,
        ));
    println!("error_chain: ok");
}

fn failing() -> anyhow::Error {
    anyhow!("root cause").context("middle").context("outer")
}

async fn a_failed_run_shows_its_message_chain_without_a_backtrace(logs: CapturedLogs) {
    // The setting works: the error carries a backtrace, and `{:?}` would print it.
    let debug = format!("{:?}", failing());
    assert!(
        debug.contains("Stack backtrace"),
        "no backtrace was captured; the test would prove nothing: {debug}"
    );

    let job = Job::new(
        JOB,
        Trigger::fixed_rate(Duration::from_millis(200)).unwrap(),
        || async { Err::<(), _>(failing()) },
    );
    let provider = Arc::new(InMemoryLockProvider::new());
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .jobs([job.clone()])
        .start()
        .await
        .expect("start");
    let store = provider
        .cluster()
        .expect("the in-memory provider keeps history");
    let run = eventually(WAIT, "a finished run", || async {
        let runs = store.history(JOB, 10).await.expect("history");
        runs.into_iter().find(|run| run.ended_at.is_some())
    })
    .await;
    scheduler.shutdown().await.expect("shutdown");

    assert_eq!(run.outcome, RunState::Failed);
    let error = run.error.expect("a failed run keeps its error");
    assert_eq!(error, CHAIN);
    assert!(!error.to_lowercase().contains("backtrace"), "{error}");

    let address = common::serve_app(lock_dashboard::router(provider)).await;
    let runs = common::json(address, &format!("/api/jobs/{JOB}/runs")).await;
    // The run read above, by its id: the job fires every 200 ms, so a newer run (cancelled by
    // the shutdown) can be the newest one listed.
    let shown = runs["runs"]
        .as_array()
        .and_then(|all| all.iter().find(|shown| shown["id"] == run.id))
        .unwrap_or_else(|| panic!("run {} is not listed: {runs}", run.id));
    assert_eq!(shown["outcome"], "failed", "{runs}");
    assert_eq!(shown["error"], CHAIN, "{runs}");

    let tested = TestFire::new().run_job(&job).await.unwrap_err();
    assert_eq!(tested.to_string(), CHAIN);

    let logs = logs.text();
    let failed = logs
        .lines()
        .find(|line| line.contains("job failed"))
        .unwrap_or_else(|| panic!("no `job failed` line: {logs}"));
    assert!(failed.contains(&format!("error={CHAIN}")), "{failed}");
    assert!(!logs.to_lowercase().contains("backtrace"), "{logs}");
}
