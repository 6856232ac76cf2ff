//! Shared by the integration tests: sqlx pools and providers on the test servers, and the
//! driver-specific providers on the same tables. Where the servers are, the skip-unless-CI rule
//! and unique tables come from `test-support`.

#![allow(dead_code, unused_imports, unreachable_pub)] // each test binary uses a different part

use std::time::Duration;

use lock_provider_sqlx::SqlxLockProvider;
use lock_provider_sqlx::sqlx::mysql::MySqlPoolOptions;
use lock_provider_sqlx::sqlx::postgres::PgPoolOptions;
use lock_provider_sqlx::sqlx::{MySqlPool, PgPool};

pub use test_support::db::{mysql_url, postgres_url};
pub use test_support::table::{drop_mysql_table, drop_postgres_table, unique_table};

/// The PostgreSQL table the conformance tests share (they use random lock names).
pub const PG_CONFORMANCE_TABLE: &str = "locksqlx_pg_conformance";
/// The MySQL table the conformance tests share.
pub const MYSQL_CONFORMANCE_TABLE: &str = "locksqlx_mysql_conformance";

/// A PostgreSQL pool as a service would have it, or `None` (after the skip-unless-CI rule).
pub async fn pg_pool() -> Option<PgPool> {
    let connected = PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&postgres_url())
        .await;
    test_support::skip::or_unreachable("postgres", &postgres_url(), connected)
}

/// A MySQL pool as a service would have it, or `None` (after the skip-unless-CI rule).
pub async fn mysql_pool() -> Option<MySqlPool> {
    let connected = MySqlPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&mysql_url())
        .await;
    test_support::skip::or_unreachable("mysql", &mysql_url(), connected)
}

/// A provider on a PostgreSQL `table`, created by `ensure_schema`.
pub async fn pg_provider(table: &str) -> Option<SqlxLockProvider> {
    let provider = SqlxLockProvider::postgres(pg_pool().await?)
        .with_table(table)
        .expect("valid table name");
    provider.ensure_schema().await.expect("ensure_schema");
    Some(provider)
}

/// A provider on a MySQL `table`, created by `ensure_schema`.
pub async fn mysql_provider(table: &str) -> Option<SqlxLockProvider> {
    let provider = SqlxLockProvider::mysql(mysql_pool().await?)
        .with_table(table)
        .expect("valid table name");
    provider.ensure_schema().await.expect("ensure_schema");
    Some(provider)
}

/// A SQLite pool as a service would have it (WAL, the file created if missing), on `file`.
pub async fn sqlite_pool(file: &std::path::Path) -> lock_provider_sqlx::sqlx::SqlitePool {
    use lock_provider_sqlx::sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions,
    };
    let options = SqliteConnectOptions::new()
        .filename(file)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal);
    SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .expect("open the SQLite file")
}

/// A provider on a SQLite file of its own (the directory lives as long as the pair).
pub async fn sqlite_provider() -> Option<(tempfile::TempDir, SqlxLockProvider)> {
    let dir = tempfile::tempdir().expect("a temp dir");
    let provider = SqlxLockProvider::sqlite(sqlite_pool(&dir.path().join("locks.db")).await);
    provider.ensure_schema().await.expect("ensure_schema");
    Some((dir, provider))
}
