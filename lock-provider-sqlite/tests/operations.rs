//! The operations tables (registry, history, control, action log, incidents) in a SQLite file:
//! the store's contract (`lock_cluster::testkit::operations_store`, `heartbeat_of_many_jobs`),
//! a ShedLock table alone, without them, and tables from before the incidents.

mod common;

use lock_cluster::ClusterProvider;
use lock_core::LockError;
use lock_provider_sqlite::SqliteLockProvider;

#[tokio::test]
async fn operations_tables_keep_the_store_contract() {
    let (_dir, provider) = common::fresh_provider().await;
    lock_cluster::testkit::operations_store(&provider).await;
    provider.ensure_schema().await.expect("ensure_schema twice");
}

/// A beat of 6,000 jobs: more than SQLite's 32,766 parameters allow in one statement of 13 per
/// row, so the upsert is cut into several, in the beat's one transaction.
#[tokio::test]
async fn a_heartbeat_of_more_jobs_than_one_statement_takes() {
    let (_dir, provider) = common::fresh_provider().await;
    lock_cluster::testkit::heartbeat_of_many_jobs(&provider).await;
}

#[tokio::test]
async fn a_shedlock_table_alone_reports_the_missing_operations_tables() {
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
    let provider = SqliteLockProvider::open(&path).expect("open");
    let store = provider.cluster().expect("sqlite keeps them");
    match store.check().await {
        Err(LockError::TableMissing { table, ddl, .. }) => {
            assert_eq!(
                table,
                "shedlock_instances, shedlock_runs, shedlock_control, shedlock_actions, \
                 shedlock_incidents"
            );
            assert!(ddl.contains("CREATE TABLE IF NOT EXISTS \"shedlock_runs\""));
        }
        other => panic!("expected TableMissing, got {other:?}"),
    }
}

/// A file whose operations tables predate the incidents: the scheduler's check still passes,
/// reading the incidents reports the missing table with its DDL, and `ensure_schema` creates
/// it beside the others.
#[tokio::test]
async fn ensure_schema_adds_the_incidents_to_older_operations_tables() {
    let (dir, provider) = common::fresh_provider().await;
    let connection = rusqlite::Connection::open(dir.path().join("locks.db")).expect("open");
    connection
        .execute_batch("DROP TABLE shedlock_incidents")
        .expect("drop the incidents");
    drop(connection);
    lock_cluster::testkit::incidents_added_later(&provider, "\"shedlock_incidents\"", || {
        provider.ensure_schema()
    })
    .await;
}
