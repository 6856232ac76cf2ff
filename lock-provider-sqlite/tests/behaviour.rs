//! SQLite-specific behaviour beyond the conformance suite: schema handling, errors, the stored
//! format, and exclusion between separate providers on one file.

mod common;

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use lock_core::{AcquireOutcome, FireSlot, LockError, LockProvider, RefusalReason, testkit};
use lock_provider_sqlite::rusqlite::Connection;
use lock_provider_sqlite::{ColumnNames, SqliteLockProvider};

const LONG: Duration = Duration::from_secs(300);

fn raw(provider: &SqliteLockProvider) -> Connection {
    let connection = Connection::open(provider.path()).unwrap();
    connection.busy_timeout(Duration::from_secs(5)).unwrap();
    connection
}

async fn acquired(
    provider: &SqliteLockProvider,
    name: &str,
    owner: &str,
) -> Option<lock_core::Lease> {
    let request = testkit::request(&name.into(), owner, LONG, None);
    match provider.acquire(&request).await.expect("acquire") {
        AcquireOutcome::Acquired(lease) => Some(lease),
        AcquireOutcome::Refused(_) => None,
    }
}

#[tokio::test]
async fn a_row_deleted_by_hand_is_recreated_by_the_next_acquire() {
    let (_dir, provider) = common::fresh_provider().await;
    let first = acquired(&provider, "nightly", "a").await.unwrap();
    provider.release(&first, Duration::ZERO).await.unwrap();
    raw(&provider)
        .execute("DELETE FROM shedlock WHERE name = 'nightly'", [])
        .unwrap();
    let lease = acquired(&provider, "nightly", "b")
        .await
        .expect("a deleted row must not leave the job dead");
    assert_eq!(
        lease.fence(),
        1,
        "a recreated row starts a new fence sequence"
    );
    let records = provider.list_locks().await.unwrap();
    assert_eq!(records.len(), 1);
    assert!(records[0].held && records[0].locked_by == "b");
}

#[tokio::test]
async fn a_missing_table_is_reported_with_its_ddl_and_ensure_schema_fixes_it() {
    let dir = tempfile::tempdir().unwrap();
    let provider = SqliteLockProvider::open(dir.path().join("locks.db")).unwrap();
    let request = testkit::request(&"job".into(), "a", LONG, None);
    let err = provider.acquire(&request).await.unwrap_err();
    match &err {
        LockError::TableMissing { table, ddl, source } => {
            assert_eq!(table, "shedlock");
            assert_eq!(*ddl, provider.create_table_sql());
            assert!(source.is_some(), "the driver's error is kept as the source");
        }
        other => panic!("expected TableMissing, got {other:?}"),
    }
    let text = err.to_string();
    assert!(
        text.contains("CREATE TABLE IF NOT EXISTS \"shedlock\"") && text.contains("WITHOUT ROWID"),
        "the message must carry the DDL: {text}"
    );
    // Every operation says the same, not only acquire.
    assert!(matches!(
        provider.list_locks().await,
        Err(LockError::TableMissing { .. })
    ));
    provider.ensure_schema().await.unwrap();
    assert!(acquired(&provider, "job", "a").await.is_some());
}

#[tokio::test]
async fn a_table_dropped_while_statements_are_cached_is_reported_as_missing() {
    let (_dir, provider) = common::fresh_provider().await;
    assert!(acquired(&provider, "job", "a").await.is_some());
    raw(&provider).execute_batch("DROP TABLE shedlock").unwrap();
    let err = acquired_err(&provider).await;
    assert!(matches!(err, LockError::TableMissing { .. }), "{err:?}");
}

async fn acquired_err(provider: &SqliteLockProvider) -> LockError {
    let request = testkit::request(&"job".into(), "b", LONG, None);
    provider.acquire(&request).await.unwrap_err()
}

#[tokio::test]
async fn bad_table_and_column_names_are_refused_at_construction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.db");
    for bad in [
        "shedlock; DROP TABLE users",
        "",
        "a.b.c",
        "1locks",
        "locks\"x",
        "aux.shedlock",
    ] {
        let err = SqliteLockProvider::open(&path)
            .unwrap()
            .with_table(bad)
            .unwrap_err();
        assert!(
            matches!(err, LockError::InvalidConfiguration(_)),
            "{bad:?}: {err:?}"
        );
    }
    let columns = ColumnNames {
        locked_by: "owner --".into(),
        ..ColumnNames::default()
    };
    let err = SqliteLockProvider::open(&path)
        .unwrap()
        .with_columns(columns)
        .unwrap_err();
    assert!(matches!(err, LockError::InvalidConfiguration(_)), "{err:?}");
}

#[tokio::test]
async fn lock_names_are_validated_before_anything_else() {
    // No table at all: the name check must come first.
    let dir = tempfile::tempdir().unwrap();
    let provider = SqliteLockProvider::open(dir.path().join("locks.db")).unwrap();
    let long = "n".repeat(65);
    let request = testkit::request(&long.as_str().into(), "a", LONG, None);
    assert!(matches!(
        provider.acquire(&request).await,
        Err(LockError::InvalidLockName { .. })
    ));
    assert!(matches!(
        provider.force_unlock("").await,
        Err(LockError::InvalidLockName { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_providers_on_one_file_exclude_each_other() {
    let (dir, first) = common::fresh_provider().await;
    let second = SqliteLockProvider::open(dir.path().join("locks.db")).unwrap();
    let lease = acquired(&first, "shared", "first").await.unwrap();
    let request = testkit::request(&"shared".into(), "second", LONG, None);
    match second.acquire(&request).await.unwrap() {
        AcquireOutcome::Refused(refusal) => {
            assert_eq!(refusal.reason, RefusalReason::Held);
            assert_eq!(refusal.locked_by.as_deref(), Some("first"));
            assert!(refusal.lock_until.unwrap() > Utc::now() + TimeDelta::seconds(200));
        }
        AcquireOutcome::Acquired(_) => panic!("two providers on one file both held the lock"),
    }
    assert!(first.release(&lease, Duration::ZERO).await.unwrap());
    let lease = acquired(&second, "shared", "second").await.unwrap();
    assert!(acquired(&first, "shared", "first").await.is_none());
    assert!(second.release(&lease, Duration::ZERO).await.unwrap());

    // And under contention: both run ShedLock's fuzz scenario on the same names at once.
    let name = testkit::unique_name("two-providers");
    let counter = std::sync::atomic::AtomicU64::new(0);
    let runs = std::sync::atomic::AtomicU64::new(0);
    let work = |provider: &SqliteLockProvider, owner: String| {
        let (name, counter, runs, provider) = (name.clone(), &counter, &runs, provider.clone());
        async move {
            use std::sync::atomic::Ordering::SeqCst;
            let request = testkit::request(&name, &owner, LONG, None);
            for _ in 0..200 {
                if let AcquireOutcome::Acquired(lease) = provider.acquire(&request).await.unwrap() {
                    let seen = counter.load(SeqCst);
                    tokio::task::yield_now().await;
                    counter.store(seen + 1, SeqCst);
                    runs.fetch_add(1, SeqCst);
                    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
                }
            }
        }
    };
    tokio::join!(work(&first, "p1".into()), work(&second, "p2".into()));
    let runs = runs.into_inner();
    assert!(runs > 0);
    assert_eq!(counter.into_inner(), runs, "two providers overlapped");
}

#[tokio::test]
async fn timestamps_are_stored_as_utc_text_with_milliseconds_from_the_database_clock() {
    let (_dir, provider) = common::fresh_provider().await;
    let slot = FireSlot::new(Utc::now());
    let request = testkit::request(
        &"fmt".into(),
        "a",
        Duration::from_millis(90_500),
        Some(slot),
    );
    let before = Utc::now();
    let AcquireOutcome::Acquired(_) = provider.acquire(&request).await.unwrap() else {
        panic!("refused")
    };
    let (lock_until, locked_at, last_fire, kind): (String, String, String, String) = raw(&provider)
        .query_row(
            "SELECT lock_until, locked_at, last_fire, typeof(lock_until) FROM shedlock WHERE name = 'fmt'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .unwrap();
    assert_eq!(kind, "text");
    for text in [&lock_until, &locked_at, &last_fire] {
        assert_eq!(text.len(), 23, "{text:?} is not YYYY-MM-DD HH:MM:SS.SSS");
        assert_eq!((&text[10..11], &text[19..20]), (" ", "."), "{text:?}");
    }
    assert_eq!(
        last_fire,
        slot.instant().format("%Y-%m-%d %H:%M:%S%.3f").to_string()
    );
    let record = provider.list_locks().await.unwrap().remove(0);
    assert_eq!(
        record.lock_until - record.locked_at,
        TimeDelta::milliseconds(90_500)
    );
    // The database clock and this host's are the same clock here: the stored instant is now.
    assert!(
        (record.locked_at - before).abs() < TimeDelta::seconds(5),
        "{record:?}"
    );
}

#[tokio::test]
async fn a_losing_acquire_writes_nothing() {
    let (dir, provider) = common::fresh_provider().await;
    let _held = acquired(&provider, "busy", "a").await.unwrap();
    let wal = dir.path().join("locks.db-wal");
    let observer = raw(&provider);
    let version = |c: &Connection| -> i64 {
        c.query_row("PRAGMA data_version", [], |r| r.get(0))
            .unwrap()
    };
    let (size_before, version_before) =
        (std::fs::metadata(&wal).unwrap().len(), version(&observer));
    for _ in 0..50 {
        assert!(acquired(&provider, "busy", "b").await.is_none());
    }
    assert_eq!(
        std::fs::metadata(&wal).unwrap().len(),
        size_before,
        "losing acquires appended to the WAL"
    );
    assert_eq!(
        version(&observer),
        version_before,
        "losing acquires committed a change"
    );
}

#[tokio::test]
async fn ensure_schema_upgrades_a_shedlock_table_and_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.db");
    // ShedLock's own table, with a row written by a Java instance.
    let connection = Connection::open(&path).unwrap();
    connection
        .execute_batch(
            "CREATE TABLE shedlock(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL,
               locked_at TIMESTAMP(3) NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name));
             INSERT INTO shedlock VALUES ('legacy', '2000-01-01 00:00:00.000', '2000-01-01 00:00:00.000', 'java');",
        )
        .unwrap();
    let provider = SqliteLockProvider::open(&path).unwrap();
    let request = testkit::request(&"legacy".into(), "rust", LONG, None);
    let err = provider.acquire(&request).await.unwrap_err();
    let chain = format!("{err} / {}", std::error::Error::source(&err).unwrap());
    assert!(chain.contains("ensure_schema"), "{chain}");
    provider.ensure_schema().await.unwrap();
    provider.ensure_schema().await.unwrap();
    let lease = acquired(&provider, "legacy", "rust")
        .await
        .expect("an expired legacy row");
    assert_eq!(lease.fence(), 1, "the added fence column defaults to 0");

    // A table whose columns do not match the configured names is named in the error.
    let custom = SqliteLockProvider::open(&path)
        .unwrap()
        .with_columns(ColumnNames {
            locked_by: "owner".into(),
            ..ColumnNames::default()
        })
        .unwrap();
    let err = custom.ensure_schema().await.unwrap_err();
    assert!(err.to_string().contains("owner"), "{err}");
    // Used anyway, the unknown quoted column is an error, never read as the string 'owner'.
    let request = testkit::request(&"legacy".into(), "rust", LONG, None);
    let err = custom.acquire(&request).await.unwrap_err();
    let source = std::error::Error::source(&err).unwrap().to_string();
    assert!(source.contains("ensure_schema"), "{source}");
}

#[tokio::test]
async fn open_refuses_a_database_without_wal() {
    let err = SqliteLockProvider::open(":memory:").unwrap_err();
    assert!(matches!(err, LockError::InvalidConfiguration(_)), "{err:?}");
}

#[tokio::test]
async fn describe_names_table_and_file() {
    let (dir, provider) = common::fresh_provider().await;
    let text = provider.describe();
    assert!(
        text.contains("shedlock") && text.contains(&dir.path().display().to_string()),
        "{text}"
    );
}

/// run_once on ShedLock's four columns: SQLite's statements read every column, so the first
/// one (the done marker's read) fails, naming the statements that add them; the task does not
/// run. After `ensure_schema` it runs once.
#[tokio::test]
async fn run_once_on_a_shedlock_table_fails_before_the_task_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE shedlock(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL,
               locked_at TIMESTAMP(3) NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name));",
        )
        .unwrap();
    let provider = SqliteLockProvider::open(&path).unwrap();
    let executor = lock_core::LockingTaskExecutor::new(provider.clone());
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let task = || async {
        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok::<_, String>(())
    };
    let error = executor
        .run_once("migrate", "v1")
        .run(task)
        .await
        .expect_err("a table without last_fire cannot keep the done marker");
    let chain = format!("{error} / {}", std::error::Error::source(&error).unwrap());
    assert!(chain.contains("ADD COLUMN"), "{chain}");
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the task ran"
    );
    provider.ensure_schema().await.unwrap();
    let first = executor.run_once("migrate", "v1").run(task).await.unwrap();
    assert_eq!(first, lock_core::RunOnceOutcome::Ran(()));
    let again = executor.run_once("migrate", "v1").run(task).await.unwrap();
    assert_eq!(again, lock_core::RunOnceOutcome::AlreadyDone);
}
