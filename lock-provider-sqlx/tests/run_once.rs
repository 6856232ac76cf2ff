//! run_once on a table with ShedLock's four columns only, on each backend: such a table has no
//! `last_fire`, so the done marker cannot be kept and the task would run at every call. It
//! fails before the task runs, naming the table and the statement that adds the columns; once
//! the table is migrated the task runs once.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use lock_core::{LockingTaskExecutor, RunOnceOutcome};
use lock_provider_sqlx::SqlxLockProvider;
use lock_provider_sqlx::sqlx::{self, AssertSqlSafe};

/// Two refused calls (the task never runs, the error says `table` and `fix`), then
/// `ensure_schema`, then one run and one "already done".
async fn refused_until_migrated(provider: SqlxLockProvider, table: &str, fix: &str) {
    let executor = LockingTaskExecutor::new(provider.clone());
    let runs = AtomicUsize::new(0);
    let task = || async {
        runs.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>(())
    };
    for _ in 0..2 {
        let error = executor
            .run_once("migrate", "v1")
            .run(task)
            .await
            .expect_err("a table without last_fire cannot keep the done marker");
        let message = chain(&error);
        assert!(message.contains(table), "{message}");
        assert!(message.contains(fix), "{message}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0, "the task ran");
    provider.ensure_schema().await.expect("ensure_schema");
    let first = executor.run_once("migrate", "v1").run(task).await.unwrap();
    assert_eq!(first, RunOnceOutcome::Ran(()));
    let again = executor.run_once("migrate", "v1").run(task).await.unwrap();
    assert_eq!(again, RunOnceOutcome::AlreadyDone);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// The error and its sources, as a log shows them.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_run_once_on_a_shedlock_table_fails_before_the_task_runs() {
    let table = common::unique_table("locksqlx_run_once_pg");
    let _drop = common::drop_postgres_table(&table);
    let Some(pool) = common::pg_pool().await else {
        return;
    };
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE {table} (name VARCHAR(64) NOT NULL PRIMARY KEY, \
         lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL, \
         locked_by VARCHAR(255) NOT NULL)"
    )))
    .execute(&pool)
    .await
    .expect("ShedLock's DDL");
    let provider = SqlxLockProvider::postgres(pool).with_table(&table).unwrap();
    refused_until_migrated(provider, &table, "ADD COLUMN IF NOT EXISTS").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_run_once_on_a_shedlock_table_fails_before_the_task_runs() {
    let table = common::unique_table("locksqlx_run_once_my");
    let _drop = common::drop_mysql_table(&table);
    let Some(pool) = common::mysql_pool().await else {
        return;
    };
    // The name byte-compared, so that this table draws no collation warning.
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE `{table}` (name VARBINARY(64) NOT NULL PRIMARY KEY, \
         lock_until TIMESTAMP(3) NOT NULL, \
         locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
         locked_by VARCHAR(255) NOT NULL)"
    )))
    .execute(&pool)
    .await
    .expect("ShedLock's DDL");
    let provider = SqlxLockProvider::mysql(pool).with_table(&table).unwrap();
    let fix = format!("ALTER TABLE `{table}` ADD COLUMN");
    refused_until_migrated(provider, &table, &fix).await;
}

/// SQLite's statements read every column, so the first statement on such a table fails, with
/// the statements that add the columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_run_once_on_a_shedlock_table_fails_before_the_task_runs() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let pool = common::sqlite_pool(&dir.path().join("locks.db")).await;
    sqlx::raw_sql(
        "CREATE TABLE shedlock (name VARCHAR(64) NOT NULL PRIMARY KEY, \
         lock_until TEXT NOT NULL, locked_at TEXT NOT NULL, locked_by VARCHAR(255) NOT NULL)",
    )
    .execute(&pool)
    .await
    .expect("ShedLock's DDL");
    let provider = SqlxLockProvider::sqlite(pool);
    refused_until_migrated(provider, "shedlock", "ADD COLUMN").await;
}
