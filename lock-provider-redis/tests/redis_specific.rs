//! What is particular to Redis: the key layout, a losing acquire that writes nothing, scripts
//! re-sent after `NOSCRIPT`, the persistence check at connect, the replica wait, the prefix
//! check. Tests that flush scripts or need a server without persistence run a private
//! `redis-server`, never touching the shared one's configuration.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use lock_core::{AcquireOutcome, FireSlot, LockError, LockProvider, RefusalReason, testkit};
use lock_provider_redis::{Persistence, RedisLockConfig, RedisLockProvider, redis};
use test_support::redis_server::{Durability, PrivateRedis};

fn acquired(outcome: AcquireOutcome) -> lock_core::Lease {
    match outcome {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("refused: {refused:?}"),
    }
}

/// A connection of the test's own (not the provider's), e.g. for WATCH.
async fn own_connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("a valid URL")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

async fn delete(conn: &mut redis::aio::MultiplexedConnection, key: &str) {
    let _: i64 = redis::cmd("DEL")
        .arg(key)
        .query_async(conn)
        .await
        .expect("DEL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_lock_is_one_hash_that_never_expires() {
    let prefix = common::unique_prefix("layout");
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    let name = testkit::unique_name("layout");
    let now = provider.database_time().await.expect("TIME");
    let slot = FireSlot::new(now);
    let request = testkit::request(&name, "host-a", Duration::from_secs(30), Some(slot));
    let lease = acquired(provider.acquire(&request).await.expect("acquire"));

    let key = format!("{prefix}:{name}");
    assert_eq!(provider.key(&name), key);
    let mut conn = own_connection(&common::url()).await;
    let hash: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .expect("HGETALL");
    let mut fields: Vec<&str> = hash.keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        ["fence", "last_fire", "lock_until", "locked_at", "locked_by"]
    );
    assert_eq!(hash["locked_by"], "host-a");
    assert_eq!(hash["fence"], lease.fence().to_string());
    assert_eq!(hash["last_fire"], slot.unix_millis().to_string());
    let (until, at): (i64, i64) = (
        hash["lock_until"].parse().unwrap(),
        hash["locked_at"].parse().unwrap(),
    );
    assert_eq!(
        until - at,
        30_000,
        "milliseconds since the epoch, lease = lock_at_most_for"
    );

    // The key outlives the lease: its fence and last slot must survive it.
    provider
        .release(&lease, Duration::ZERO)
        .await
        .expect("release");
    let ttl: i64 = redis::cmd("TTL")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .expect("TTL");
    assert_eq!(ttl, -1, "the lock's key has no expiry");
    delete(&mut conn, &key).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_losing_acquire_writes_nothing() {
    let Some(provider) = common::provider().await else {
        return;
    };
    let name = testkit::unique_name("losing");
    let key = provider.key(&name);
    let held = testkit::request(&name, "holder", Duration::from_secs(30), None);
    let lease = acquired(provider.acquire(&held).await.expect("acquire"));

    // WATCH makes EXEC fail if anything, a script included, writes the key in between (even
    // a write of the same values): the transaction going through proves no write.
    let mut watcher = own_connection(&common::url()).await;
    let () = redis::cmd("WATCH")
        .arg(&key)
        .query_async(&mut watcher)
        .await
        .expect("WATCH");
    for (owner, slot) in [
        ("other", None),
        ("other", Some(FireSlot::new(chrono::Utc::now()))),
    ] {
        let request = testkit::request(&name, owner, Duration::from_secs(30), slot);
        match provider.acquire(&request).await.expect("acquire") {
            AcquireOutcome::Refused(refusal) => {
                assert_eq!(refusal.reason, RefusalReason::Held);
                assert_eq!(refusal.locked_by.as_deref(), Some("holder"));
                assert!(refusal.lock_until.is_some() && refusal.database_now.is_some());
            }
            granted => panic!("a held lock was granted: {granted:?}"),
        }
    }
    let exec: Option<(String,)> = redis::pipe()
        .atomic()
        .cmd("PING")
        .query_async(&mut watcher)
        .await
        .expect("MULTI/EXEC");
    assert_eq!(
        exec,
        Some(("PONG".to_owned(),)),
        "a refused acquire wrote the key"
    );

    // The control: a grant does write it, and the same WATCH sees that.
    provider
        .release(&lease, Duration::ZERO)
        .await
        .expect("release");
    let () = redis::cmd("WATCH")
        .arg(&key)
        .query_async(&mut watcher)
        .await
        .expect("WATCH");
    let lease = acquired(provider.acquire(&held).await.expect("acquire"));
    let exec: Option<(String,)> = redis::pipe()
        .atomic()
        .cmd("PING")
        .query_async(&mut watcher)
        .await
        .expect("MULTI/EXEC");
    assert_eq!(exec, None, "WATCH did not see the grant's write");
    provider
        .release(&lease, Duration::ZERO)
        .await
        .expect("release");
    delete(&mut watcher, &key).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_sent_again_after_noscript() {
    let Some(redis) = PrivateRedis::start(Durability::Nothing) else {
        return;
    };
    let provider = RedisLockProvider::connect(&redis.url())
        .await
        .expect("connect");
    let name = testkit::unique_name("noscript");
    let request = testkit::request(&name, "a", Duration::from_secs(30), None);
    let lease = acquired(provider.acquire(&request).await.expect("acquire"));
    // As after a restart or a failover to a server that never saw the scripts.
    assert!(
        redis
            .command("SCRIPT FLUSH")
            .expect("SCRIPT FLUSH")
            .starts_with("+OK")
    );
    assert!(
        provider
            .extend(&lease, Duration::from_secs(30))
            .await
            .expect("extend after NOSCRIPT")
    );
    assert!(
        provider
            .release(&lease, Duration::ZERO)
            .await
            .expect("release")
    );
    assert!(redis.command("SCRIPT FLUSH").unwrap().starts_with("+OK"));
    let again = acquired(
        provider
            .acquire(&request)
            .await
            .expect("acquire after NOSCRIPT"),
    );
    assert_eq!(again.fence(), lease.fence() + 1);
}

// current_thread: the log capture is the test thread's, and so is every poll of connect.
#[tokio::test(flavor = "current_thread")]
async fn connect_warns_when_a_restart_would_forget_fences() {
    let Some(plain) = PrivateRedis::start(Durability::Nothing) else {
        return;
    };
    let (logs, guard) = test_support::logs::capture();
    let provider = RedisLockProvider::connect(&plain.url())
        .await
        .expect("connect");
    drop(guard);
    assert_eq!(provider.persistence(), Some(&Persistence::None));
    let text = logs.text();
    assert!(
        text.contains("a restart of this Redis server forgets the locks, fences and last_fire")
            && text.contains("appendonly yes"),
        "{text}"
    );

    let Some(durable) = PrivateRedis::start(Durability::AppendOnly) else {
        return;
    };
    let (logs, guard) = test_support::logs::capture();
    let provider = RedisLockProvider::connect(&durable.url())
        .await
        .expect("connect");
    drop(guard);
    assert_eq!(
        provider.persistence(),
        Some(&Persistence::AppendOnly {
            fsync: "always".into()
        })
    );
    assert!(!provider.persistence().unwrap().restart_loses_fences());
    assert!(logs.text().is_empty(), "{}", logs.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_no_replica_acknowledged_is_released_and_fails() {
    // The shared server has no replica: WAIT 1 returns 0 after its timeout.
    let prefix = common::unique_prefix("wait");
    let config = RedisLockConfig::default()
        .with_key_prefix(&prefix)
        .with_replica_acks(1, Duration::from_millis(50));
    let provider = match RedisLockProvider::connect_with_config(&common::url(), config).await {
        Ok(provider) => provider,
        Err(e) => return common::unreachable(&e).unwrap_or(()),
    };
    let name: Arc<str> = testkit::unique_name("wait");
    let slot = FireSlot::new(provider.database_time().await.expect("TIME"));
    let request = testkit::request(&name, "a", Duration::from_secs(30), Some(slot));
    let error = provider
        .acquire(&request)
        .await
        .expect_err("no replica acknowledged");
    let text = error.to_string() + &test_support::skip::chain(&error);
    assert!(
        text.contains("acknowledged by 0 of the 1 replicas"),
        "{text}"
    );
    let record = provider
        .read_lock(&name)
        .await
        .expect("read")
        .expect("the row");
    assert!(
        !record.held,
        "the unacknowledged grant was released: {record:?}"
    );
    assert_eq!(record.fence, 1);
    assert_eq!(
        record.last_fire,
        Some(slot.instant()),
        "its slot stays spent"
    );
    let mut conn = own_connection(&common::url()).await;
    delete(&mut conn, &provider.key(&name)).await;
}

#[tokio::test]
async fn a_bad_prefix_is_refused_before_connecting() {
    // Port 1: nothing listens; the prefix must be refused first.
    let config = RedisLockConfig::default().with_key_prefix("locks *");
    let error = RedisLockProvider::connect_with_config("redis://127.0.0.1:1", config)
        .await
        .expect_err("a bad prefix");
    assert!(
        matches!(error, LockError::InvalidConfiguration(_)),
        "{error}"
    );
    assert!(error.to_string().contains("key prefix"), "{error}");
    let error = RedisLockProvider::connect("rediss://:pw@[::1")
        .await
        .expect_err("a bad URL");
    assert!(!error.to_string().contains("pw"), "{error}");
}
