//! Behind a real PgBouncer in transaction mode (`scripts/test-servers`: port 6432, in front of
//! the test database), where every transaction may run on another server connection: with
//! `with_statement_cache(false)` (sqlx's `persistent(false)`) the sqlx provider passes the
//! whole conformance suite there, on a sqlx pool and on one `connect` builds from a URL with
//! `statement_cache=false`, and the operations tables' contract too.

mod common;

use lock_core::testkit;
use lock_provider_sqlx::SqlxLockProvider;
use lock_provider_sqlx::sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use test_support::servers::{pgbouncer_url, with_params};

/// The table the PgBouncer tests share (the suite uses random lock names).
const TABLE: &str = "locksqlx_pgbouncer";

async fn uncached() -> Option<SqlxLockProvider> {
    uncached_on(TABLE).await
}

/// A provider through PgBouncer without the statement cache, on `table` (made by
/// `ensure_schema`, with its operations tables).
async fn uncached_on(table: &str) -> Option<SqlxLockProvider> {
    let url = pgbouncer_url();
    // PgBouncer refuses sqlx's `extra_float_digits` startup parameter unless its
    // `ignore_startup_parameters` names it: a pool for PgBouncer does not send it.
    let options: PgConnectOptions = url.parse().expect("LOCK_TEST_PGBOUNCER_URL");
    let connected = PgPoolOptions::new()
        .max_connections(8)
        .connect_with(options.extra_float_digits(None))
        .await;
    let pool =
        test_support::skip::or_unreachable("pgbouncer (scripts/test-servers)", &url, connected)?;
    let provider = SqlxLockProvider::postgres(pool)
        .with_statement_cache(false)
        .with_table(table)
        .expect("valid table");
    provider
        .ensure_schema()
        .await
        .expect("ensure_schema through pgbouncer");
    Some(provider)
}

lock_core::conformance_tests!(uncached());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_cycle_through_pgbouncer_from_a_url() {
    let url = with_params(&pgbouncer_url(), "statement_cache=false");
    let connected = SqlxLockProvider::connect(&url).await;
    let Some(provider) = test_support::skip::or_unreachable(
        "pgbouncer (scripts/test-servers)",
        &url,
        connected.map_err(|e| test_support::skip::chain(&e)),
    ) else {
        return;
    };
    let provider = provider.with_table(TABLE).expect("valid table");
    provider.ensure_schema().await.expect("ensure_schema");
    testkit::lock_cycle(&provider).await;
    provider.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operations_tables_through_pgbouncer() {
    let table = common::unique_table("locksqlx_bouncer_ops");
    // Dropped on the server directly, operations tables included.
    let _drop = common::drop_postgres_table(&table);
    let Some(provider) = uncached_on(&table).await else {
        return;
    };
    lock_cluster::testkit::operations_store(&provider).await;
    // The heartbeat over arrays, unprepared, in a transaction of its own.
    lock_cluster::testkit::heartbeat_of_many_jobs(&provider).await;
    provider.ensure_schema().await.expect("ensure_schema twice");
}
