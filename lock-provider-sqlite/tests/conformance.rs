//! The SQLite provider passes every function of the conformance suite, each on its own file.

mod common;

use lock_core::testkit;

macro_rules! conformance {
    ($($test:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let (_dir, provider) = common::fresh_provider().await;
            testkit::$test(&provider).await;
        }
    )*};
}

conformance!(
    exclusion,
    independent_names,
    at_most_expiry,
    at_least_hold,
    release_only_by_owner,
    extend_only_by_owner,
    extend_pushes_expiry,
    extend_of_expired_refused,
    stale_lease_cannot_release_new_one,
    fence_strictly_increasing,
    once_per_slot,
    slot_refused_while_held,
    fuzz,
    name_too_long,
    list_and_force_unlock,
);

#[tokio::test]
async fn whole_suite_through_a_shared_dyn_provider() {
    let (_dir, provider) = common::fresh_provider().await;
    let provider: std::sync::Arc<dyn lock_core::LockProvider> = std::sync::Arc::new(provider);
    testkit::run_all(&provider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_on_custom_table_and_column_names() {
    let (dir, _) = common::fresh_provider().await;
    let columns = lock_core::ColumnNames {
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
