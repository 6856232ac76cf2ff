//! The SQLite provider passes every function of the conformance suite, each on its own file.

mod common;

use lock_core::testkit;

// Each test on its own file; the temporary directory lives as long as the provider.
lock_core::conformance_tests!(async { Some(common::fresh_provider().await) });

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_on_custom_table_and_column_names() {
    let (dir, _) = common::fresh_provider().await;
    let columns = lock_provider_sqlite::ColumnNames {
        name: "job".into(),
        lock_until: "until_at".into(),
        locked_at: "taken_at".into(),
        locked_by: "owner".into(),
        fence: "token".into(),
        last_fire: "order".into(), // an SQL keyword: identifiers are quoted
    };
    let provider = lock_provider_sqlite::SqliteLockProvider::open(dir.path().join("locks.db"))
        .unwrap()
        .with_table("main.job_locks")
        .unwrap()
        .with_columns(columns)
        .unwrap();
    provider.ensure_schema().await.unwrap();
    testkit::exclusion(&provider).await;
    testkit::once_per_slot(&provider).await;
    testkit::stale_lease_cannot_release_new_one(&provider).await;
    testkit::list_and_force_unlock(&provider).await;
}
