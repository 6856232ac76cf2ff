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
