//! What a scheduler's `start()` does on a real database file before the first fire: history
//! on by default, one INFO line saying what is on, run-once tasks finished first under the
//! scheduler's own instance id (a missing lock table at start: the PostgreSQL tests, where
//! start() meets it first).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_cluster::ClusterProvider;
use lock_core::{LockError, LockProvider};
use lock_provider_sqlite::SqliteLockProvider;
use lock_scheduler::{Job, Scheduler, Trigger};
use tokio::time::Instant;

/// Waits (bounded) until `done` holds; panics with `what` after 10 s.
async fn wait_for(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_is_on_by_default_where_the_provider_has_the_tables() {
    let (_dir, provider) = common::fresh_provider().await;
    let provider = Arc::new(provider);
    let job = Job::new(
        "report",
        Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(), // fires at once
        || async {},
    );
    // No `.history(..)`: the provider's tables exist, so runs are recorded.
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([job])
        .start()
        .await
        .expect("start");
    let store = provider.cluster().expect("sqlite keeps operations tables");
    wait_for("a recorded run of `report`", async || {
        store
            .history("report", 10)
            .await
            .expect("read history")
            .iter()
            .any(|run| run.ended_at.is_some())
    })
    .await;
    scheduler.shutdown().await.expect("shutdown");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_history_keeps_no_runs() {
    let (_dir, provider) = common::fresh_provider().await;
    let provider = Arc::new(provider);
    let (ran, ran_rx) = tokio::sync::oneshot::channel::<()>();
    let ran = Arc::new(Mutex::new(Some(ran)));
    let job = Job::new(
        "report",
        Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(), // fires at once
        move || {
            let ran = ran.clone();
            async move {
                ran.lock().unwrap().take().map(|tx| tx.send(()));
            }
        },
    );
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .no_history()
        .jobs([job])
        .start()
        .await
        .expect("start");
    ran_rx.await.expect("the job ran");
    scheduler.shutdown().await.expect("shutdown");
    // The run has ended and shutdown waited for it: a row would have been written by now.
    let store = provider.cluster().expect("sqlite keeps operations tables");
    assert_eq!(store.history("report", 10).await.expect("read"), []);
    assert!(
        scheduler
            .jobs()
            .iter()
            .all(|job| job.name != lock_scheduler::HOUSEKEEPING_JOB),
        "no housekeeping job without history"
    );
}

/// The one line `start()` logs at INFO, from logs captured on this (current) thread.
async fn start_line(provider: SqliteLockProvider) -> String {
    let (logs, guard) = test_support::logs::capture_at(tracing::Level::INFO);
    let scheduler = Scheduler::builder()
        .lock_provider(provider)
        .acquire_ahead(Duration::from_millis(40))
        .jobs([])
        .start()
        .await
        .expect("start");
    scheduler.shutdown().await.expect("shutdown");
    drop(guard);
    let text = logs.text();
    let lines: Vec<&str> = text
        .lines()
        .filter(|line| line.contains(" INFO ") && line.contains("scheduler started"))
        .collect();
    assert_eq!(lines.len(), 1, "one start line in:\n{text}");
    lines[0].to_owned()
}

#[tokio::test]
async fn the_start_line_says_what_is_on() {
    let (_dir, provider) = common::fresh_provider().await;
    let line = start_line(provider).await;
    for field in [
        " INFO ",
        r#"history="on, retention 7d""#,
        r#"registry="on""#,
        "acquire_ahead=40ms",
        "clock_offset_ms=",
    ] {
        assert!(line.contains(field), "{field} missing in: {line}");
    }
}

#[tokio::test]
async fn the_start_line_says_why_history_is_off_on_a_shedlock_table_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("locks.db");
    let connection = rusqlite::Connection::open(&path).expect("open");
    connection
        .execute_batch(
            "CREATE TABLE shedlock (name VARCHAR(64) NOT NULL PRIMARY KEY, \
             lock_until TEXT NOT NULL, locked_at TEXT NOT NULL, locked_by VARCHAR(255) NOT NULL)",
        )
        .expect("ShedLock's DDL");
    drop(connection);
    let line = start_line(SqliteLockProvider::open(&path).expect("open")).await;
    assert!(
        line.contains(r#"history="off: the operations tables (shedlock_instances, "#)
            && line.contains("run ensure_schema()"),
        "{line}"
    );
    assert!(line.contains(r#"registry="off: "#), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_once_task_finishes_before_the_first_fire_under_the_schedulers_instance_id() {
    let (_dir, provider) = common::fresh_provider().await;
    let provider = Arc::new(provider);
    let task_ended: Arc<Mutex<Option<Instant>>> = Arc::default();
    let first_fire: Arc<Mutex<Option<Instant>>> = Arc::default();
    let ended = task_ended.clone();
    let fired = first_fire.clone();
    // A job due at once: without the ordering, it would fire while the task still sleeps.
    let job = Job::new(
        "needs_migration",
        Trigger::fixed_rate(Duration::from_millis(50)).unwrap(),
        move || {
            let fired = fired.clone();
            async move {
                fired.lock().unwrap().get_or_insert_with(Instant::now);
            }
        },
    );
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id("billing-1")
        .run_once("migrate", "v1", move || async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            *ended.lock().unwrap() = Some(Instant::now());
            Ok::<_, std::io::Error>(())
        })
        .jobs([job])
        .start()
        .await
        .expect("start");
    let ended_at = task_ended
        .lock()
        .unwrap()
        .expect("start() waited for the task");
    wait_for("the job's first fire", async || {
        first_fire.lock().unwrap().is_some()
    })
    .await;
    scheduler.shutdown().await.expect("shutdown");
    let fired_at = first_fire.lock().unwrap().unwrap();
    assert!(
        fired_at > ended_at,
        "the first fire came {:?} before the run-once task ended",
        ended_at - fired_at
    );
    for row in ["migrate@v1", "migrate@v1:done"] {
        let record = provider
            .read_lock(row)
            .await
            .expect("read")
            .unwrap_or_else(|| panic!("no row {row}"));
        assert_eq!(record.locked_by, "billing-1", "holder of {row}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_once_task_fails_start_and_nothing_fires() {
    let (_dir, provider) = common::fresh_provider().await;
    let fires = Arc::new(Mutex::new(0));
    let counted = fires.clone();
    let job = Job::new(
        "needs_migration",
        Trigger::fixed_rate(Duration::from_millis(20)).unwrap(),
        move || {
            let counted = counted.clone();
            async move { *counted.lock().unwrap() += 1 }
        },
    );
    let error = Scheduler::builder()
        .lock_provider(provider)
        .run_once("migrate", "v1", || async {
            Err::<(), _>(std::io::Error::other("column users.email already exists"))
        })
        .jobs([job])
        .start()
        .await
        .expect_err("a failed run-once task fails start");
    assert!(
        matches!(&error, LockError::RunOnceFailed { task, .. } if task == "migrate@v1"),
        "{error:?}"
    );
    let source = std::error::Error::source(&error).expect("the task's error as source");
    assert_eq!(source.to_string(), "column users.email already exists");
    assert!(error.to_string().contains("no job fired"), "{error}");
    // Three of the job's periods: a job loop started by mistake would have fired.
    tokio::time::sleep(Duration::from_millis(60)).await;
    assert_eq!(*fires.lock().unwrap(), 0);
}
