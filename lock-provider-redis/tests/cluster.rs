//! Batches on Redis Cluster: a script may only touch keys of one hash slot. On a cluster of
//! one node (every slot on a private `redis-server`), a batch over keys of different slots is
//! answered `CROSSSLOT` once and then split by hash tag, with every outcome what single
//! acquires would have decided; keys under a hash-tag prefix stay one call.

use std::time::Duration;

use lock_core::{AcquireOutcome, LockProvider, LockRequest, RefusalReason, testkit};
use lock_provider_redis::{RedisLockConfig, RedisLockProvider};
use test_support::redis_server::PrivateRedis;

fn request(name: &str, by: &str) -> LockRequest {
    LockRequest {
        name: name.into(),
        locked_by: by.into(),
        lock_at_most_for: Duration::from_secs(60),
        slot: None,
        max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
        give_up_at: None,
    }
}

// current_thread: the log capture is the test thread's.
#[tokio::test(flavor = "current_thread")]
async fn a_batch_over_several_slots_is_split_by_hash_tag() {
    let Some(cluster) = PrivateRedis::start_cluster_of_one() else {
        return;
    };
    let provider = RedisLockProvider::connect(&cluster.url())
        .await
        .expect("connect");
    // Names whose keys hash to different slots (no hash tag in the default prefix).
    let names: Vec<String> = (0..20).map(|i| format!("cluster-job-{i}")).collect();
    let requests: Vec<LockRequest> = names.iter().map(|n| request(n, "a")).collect();
    let (logs, guard) = test_support::logs::capture_at(tracing::Level::INFO);
    let first = provider.acquire_many(&requests).await.expect("a batch");
    drop(guard);
    assert!(
        logs.text().contains("CROSSSLOT"),
        "the cluster refused the whole batch once: {}",
        logs.text()
    );
    let leases: Vec<_> = first
        .into_iter()
        .map(|o| match o {
            AcquireOutcome::Acquired(lease) => lease,
            refused => panic!("a free lock was refused: {refused:?}"),
        })
        .collect();
    // The same names again, by another instance: every one held.
    let others: Vec<LockRequest> = names.iter().map(|n| request(n, "b")).collect();
    for outcome in provider.acquire_many(&others).await.expect("a batch") {
        match outcome {
            AcquireOutcome::Refused(refusal) => {
                assert_eq!(refusal.reason, RefusalReason::Held);
                assert_eq!(refusal.locked_by.as_deref(), Some("a"));
            }
            granted => panic!("a held lock was granted: {granted:?}"),
        }
    }
    let releases: Vec<_> = leases.iter().map(|l| (l.clone(), Duration::ZERO)).collect();
    assert_eq!(
        provider.release_many(&releases).await.expect("released"),
        vec![true; names.len()]
    );
    // Released: the other instance's batch takes every one.
    let again = provider.acquire_many(&others).await.expect("a batch");
    assert!(
        again
            .iter()
            .all(|o| matches!(o, AcquireOutcome::Acquired(_))),
        "{again:?}"
    );
    // The batch guarantees, on the cluster.
    testkit::batch_mixed_outcomes(&provider).await;
    testkit::batch_concurrent_fuzz(&provider).await;
}

#[tokio::test(flavor = "current_thread")]
async fn keys_under_one_hash_tag_are_one_call_on_a_cluster() {
    let Some(cluster) = PrivateRedis::start_cluster_of_one() else {
        return;
    };
    let config = RedisLockConfig::default().with_key_prefix("{locks}");
    let provider = RedisLockProvider::connect_with_config(&cluster.url(), config)
        .await
        .expect("connect");
    let requests: Vec<LockRequest> = (0..20)
        .map(|i| request(&format!("tagged-job-{i}"), "a"))
        .collect();
    let (logs, guard) = test_support::logs::capture_at(tracing::Level::INFO);
    let outcomes = provider.acquire_many(&requests).await.expect("a batch");
    drop(guard);
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, AcquireOutcome::Acquired(_))),
        "{outcomes:?}"
    );
    assert!(!logs.text().contains("CROSSSLOT"), "{}", logs.text());
}

/// Listing on a cluster: under a hash tag the lock index shares the locks' slot and is kept;
/// without one the locks are in every slot, single acquires and unlocks still work (the index
/// is dropped after the first `CROSSSLOT`), and `list_locks` finds the locks by `SCAN`.
#[tokio::test(flavor = "current_thread")]
async fn locks_are_listed_on_a_cluster_with_and_without_a_hash_tag() {
    let Some(cluster) = PrivateRedis::start_cluster_of_one() else {
        return;
    };
    for prefix in ["{locks}", "plain"] {
        let config = RedisLockConfig::default().with_key_prefix(prefix);
        let provider = RedisLockProvider::connect_with_config(&cluster.url(), config)
            .await
            .expect("connect");
        let names: Vec<String> = (0..5).map(|i| format!("listed-{i}")).collect();
        for name in &names {
            let outcome = provider
                .acquire(&request(name, "a"))
                .await
                .expect("acquire");
            assert!(
                matches!(outcome, AcquireOutcome::Acquired(_)),
                "{prefix}: {name}"
            );
        }
        let mut listed: Vec<String> = provider
            .list_locks()
            .await
            .expect("list")
            .into_iter()
            .map(|record| record.name.to_string())
            .collect();
        listed.sort();
        assert_eq!(listed, names, "{prefix}");
        let unlocked = provider.force_unlock(&names[0]).await.expect("unlock");
        assert!(unlocked.is_some_and(|record| record.held), "{prefix}");
    }
}
