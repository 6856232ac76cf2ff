//! `list_locks` reads the prefix's lock index, not the keyspace: no `SCAN`, and a prefix
//! nested under another (`p:nested` under `p`) keeps its locks to itself — the outer prefix
//! neither lists them nor force-unlocks or resets them. On a private `redis-server`, whose
//! command statistics are this test's alone.

use std::collections::HashMap;
use std::time::Duration;

use lock_core::{AcquireOutcome, LockProvider, LockRequest};
use lock_provider_redis::{RedisLockProvider, redis};
use test_support::redis_server::{Durability, PrivateRedis};

fn request(name: &str) -> LockRequest {
    LockRequest {
        name: name.into(),
        locked_by: "test".into(),
        lock_at_most_for: Duration::from_secs(600),
        slot: None,
        max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
        give_up_at: None,
    }
}

async fn scan_calls(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    let calls: HashMap<&str, u64> = info
        .lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.strip_prefix("calls=")?.split(',').next()?;
            Some((name, calls.parse().ok()?))
        })
        .collect();
    calls.get("scan").copied().unwrap_or(0)
}

async fn names(provider: &RedisLockProvider) -> Vec<String> {
    let mut names: Vec<String> = provider
        .list_locks()
        .await
        .expect("list")
        .into_iter()
        .map(|record| record.name.to_string())
        .collect();
    names.sort();
    names
}

async fn nested_prefixes_are_isolated(outer_prefix: &str, inner_prefix: &str) {
    let Some(server) = PrivateRedis::start(Durability::Nothing) else {
        return;
    };
    let connect = |prefix: &str| {
        let url = server.url();
        let prefix = prefix.to_owned();
        async move {
            RedisLockProvider::connect(&url)
                .await
                .expect("connect")
                .with_key_prefix(&prefix)
                .expect("prefix")
        }
    };
    let outer = connect(outer_prefix).await;
    let inner = connect(inner_prefix).await;
    for (provider, name) in [(&outer, "own"), (&inner, "x"), (&inner, "y")] {
        let outcome = provider.acquire(&request(name)).await.expect("acquire");
        assert!(matches!(outcome, AcquireOutcome::Acquired(_)), "{name}");
    }
    // A batch adds to the index too.
    let batch = outer
        .acquire_many(&[request("batched")])
        .await
        .expect("a batch");
    assert!(matches!(batch[0], AcquireOutcome::Acquired(_)));

    let mut conn = redis::Client::open(server.url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    let scans = scan_calls(&mut conn).await;
    let (outer_names, inner_names) = (names(&outer).await, names(&inner).await);
    assert_eq!(
        scan_calls(&mut conn).await,
        scans,
        "list_locks reads the index, never SCANs"
    );
    assert_eq!(outer_names, ["batched", "own"]);
    assert_eq!(inner_names, ["x", "y"]);

    // `p`'s `nested:x` is the key of `p:nested`'s `x`: not `p`'s to unlock or reset.
    let (head, tail) = inner_prefix.split_at(outer_prefix.len() + 1);
    assert_eq!(&head[outer_prefix.len()..], ":");
    let nested_name = format!("{tail}:x");
    assert_eq!(outer.key(&nested_name), inner.key("x"));
    assert_eq!(
        outer.force_unlock(&nested_name).await.expect("unlock"),
        None
    );
    assert_eq!(outer.reset_slot(&nested_name).await.expect("reset"), None);
    let x = inner.read_lock("x").await.expect("read").expect("a row");
    assert!(
        x.held,
        "still held after the outer prefix's force-unlock: {x:?}"
    );
    // Its own locks it unlocks as before.
    let own = outer.force_unlock("own").await.expect("unlock");
    assert!(own.is_some_and(|record| record.held));
    assert!(
        !outer
            .read_lock("own")
            .await
            .expect("read")
            .expect("row")
            .held
    );
    let x = inner.force_unlock("x").await.expect("unlock");
    assert!(x.is_some_and(|record| record.held));
}

#[tokio::test]
async fn a_nested_prefix_is_neither_listed_nor_unlocked_and_listing_never_scans() {
    nested_prefixes_are_isolated("p", "p:nested").await;
}

#[tokio::test]
async fn the_same_holds_under_a_hash_tag() {
    nested_prefixes_are_isolated("{p}", "{p}:nested").await;
}
