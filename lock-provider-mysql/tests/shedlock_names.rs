//! A table made by ShedLock's own MySQL DDL has `name VARCHAR(64)` with the server's default
//! collation, which ignores case and trailing spaces: `Report`, `report` and `report ` would be
//! one row, one lease, one last fire. `start()` refuses jobs whose lock names the table keeps
//! in one row, naming both, and the provider warns with the `ALTER TABLE` that makes the column
//! compare bytes. (Its own binary: the collation warning is captured per thread, see
//! `table_shape.rs`.)

mod common;

use std::time::Duration;

use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::prelude::Queryable;
use lock_scheduler::{Job, Scheduler, Trigger};

fn job(name: &str) -> Job {
    Job::new(name, Trigger::cron("0 0 3 * * *").unwrap(), || async {})
}

// Current-thread runtime: the log capture is a thread-local default subscriber.
#[tokio::test]
async fn start_refuses_job_names_that_a_shedlock_table_keeps_in_one_row() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let table = common::unique_table("ci_names");
    let _drop = common::drop_table(&table);
    admin
        .query_drop(format!(
            "CREATE TABLE `{table}`(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, \
             locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
             locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
        ))
        .await
        .expect("ShedLock's DDL");
    let provider = || {
        MySqlLockProvider::new(common::pool(2))
            .with_table(&table)
            .unwrap()
    };

    let (logs, guard) = test_support::logs::capture();
    let error = Scheduler::builder()
        .lock_provider(provider())
        .jobs([job("Report"), job("other"), job("REPORT")])
        .start()
        .await
        .expect_err("Report and REPORT share one row")
        .to_string();
    drop(guard);
    assert!(error.contains("jobs `REPORT` and `Report`"), "{error}");
    assert!(error.contains("compares as one name"), "{error}");
    let text = logs.text();
    assert!(
        text.contains(&format!(
            "ALTER TABLE `{table}` MODIFY `name` VARBINARY(64) NOT NULL"
        )),
        "{text}"
    );

    // Names that differ under the collation too start; a job added later is checked too.
    let scheduler = Scheduler::builder()
        .lock_provider(provider())
        .jobs([job("report"), job("other")])
        .shutdown_timeout(Duration::from_secs(5))
        .start()
        .await
        .expect("distinct names");
    let error = scheduler
        .add_job(job("OTHER"))
        .await
        .expect_err("OTHER and other share one row")
        .to_string();
    assert!(error.contains("`OTHER` and `other`"), "{error}");
    scheduler
        .add_job(job("third"))
        .await
        .expect("a distinct name");
    scheduler.shutdown().await.unwrap();

    // After the fix the warning gives, the names are distinct rows: the same jobs start.
    admin
        .query_drop(format!(
            "ALTER TABLE `{table}` MODIFY `name` VARBINARY(64) NOT NULL"
        ))
        .await
        .expect("the ALTER of the warning");
    let scheduler = Scheduler::builder()
        .lock_provider(provider())
        .jobs([job("Report"), job("other"), job("REPORT")])
        .start()
        .await
        .expect("a byte-compared name column");
    scheduler.shutdown().await.unwrap();
}

/// Beyond the start-up check (direct calls, `lockctl`, another service on the same table): on
/// a table made by ShedLock's DDL, an acquire of `report` finds the row of `Report` (the
/// primary key compares without case) and is refused, leaving that row as it is, whether
/// `Report` is held or free. Before, it took `Report`'s row: its lease while free, its
/// `last_fire`, and it released `Report` on its own release.
#[tokio::test]
async fn an_acquire_never_takes_the_row_of_a_name_equal_only_under_the_collation() {
    use lock_core::{AcquireOutcome, LockProvider, LockRequest};

    let Some(mut admin) = common::admin().await else {
        return;
    };
    let table = common::unique_table("ci_acquire");
    let _drop = common::drop_table(&table);
    admin
        .query_drop(format!(
            "CREATE TABLE `{table}`(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, \
             locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
             locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
        ))
        .await
        .expect("ShedLock's DDL");
    let provider = MySqlLockProvider::new(common::pool(2))
        .with_table(&table)
        .unwrap();
    let request = |name: &str, by: &str| LockRequest {
        name: name.into(),
        locked_by: by.into(),
        lock_at_most_for: Duration::from_secs(60),
        slot: None,
        max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
        give_up_at: None,
    };
    let Ok(AcquireOutcome::Acquired(held)) = provider.acquire(&request("Report", "a")).await else {
        panic!("Report is free");
    };
    let before = provider
        .read_lock("Report")
        .await
        .unwrap()
        .expect("Report's row");

    // Held: refused, and the row is Report's as it was.
    for other in ["report", "REPORT"] {
        let outcome = provider.acquire(&request(other, "b")).await.unwrap();
        assert!(
            matches!(outcome, AcquireOutcome::Refused(_)),
            "{other:?} must not take Report's row: {outcome:?}"
        );
    }
    // A trailing space (equal under MySQL's PAD SPACE collations) never reaches the table:
    // the name rule refuses it first.
    let padded = provider.acquire(&request("Report ", "b")).await;
    assert!(
        matches!(padded, Err(lock_core::LockError::InvalidLockName { .. })),
        "\"Report \" must be refused as a name: {padded:?}"
    );
    let after = provider
        .read_lock("Report")
        .await
        .unwrap()
        .expect("Report's row");
    assert_eq!(
        (after.name.as_str(), &after.locked_by, after.lock_until),
        ("Report", &before.locked_by, before.lock_until)
    );

    // Free: still refused, the row stays Report's and free.
    assert!(provider.release(&held, Duration::ZERO).await.unwrap());
    let freed = provider
        .read_lock("Report")
        .await
        .unwrap()
        .expect("Report's row");
    let outcome = provider.acquire(&request("report", "b")).await.unwrap();
    assert!(
        matches!(outcome, AcquireOutcome::Refused(_)),
        "report must not take Report's free row: {outcome:?}"
    );
    let after = provider
        .read_lock("Report")
        .await
        .unwrap()
        .expect("Report's row");
    assert_eq!(
        (
            after.name.as_str(),
            after.locked_by.as_str(),
            after.lock_until,
            after.held
        ),
        ("Report", freed.locked_by.as_str(), freed.lock_until, false)
    );
}
