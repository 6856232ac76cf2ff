//! Shared test plumbing: a pool, a provider and a plain client on the test database. Where the
//! database is, the skip-unless-CI rule and the clean-up guards come from `test-support`.

#![allow(dead_code, unused_imports, unreachable_pub)] // each test binary uses a different part

use lock_provider_postgres::PostgresLockProvider;
use lock_provider_postgres::deadpool_postgres::{Manager, Pool};
use lock_provider_postgres::tokio_postgres::{self, NoTls};

pub use test_support::db::postgres_url as url;
pub use test_support::table::{drop_postgres_table as drop_table, postgres_cleanup as cleanup};

/// The table every conformance test shares (the suite uses random lock names).
pub const CONFORMANCE_TABLE: &str = "lockpg_conformance";

/// A pool on the test database, or `None` (after the skip-unless-CI rule) when it cannot be
/// reached.
pub async fn pool() -> Option<Pool> {
    let config: tokio_postgres::Config = url().parse().expect("LOCK_TEST_POSTGRES_URL");
    let pool = Pool::builder(Manager::new(config, NoTls))
        .max_size(16)
        .build()
        .expect("pool");
    let connected = pool.get().await.map(drop);
    test_support::skip::or_unreachable("postgres", &url(), connected)?;
    Some(pool)
}

/// A provider on `table` (created or migrated by `ensure_schema`), or `None` when the database
/// cannot be reached.
pub async fn provider(table: &str) -> Option<PostgresLockProvider> {
    let pool = pool().await?;
    let provider = PostgresLockProvider::new(pool)
        .with_table(table)
        .expect("valid table name");
    provider.ensure_schema().await.expect("ensure_schema");
    Some(provider)
}

/// A table name unique to this call, so tests that need their own table never collide.
pub fn unique_table(prefix: &str) -> String {
    test_support::table::unique_table(&format!("lockpg_{prefix}"))
}

/// A plain client for statements written out by hand in a test.
pub async fn raw_client() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&url(), NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}

/// Waits (bounded, 10 s) until a backend waits for a lock `pid` holds: a statement under test
/// reaching its wait. Not a retry of an assertion: the condition is the wait.
pub async fn waits_for(observer: &tokio_postgres::Client, pid: i32) -> bool {
    for _ in 0..200 {
        let n: i64 = observer
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                &[&pid],
            )
            .await
            .unwrap()
            .get(0);
        if n > 0 {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}
