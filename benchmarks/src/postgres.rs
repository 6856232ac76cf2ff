//! The PostgreSQL server the database benches run against.

use lock_provider_postgres::PostgresLockProvider;
use lock_providers::{OpenError, OpenOptions};

pub use test_support::db::{postgres_url as url, redact};

/// Connects a provider to [`url`] on `table`, through the `lock-providers` registry. An
/// unreachable server fails the bench when `CI` is set (a bench that silently measures nothing
/// would hide a broken setup); otherwise it prints `SKIPPED: ...` to stderr and returns `None`.
///
/// ```no_run
/// # async fn run() {
/// if let Some(provider) = benchmarks::postgres::connect_or_skip("bench_locks").await {
///     provider.ensure_schema().await.unwrap();
/// }
/// # }
/// ```
pub async fn connect_or_skip(table: &str) -> Option<PostgresLockProvider> {
    let url = url();
    match OpenOptions::new().table(table).open(&url).await {
        Ok(opened) => Some(
            opened
                .downcast_ref::<PostgresLockProvider>()
                .expect("LOCK_TEST_POSTGRES_URL names a PostgreSQL server")
                .clone(),
        ),
        Err(OpenError::Table(e)) => panic!("a valid bench table name: {e:?}"),
        Err(e) => {
            // The provider's own error, as the bench printed it before the registry.
            test_support::skip::unreachable("postgres", &url, &e.into_lock_error());
            None
        }
    }
}
