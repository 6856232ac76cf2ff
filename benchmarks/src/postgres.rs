//! The PostgreSQL server the database benches run against.

use lock_provider_postgres::PostgresLockProvider;
use lock_providers::{OpenError, OpenOptions};

/// `LOCK_TEST_POSTGRES_URL`, or the server of the development machine and CI.
///
/// ```
/// assert!(benchmarks::postgres::url().starts_with("postgres"));
/// ```
pub fn url() -> String {
    std::env::var("LOCK_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

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
            let e = e.into_lock_error();
            if std::env::var_os("CI").is_some() {
                panic!(
                    "PostgreSQL unreachable at {} while CI is set: {e}",
                    redact(&url)
                )
            }
            eprintln!("SKIPPED: postgres unreachable at {}: {e}", redact(&url));
            None
        }
    }
}

/// The URL without its password, for printing.
///
/// ```
/// assert_eq!(
///     benchmarks::postgres::redact("postgres://app:secret@db/app"),
///     "postgres://app:***@db/app"
/// );
/// assert_eq!(benchmarks::postgres::redact("postgres://app@db/app"), "postgres://app@db/app");
/// ```
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if url[scheme + 3..at].contains(':') => {
            let user_end = scheme + 3 + url[scheme + 3..at].find(':').unwrap_or(0);
            format!("{}:***{}", &url[..user_end], &url[at..])
        }
        _ => url.to_owned(),
    }
}
