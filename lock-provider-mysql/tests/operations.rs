//! The operations tables (registry, history, control) on the real MySQL/MariaDB: the store's
//! contract (`lock_cluster::testkit::operations_store`) on tables of the test's own, created by
//! `ensure_schema` next to the lock table.

mod common;

use lock_provider_mysql::MySqlLockProvider;

#[tokio::test]
async fn operations_tables_keep_the_store_contract() {
    let table = common::unique_table("lockmy_ops");
    // Drops the operations tables too.
    let _drop = common::drop_table(&table);
    let provider = match MySqlLockProvider::connect(&common::url()).await {
        Ok(provider) => provider.with_table(&table).expect("table name"),
        Err(e) => return common::unreachable(&e).unwrap_or(()),
    };
    provider.ensure_schema().await.expect("ensure_schema");
    lock_cluster::testkit::operations_store(&provider).await;
    // ensure_schema again: the tables exist, nothing fails.
    provider.ensure_schema().await.expect("ensure_schema twice");
    let _ = provider.pool().clone().disconnect().await;
}

/// Instances of one service start at once and each runs `ensure_schema()`: the DDL of the
/// operations tables (whose `ALTER`s for the indexes added later are not idempotent on MySQL)
/// runs under a named lock, so no instance's fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_starting_at_once_all_ensure_the_schema() {
    let table = common::unique_table("lockmy_ddl_race");
    let _drop = common::drop_table(&table);
    let mut instances = tokio::task::JoinSet::new();
    for _ in 0..6 {
        let provider = match MySqlLockProvider::connect(&common::url()).await {
            Ok(provider) => provider.with_table(&table).expect("table name"),
            Err(e) => return common::unreachable(&e).unwrap_or(()),
        };
        instances.spawn(async move {
            let result = provider.ensure_schema().await;
            let _ = provider.pool().clone().disconnect().await;
            result
        });
    }
    let mut done = 0;
    while let Some(result) = instances.join_next().await {
        let result = result.expect("the instance's task");
        assert!(
            result.is_ok(),
            "an instance's ensure_schema failed: {result:?}"
        );
        done += 1;
    }
    assert_eq!(done, 6);
}
