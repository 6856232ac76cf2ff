//! Shared by the integration tests: a provider on the test server, with the skip-unless-CI
//! rule of `test-support`, and a key prefix of the test's own.

#![allow(dead_code, unused_imports)] // each test binary uses a different part of this module

use lock_provider_redis::{RedisLockConfig, RedisLockProvider};

pub use test_support::db::redis_url as url;

/// The key prefix the conformance tests share (they use random lock names).
pub const CONFORMANCE_PREFIX: &str = "lock_provider_redis_conformance";

/// The skip-unless-CI rule for an unreachable server: fails under `CI`, otherwise says so
/// loudly and the test is skipped (returns `None`).
pub fn unreachable<T>(error: &dyn std::fmt::Display) -> Option<T> {
    test_support::skip::unreachable("redis", &url(), error);
    None
}

/// A provider on the test server with `prefix`.
pub async fn provider_with_prefix(prefix: &str) -> Option<RedisLockProvider> {
    let config = RedisLockConfig::default().with_key_prefix(prefix);
    match RedisLockProvider::connect_with_config(&url(), config).await {
        Ok(provider) => Some(provider),
        Err(e) => unreachable(&test_support::skip::chain(&e)),
    }
}

/// A provider on the shared conformance prefix.
pub async fn provider() -> Option<RedisLockProvider> {
    provider_with_prefix(CONFORMANCE_PREFIX).await
}

/// A prefix no other test or run uses.
pub fn unique_prefix(what: &str) -> String {
    test_support::table::unique_table(what)
}

/// Deletes every key of `prefix` when dropped (also when the test panics): the locks
/// `<prefix>:*` and the operations keys `{<prefix>:ops}:*`.
pub fn delete_keys(prefix: &str) -> test_support::table::Cleanup {
    let patterns = [format!("{prefix}:*"), format!("{{{prefix}:ops}}:*")];
    test_support::table::Cleanup::new(move || async move {
        let Ok(client) = lock_provider_redis::redis::Client::open(url()) else {
            return;
        };
        let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
            return;
        };
        for pattern in patterns {
            let keys = scan(&mut conn, &pattern).await;
            if !keys.is_empty() {
                let _: Result<i64, _> = lock_provider_redis::redis::cmd("DEL")
                    .arg(&keys)
                    .query_async(&mut conn)
                    .await;
            }
        }
    })
}

/// Every key matching `pattern` (`SCAN`, deduplicated, sorted).
pub async fn scan(
    conn: &mut lock_provider_redis::redis::aio::MultiplexedConnection,
    pattern: &str,
) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = lock_provider_redis::redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await
            .expect("SCAN");
        keys.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    keys.sort();
    keys.dedup();
    keys
}
