//! Shared by the integration tests: connections, pools and a provider on the test server.
//! Where the server is, the skip-unless-CI rule, unique tables and their clean-up come from
//! `test-support`.

#![allow(dead_code, unused_imports)] // each test binary uses a different part of this module

use std::time::Duration;

use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::{self, Conn, Opts, Pool, prelude::Queryable};

/// The table the conformance tests share (they use random lock names).
pub const CONFORMANCE_TABLE: &str = "lock_provider_mysql_conformance";

pub use test_support::db::mysql_url as url;
pub use test_support::skip::{skip_unless_ci, skipped};
pub use test_support::table::{drop_mysql_table as drop_table, unique_table};

/// The skip-unless-CI rule for an unreachable server: fails under `CI`, otherwise says so
/// loudly and the test is skipped (returns `None`).
pub fn unreachable<T>(error: &dyn std::fmt::Display) -> Option<T> {
    test_support::skip::unreachable("mysql", &url(), error);
    None
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
        Err(e) => return unreachable(&test_support::skip::chain(&e)),
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
