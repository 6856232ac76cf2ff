//! Shared setup: a fresh database file per test.
//!
//! SQLite is embedded (bundled into the test binary), so there is no server that could be
//! unreachable: every test runs everywhere, with or without `CI`.

#![allow(dead_code, unreachable_pub)] // each test file uses a different part

use lock_provider_sqlite::SqliteLockProvider;
use tempfile::TempDir;

/// A provider on a new database file with the lock table created. Keep the `TempDir` alive
/// for as long as the provider is used.
pub async fn fresh_provider() -> (TempDir, SqliteLockProvider) {
    let dir = tempfile::tempdir().expect("create a temp dir");
    let provider =
        SqliteLockProvider::open(dir.path().join("locks.db")).expect("open the database");
    provider.ensure_schema().await.expect("ensure_schema");
    (dir, provider)
}
