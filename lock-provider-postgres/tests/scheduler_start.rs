//! A missing lock table met first by `start()`: PostgreSQL prepares the clock's statement
//! with the lock statements, so the clock's measurement is what meets it.

mod common;

use std::time::Duration;

use lock_core::LockError;
use lock_provider_postgres::PostgresLockProvider;
use lock_scheduler::{Job, Scheduler, Trigger};

#[tokio::test]
async fn a_missing_lock_table_is_named_first_with_its_statement_once() {
    let Some(pool) = common::pool().await else {
        return;
    };
    let table = common::unique_table("never_created");
    let provider = PostgresLockProvider::new(pool)
        .with_table(&table)
        .expect("valid table name");
    let (logs, guard) = test_support::logs::capture();
    let error = Scheduler::builder()
        .lock_provider(provider)
        .jobs([Job::new(
            "report",
            Trigger::fixed_rate(Duration::from_secs(60)).unwrap(),
            || async {},
        )])
        .start()
        .await
        .expect_err("no lock table");
    drop(guard);
    assert!(matches!(error, LockError::TableMissing { .. }), "{error:?}");
    let logged = logs.text();
    let first = logged.lines().find(|l| l.contains("ERROR")).unwrap_or("");
    assert!(
        first.contains(&format!("lock table {table} does not exist")),
        "the ERROR names the missing table first: {logged}"
    );
    assert!(
        !logged.contains("cannot read the database clock"),
        "not a clock problem: {logged}"
    );
    // What the user sees: the log, then the error start() returned.
    let shown = format!("{logged}{error}");
    assert_eq!(
        shown.matches("CREATE TABLE").count(),
        1,
        "the CREATE statement once in: {shown}"
    );
}
