//! Shared test plumbing: where the database is, what to do when it is not there, and tables
//! that clean up after themselves.

#![allow(dead_code, unreachable_pub)] // each test binary uses a different part

use lock_provider_postgres::PostgresLockProvider;
use lock_provider_postgres::deadpool_postgres::{Manager, Pool};
use lock_provider_postgres::tokio_postgres::{self, NoTls};

/// The table every conformance test shares (the suite uses random lock names).
pub const CONFORMANCE_TABLE: &str = "lockpg_conformance";

/// The test database, from `LOCK_TEST_POSTGRES_URL`.
pub fn url() -> String {
    std::env::var("LOCK_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Under `CI` an unreachable database fails the test; elsewhere it is skipped, loudly.
pub fn unreachable(what: &str, error: &dyn std::fmt::Display) {
    let url = url();
    if std::env::var_os("CI").is_some() {
        panic!("PostgreSQL unreachable at {url} while CI is set ({what}): {error}");
    }
    // Straight to the process's stderr: the test harness captures `eprintln!` of passing
    // tests, and a skip must be seen.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: postgres unreachable at {url}: {error}"
    );
}

/// A pool on the test database, or `None` (after [`unreachable`]) when it cannot be reached.
pub async fn pool() -> Option<Pool> {
    let config: tokio_postgres::Config = url().parse().expect("LOCK_TEST_POSTGRES_URL");
    let pool = Pool::builder(Manager::new(config, NoTls))
        .max_size(16)
        .build()
        .expect("pool");
    match pool.get().await {
        Ok(_) => Some(pool),
        Err(e) => {
            unreachable("connect", &e);
            None
        }
    }
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
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "lockpg_{prefix}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs a clean-up statement when dropped, even when the test panics.
pub struct Cleanup(pub String);

/// Drops `table` at the end of the test.
pub fn drop_table(table: &str) -> Cleanup {
    Cleanup(format!("DROP TABLE IF EXISTS {table}"))
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let statement = self.0.clone();
        // Drop cannot await, and may run inside a runtime: use a thread with its own.
        let done = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                if let Ok((client, connection)) = tokio_postgres::connect(&url(), NoTls).await {
                    tokio::spawn(connection);
                    let _ = client.batch_execute(&statement).await;
                }
            });
        });
        let _ = done.join();
    }
}

/// A plain client for statements written out by hand in a test.
pub async fn raw_client() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&url(), NoTls)
        .await
        .expect("connect");
    tokio::spawn(connection);
    client
}
