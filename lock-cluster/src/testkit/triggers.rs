//! The hand-back of a claimed trigger request of a [`Cluster`](crate::Cluster): only its
//! claimer hands it back, and it is then pending again, claimable exactly once.

use crate::{ClusterProvider, ControlKind, Heartbeat, InstanceInfo};
use lock_core::FireSlot;
use lock_core::testkit::unique_name;

/// [`unclaim_trigger`](crate::ClusterStore::unclaim_trigger): refused (nothing written) for a
/// pending request, an unknown id, or an instance other than the claimer; for the claimer the
/// request is unclaimed, brought back by the next heartbeat as pending, and claimed again by
/// exactly one instance. Works on tables that hold other rows (its job name is its own). Run by
/// [`operations_store`](super::operations_store).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::trigger_hand_back(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn trigger_hand_back(provider: &dyn ClusterProvider) {
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let job = unique_name("hand-back");
    let request = store
        .request_trigger(&job, "op@host")
        .await
        .expect("trigger");
    assert!(
        !store.unclaim_trigger(request, "a").await.expect("unclaim"),
        "a pending request has no claim to hand back"
    );
    assert!(
        !store
            .unclaim_trigger(request + 1_000_000, "a")
            .await
            .expect("unclaim an unknown id"),
        "no such request"
    );
    assert!(store.claim_trigger(request, "a").await.expect("claim"));
    assert!(
        !store.unclaim_trigger(request, "b").await.expect("unclaim"),
        "only the claimer hands a request back"
    );
    let row = |control: Vec<crate::ControlRequest>| {
        control
            .into_iter()
            .find(|c| c.id == request)
            .expect("the request is kept")
    };
    let claimed = row(store.control().await.expect("control"));
    assert_eq!(claimed.claimed_by.as_deref(), Some("a"));

    assert!(store.unclaim_trigger(request, "a").await.expect("unclaim"));
    assert!(
        !store.unclaim_trigger(request, "a").await.expect("unclaim"),
        "handed back once"
    );
    let handed_back = row(store.control().await.expect("control"));
    assert_eq!(
        (handed_back.kind, handed_back.job.as_str()),
        (ControlKind::Trigger, &*job)
    );
    assert_eq!(handed_back.claimed_by, None, "unclaimed");
    assert_eq!(handed_back.claimed_at, None);
    assert_eq!(
        handed_back.requested_by, "op@host",
        "the request is unchanged"
    );

    // Pending again: the next heartbeat brings it back, and one instance claims it.
    let now = FireSlot::new(provider.database_time().await.expect("database time")).instant();
    let beat = Heartbeat {
        instance: InstanceInfo {
            instance_id: "testkit:hand-back".into(),
            host: "testkit-host".into(),
            pid: 1,
            version: "9.9.9".into(),
            started_at: now,
            clock_offset_ms: 0,
            heartbeat_ms: 1000,
        },
        jobs: Vec::new(),
    };
    let pending = store.heartbeat(&beat).await.expect("heartbeat");
    assert!(
        pending
            .iter()
            .any(|c| c.id == request && c.kind == ControlKind::Trigger),
        "the heartbeat brings the handed-back request: {pending:?}"
    );
    assert!(
        store
            .claim_trigger(request, "b")
            .await
            .expect("claim again")
    );
    assert!(
        !store
            .claim_trigger(request, "c")
            .await
            .expect("claim again"),
        "claimed once"
    );
    assert_eq!(
        row(store.control().await.expect("control"))
            .claimed_by
            .as_deref(),
        Some("b")
    );
}
