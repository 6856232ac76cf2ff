//! The operations tables (registry, history, control) in a SQLite file: the store's contract
//! (`lock_cluster::testkit::operations_store`), and a ShedLock table alone, without them.

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
                "shedlock_instances, shedlock_runs, shedlock_control, shedlock_actions"
            );
            assert!(ddl.contains("CREATE TABLE IF NOT EXISTS \"shedlock_runs\""));
        }
        other => panic!("expected TableMissing, got {other:?}"),
    }
}
