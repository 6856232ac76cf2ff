//! What the run history says about a run, on a real database file: the body's own result
//! when shutdown asked it to cancel, one row per attempt of a retried fire, and the columns
//! that say so added by `ensure_schema()` to a history table from before them.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lock_cluster::{ClusterProvider, RunEnd, RunStart, RunState};
use lock_core::{FireKind, JobContext};
use lock_provider_sqlite::SqliteLockProvider;
use lock_scheduler::{Job, RunOutcome, Scheduler, Trigger};
use test_support::process::eventually;

const WAIT: Duration = Duration::from_secs(10);

/// A body that goes on after `cancelled()` resolved and finishes its work is recorded as
/// having succeeded, with `cancel_requested`: not `cancelled`, which reads "did not happen".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_finishes_after_shutdown_asked_is_recorded_succeeded_with_cancel_requested() {
    let (_dir, provider) = common::fresh_provider().await;
    let provider = Arc::new(provider);
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .shutdown_timeout(Duration::from_secs(20))
        .jobs([Job::new(
            "export",
            Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
            || async {
                JobContext::current().unwrap().cancelled().await;
                // The last of its work, done after shutdown asked.
                tokio::time::sleep(Duration::from_millis(200)).await;
            },
        )])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    eventually(WAIT, "the run started", || async {
        let runs = store.history("export", 1).await.unwrap();
        runs.first()
            .is_some_and(|r| r.outcome == RunState::Running)
            .then_some(())
    })
    .await;
    scheduler.shutdown().await.expect("the body ended in time");
    let runs = store.history("export", 5).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        (runs[0].outcome, runs[0].cancel_requested, runs[0].attempt),
        (RunState::Succeeded, true, 1),
        "{runs:?}"
    );
}

/// A body that stops because shutdown asked (an error after `cancelled()` resolved) is the
/// one recorded `cancelled`, with its error; an undisturbed run has no `cancel_requested`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_stops_when_shutdown_asks_is_recorded_cancelled_with_its_error() {
    let (_dir, provider) = common::fresh_provider().await;
    let provider = Arc::new(provider);
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .jobs([
            Job::new(
                "import",
                Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
                || async {
                    JobContext::current().unwrap().cancelled().await;
                    Err::<(), _>("interrupted at row 400")
                },
            ),
            Job::new(
                "quick",
                Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
                || async {},
            ),
        ])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    eventually(WAIT, "import running and quick done", || async {
        let import = store.history("import", 1).await.unwrap();
        let quick = store.history("quick", 1).await.unwrap();
        (import
            .first()
            .is_some_and(|r| r.outcome == RunState::Running)
            && quick
                .first()
                .is_some_and(|r| r.outcome == RunState::Succeeded))
        .then_some(())
    })
    .await;
    scheduler.shutdown().await.expect("the body ended in time");
    let import = &store.history("import", 1).await.unwrap()[0];
    assert_eq!(
        (import.outcome, import.cancel_requested),
        (RunState::Cancelled, true),
        "{import:?}"
    );
    assert_eq!(import.error.as_deref(), Some("interrupted at row 400"));
    let quick = &store.history("quick", 1).await.unwrap()[0];
    assert!(!quick.cancel_requested, "{quick:?}");
}

/// A fire that fails once and succeeds on its retry: two rows of the same slot and fence,
/// attempts 1 (failed) and 2 (succeeded).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_fire_leaves_one_row_per_attempt_numbered_from_one() {
    let (_dir, provider) = common::fresh_provider().await;
    let provider = Arc::new(provider);
    let job = Job::new(
        "flaky",
        Trigger::fixed_rate(Duration::from_secs(3600)).unwrap(),
        |ctx: JobContext| async move {
            if ctx.attempt() == 1 {
                Err("the feed was not ready")
            } else {
                Ok(())
            }
        },
    )
    .with_retries(1, Duration::from_millis(20));
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .jobs([job])
        .start()
        .await
        .unwrap();
    assert_eq!(
        scheduler.trigger("flaky").await.unwrap(),
        RunOutcome::Succeeded
    );
    scheduler.shutdown().await.unwrap();
    let store = provider.cluster().unwrap();
    let mut runs: Vec<_> = store
        .history("flaky", 10)
        .await
        .unwrap()
        .into_iter()
        // The manual run's rows: the scheduled fire at start is another fence.
        .filter(|r| r.slot.is_none())
        .collect();
    runs.reverse();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(
        runs.iter()
            .map(|r| (r.attempt, r.outcome))
            .collect::<Vec<_>>(),
        [(1, RunState::Failed), (2, RunState::Succeeded)]
    );
    assert_eq!(runs[0].fence, runs[1].fence, "one fire, one lease");
}

/// A history table made before `attempt`, `cancel_requested` and `params`, a control table
/// before `slot_at` and `params`: the scheduler's check reports them with the DDL,
/// `ensure_schema()` adds them and the index on the control table's, old rows read as
/// attempt 1 without cancellation nor parameters, and new rows keep them.
#[tokio::test]
async fn ensure_schema_adds_the_attempt_columns_to_an_old_history_table() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("locks.db");
    let connection = rusqlite::Connection::open(&path).expect("open");
    connection
        .execute_batch(
            "CREATE TABLE shedlock_runs (id INTEGER PRIMARY KEY AUTOINCREMENT, \
             job_name TEXT NOT NULL, slot_at TEXT NULL, fire_kind TEXT NOT NULL, \
             instance_id TEXT NOT NULL, fence INTEGER NOT NULL, started_at TEXT NOT NULL, \
             ended_at TEXT NULL, outcome TEXT NOT NULL, error_text TEXT NULL);
             CREATE TABLE shedlock_instances (instance_id TEXT NOT NULL, job_name TEXT NOT NULL, \
             lock_name TEXT NOT NULL, trigger_text TEXT NOT NULL, zone_name TEXT NULL, \
             next_fire TEXT NULL, host_name TEXT NOT NULL, pid INTEGER NOT NULL, \
             app_version TEXT NOT NULL, started_at TEXT NOT NULL, heartbeat_at TEXT NOT NULL, \
             clock_offset_ms INTEGER NOT NULL, heartbeat_ms INTEGER NOT NULL, \
             following_fire TEXT NULL, PRIMARY KEY (instance_id, job_name));
             CREATE TABLE shedlock_control (id INTEGER PRIMARY KEY AUTOINCREMENT, \
             job_name TEXT NOT NULL, request_kind TEXT NOT NULL, requested_at TEXT NOT NULL, \
             requested_by TEXT NOT NULL, claimed_by TEXT NULL, claimed_at TEXT NULL);
             INSERT INTO shedlock_runs (job_name, fire_kind, instance_id, fence, started_at, \
             ended_at, outcome) VALUES ('old', 'scheduled', 'a', 1, \
             '2026-01-01 00:00:00.000', '2026-01-01 00:00:01.000', 'succeeded');",
        )
        .expect("the history table of an older version");
    drop(connection);
    let provider = SqliteLockProvider::open(&path).expect("open");
    let store = provider.cluster().unwrap();
    match store.check().await {
        Err(lock_core::LockError::TableMissing { ddl, .. }) => assert!(
            ddl.contains(r#"ALTER TABLE "shedlock_control" ADD COLUMN slot_at TEXT NULL"#),
            "{ddl}"
        ),
        other => panic!("expected the missing columns, got {other:?}"),
    }
    provider.ensure_schema().await.expect("ensure_schema");
    provider.ensure_schema().await.expect("ensure_schema twice");
    store.check().await.expect("every column there");
    let connection = rusqlite::Connection::open(&path).expect("open");
    let index: Vec<String> = connection
        .prepare("SELECT name FROM pragma_index_info('shedlock_control_after')")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(index, ["job_name", "request_kind", "slot_at"]);
    drop(connection);
    let old = &store.history("old", 1).await.unwrap()[0];
    assert_eq!((old.attempt, old.cancel_requested), (1, false), "{old:?}");
    assert!(old.params.is_empty(), "{old:?}");
    let id = store
        .run_started(&RunStart {
            job: "old".into(),
            slot: None,
            fire_kind: FireKind::Manual,
            instance_id: "a".into(),
            fence: 2,
            attempt: 2,
            params: lock_core::Params::parse_pairs(["day=2026-12-01"]).unwrap(),
        })
        .await
        .unwrap();
    store
        .run_ended(&RunEnd::new(id, RunState::Succeeded, None).with_cancel_requested(true))
        .await
        .unwrap();
    let new = &store.history("old", 1).await.unwrap()[0];
    assert_eq!((new.attempt, new.cancel_requested), (2, true), "{new:?}");
    assert_eq!(new.params.get("day"), Some("2026-12-01"), "{new:?}");
}
