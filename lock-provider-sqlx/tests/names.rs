//! Lock names compare byte for byte through the sqlx MySQL backend too, on a table made by
//! ShedLock's own DDL (`name VARCHAR(64)`, the server's case-insensitive collation):
//! `start()` refuses jobs whose names that table keeps in one row, naming both, and the
//! provider warns with the `ALTER TABLE` that fixes the column; an operator's unlock of a name
//! that differs in case or trailing spaces finds no lock. (Its own binary: the collation
//! warning is captured per thread.)

mod common;

use std::time::Duration;

use lock_core::{AcquireOutcome, LockProvider, testkit};
use lock_provider_sqlx::SqlxLockProvider;
use lock_provider_sqlx::sqlx::{self, AssertSqlSafe};
use lock_scheduler::{Job, Scheduler, Trigger};

fn job(name: &str) -> Job {
    Job::new(name, Trigger::cron("0 0 3 * * *").unwrap(), || async {})
}

// Current-thread runtime: the log capture is a thread-local default subscriber.
#[tokio::test]
async fn mysql_names_that_a_shedlock_table_keeps_in_one_row_are_refused() {
    let table = common::unique_table("locksqlx_ci_names");
    let _drop = common::drop_mysql_table(&table);
    let Some(pool) = common::mysql_pool().await else {
        return;
    };
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE `{table}`(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, \
         locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
         locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
    )))
    .execute(&pool)
    .await
    .expect("ShedLock's DDL");
    let provider = SqlxLockProvider::mysql(pool).with_table(&table).unwrap();

    let (logs, guard) = test_support::logs::capture();
    let error = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([job("Report"), job("REPORT")])
        .start()
        .await
        .expect_err("Report and REPORT share one row")
        .to_string();
    drop(guard);
    assert!(error.contains("jobs `REPORT` and `Report`"), "{error}");
    let text = logs.text();
    assert!(
        text.contains(&format!(
            "ALTER TABLE `{table}` MODIFY `name` VARBINARY(64) NOT NULL"
        )),
        "{text}"
    );

    let request = testkit::request(&"u_live".into(), "holder", Duration::from_secs(600), None);
    let granted = provider.acquire(&request).await.expect("acquire");
    assert!(
        matches!(granted, AcquireOutcome::Acquired(_)),
        "{granted:?}"
    );
    for name in ["U_LIVE ", "U_LIVE", "u_live "] {
        assert_eq!(provider.force_unlock(name).await.unwrap(), None, "{name:?}");
        assert_eq!(provider.reset_slot(name).await.unwrap(), None, "{name:?}");
    }
    let record = provider
        .read_lock("u_live")
        .await
        .unwrap()
        .expect("the row");
    assert!(record.held, "the live lock was released: {record:?}");
}
