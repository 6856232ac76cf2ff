//! Shared by the integration tests: where the server is, what to do when it is not there, and
//! tables that clean up after themselves.

#![allow(dead_code)] // each test binary uses a different part of this module

use std::time::Duration;

use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::{self, Conn, Opts, Pool, prelude::Queryable};

/// The table the conformance tests share (they use random lock names).
pub const CONFORMANCE_TABLE: &str = "lock_provider_mysql_conformance";

/// `LOCK_TEST_MYSQL_URL`, or the MariaDB of the development machine and CI.
pub fn url() -> String {
    std::env::var("LOCK_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

/// What to do when the server cannot be reached: with `CI` set the test fails, otherwise it
/// says so loudly and is skipped (returns `None`).
pub fn unreachable<T>(error: &dyn std::fmt::Display) -> Option<T> {
    let url = url();
    if std::env::var_os("CI").is_some() {
        panic!("MySQL/MariaDB unreachable at {url} (CI is set, so this is a failure): {error}");
    }
    skipped(&format!("mysql unreachable at {url}: {error}"));
    None
}

/// Says loudly that a test did not run. Written to the process's stderr directly: the test
/// harness captures `eprintln!` of passing tests, and a skip must not pass unseen.
pub fn skipped(why: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
}

/// A plain connection for the test's own statements (DDL, ShedLock's SQL, KILL).
pub async fn admin() -> Option<Conn> {
    let opts = match Opts::from_url(&url()) {
        Ok(opts) => opts,
        Err(e) => panic!("LOCK_TEST_MYSQL_URL is not a valid URL: {e}"),
    };
    match tokio::time::timeout(Duration::from_secs(10), Conn::new(opts)).await {
        Ok(Ok(conn)) => Some(conn),
        Ok(Err(e)) => unreachable(&e),
        Err(e) => unreachable(&e),
    }
}

/// A provider on the shared conformance table, created if needed.
pub async fn provider() -> Option<MySqlLockProvider> {
    let provider = match MySqlLockProvider::connect(&url()).await {
        Ok(p) => p,
        Err(e) => return unreachable(&DisplayChain(&e)),
    };
    let provider = provider
        .with_table(CONFORMANCE_TABLE)
        .expect("valid table name");
    provider.ensure_schema().await.expect("ensure_schema");
    Some(provider)
}

/// A pool built the way the provider recommends, with `max` connections at most.
pub fn pool(max: usize) -> Pool {
    let opts = Opts::from_url(&url()).expect("valid URL");
    let constraints = mysql_async::PoolConstraints::new(1.min(max), max).expect("constraints");
    let opts = MySqlLockProvider::pool_options(opts);
    let pool_opts = Opts::from(opts.clone())
        .pool_opts()
        .clone()
        .with_constraints(constraints);
    Pool::new(opts.pool_opts(pool_opts))
}

/// A table name unique to this run, for tests that need a table of their own.
pub fn unique_table(prefix: &str) -> String {
    let random: u32 = rand::random();
    format!("{prefix}_{random:08x}")
}

/// Drops the table when the test ends, even when it panics.
pub struct DropTable(pub String);

impl Drop for DropTable {
    fn drop(&mut self) {
        let table = self.0.clone();
        // Drop cannot await, and the test's runtime may be shutting down: use a runtime of our
        // own on a thread of its own.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                if let Ok(opts) = Opts::from_url(&url())
                    && let Ok(mut conn) = Conn::new(opts).await
                {
                    let _ = conn
                        .query_drop(format!("DROP TABLE IF EXISTS `{table}`"))
                        .await;
                    let _ = conn.disconnect().await;
                }
            });
        })
        .join();
    }
}

/// Shows an error with its whole source chain.
pub struct DisplayChain<'a>(pub &'a dyn std::error::Error);

impl std::fmt::Display for DisplayChain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(s) = source {
            write!(f, ": {s}")?;
            source = s.source();
        }
        Ok(())
    }
}
