//! The rows of the job model in a [`Cluster`](crate::Cluster): the requests that run a
//! dependent job after its parents ([`ControlKind::After`]), and a manual run's parameters
//! kept from its trigger request to its history row.

use chrono::TimeDelta;

use crate::{ClusterProvider, ControlKind, Expired, Heartbeat, InstanceInfo, RunStart};
use lock_core::testkit::unique_name;
use lock_core::{FireKind, FireSlot, Params};

fn beat(started: chrono::DateTime<chrono::Utc>) -> Heartbeat {
    Heartbeat {
        instance: InstanceInfo {
            instance_id: unique_name("testkit-dependents").to_string(),
            host: "testkit-host".into(),
            pid: 7,
            version: "9.9.9".into(),
            started_at: started,
            clock_offset_ms: 0,
            heartbeat_ms: 1000,
        },
        jobs: Vec::new(),
    }
}

/// [`request_after`](crate::ClusterStore::request_after),
/// [`after_requests`](crate::ClusterStore::after_requests) and
/// [`delete_after`](crate::ClusterStore::delete_after): an `after` row keeps its child, slot
/// (to the millisecond) and parent (`name` or `name#shard`); every heartbeat brings it back
/// until it is deleted; it is not a trigger request (it cannot be claimed nor withdrawn);
/// `after_requests` answers per (child, slot); `delete_after` deletes the child's rows through
/// a slot and no other job's; housekeeping ([`Expired::ClaimedTriggers`]) deletes rows
/// requested before its cut-off. Works on tables that hold other rows. Run by
/// [`operations_store`](super::operations_store).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::after_requests(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn after_requests(provider: &dyn ClusterProvider) {
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let now = provider.database_time().await.expect("database time");
    let slot = FireSlot::new(now).instant() + TimeDelta::milliseconds(123);
    let next = slot + TimeDelta::minutes(1);
    let child = unique_name("child").to_string();
    let other = unique_name("other-child").to_string();

    let first = store
        .request_after(&child, slot, "import")
        .await
        .expect("request after");
    let second = store
        .request_after(&child, slot, "refunds#2")
        .await
        .expect("request after a shard");
    assert_ne!(first, second, "each request has its own id");
    store
        .request_after(&child, next, "import")
        .await
        .expect("request after, next slot");
    store
        .request_after(&other, slot, "import")
        .await
        .expect("request after, other child");

    let pending = store.heartbeat(&beat(now)).await.expect("heartbeat");
    let mine: Vec<_> = pending.iter().filter(|c| c.job == child).collect();
    assert_eq!(
        mine.len(),
        3,
        "the heartbeat returns every after row: {pending:?}"
    );
    let row = mine
        .iter()
        .find(|c| c.id == second)
        .expect("the shard's row");
    assert_eq!(row.kind, ControlKind::After);
    assert_eq!(row.slot, Some(slot), "the slot is kept to the millisecond");
    assert_eq!(row.requested_by, "refunds#2");
    assert_eq!(row.claimed_by, None);
    assert!(row.params.is_empty());
    assert!(
        (row.requested_at - now).abs() < TimeDelta::seconds(30),
        "requested at the store's now: {row:?}"
    );

    assert!(
        !store.claim_trigger(first, "a").await.expect("claim"),
        "an after row is not a trigger request"
    );
    assert!(
        !store.withdraw_trigger(first).await.expect("withdraw"),
        "an after row is not withdrawn as a trigger request"
    );

    let mut parents = store
        .after_requests(&child, slot)
        .await
        .expect("after requests");
    parents.sort();
    assert_eq!(parents, ["import", "refunds#2"]);
    assert_eq!(
        store
            .after_requests(&child, next)
            .await
            .expect("after requests"),
        ["import"]
    );
    assert!(
        store
            .after_requests(&child, slot + TimeDelta::milliseconds(1))
            .await
            .expect("after requests")
            .is_empty(),
        "a slot is matched exactly"
    );

    assert_eq!(store.delete_after(&child, slot).await.expect("delete"), 2);
    assert_eq!(
        store
            .delete_after(&child, slot)
            .await
            .expect("delete again"),
        0,
        "deleted once"
    );
    let pending = store.heartbeat(&beat(now)).await.expect("heartbeat");
    let mut left: Vec<_> = pending
        .iter()
        .filter(|c| c.job == child || c.job == other)
        .map(|c| (c.id, c.job.as_str(), c.slot))
        .collect();
    left.sort();
    let left: Vec<_> = left.into_iter().map(|(_, job, slot)| (job, slot)).collect();
    assert_eq!(
        left,
        [(child.as_str(), Some(next)), (other.as_str(), Some(slot))],
        "only the child's rows through the slot were deleted"
    );

    // Housekeeping: rows requested before the cut-off go with the claimed triggers.
    let after_now = provider.database_time().await.expect("database time") + TimeDelta::seconds(1);
    let mut deleted = 0;
    while store
        .delete_expired(Expired::ClaimedTriggers, after_now, 1000)
        .await
        .expect("housekeeping")
        > 0
    {
        deleted += 1;
    }
    assert!(deleted > 0, "housekeeping deleted something");
    let pending = store.heartbeat(&beat(now)).await.expect("heartbeat");
    assert!(
        !pending.iter().any(|c| c.job == child || c.job == other),
        "housekeeping deleted the old after rows: {pending:?}"
    );
}

/// [`request_trigger_with_params`](crate::OperatorStore::request_trigger_with_params): the
/// parameters (in order, with characters that need escaping) come back with the pending
/// request and in the control rows, and a run started with them keeps them in its history
/// row; a run without parameters reads back none. Run by
/// [`operations_store`](super::operations_store).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::trigger_params(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn trigger_params(provider: &dyn ClusterProvider) {
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let now = provider.database_time().await.expect("database time");
    let job = unique_name("params").to_string();
    let long = "é".repeat(500);
    let mut params = Params::parse_pairs([
        "day=2026-12-01",
        "query=a&b=c%d +e",
        "empty=",
        "Z.z-9_=ünïcode ☃",
    ])
    .expect("params");
    params.insert("long", long).expect("a 1000-byte value");
    let id = store
        .request_trigger_with_params(&job, "op@host", &params)
        .await
        .expect("trigger with params");
    let pending = store.heartbeat(&beat(now)).await.expect("heartbeat");
    let request = pending
        .iter()
        .find(|c| c.id == id)
        .expect("the request is pending");
    assert_eq!(request.kind, ControlKind::Trigger);
    assert_eq!(request.params, params, "parameters kept in order");
    assert_eq!(request.slot, None);
    let plain = store
        .request_trigger(&job, "op@host")
        .await
        .expect("trigger without params");
    let control = store.control().await.expect("control");
    let row = |id| control.iter().find(|c| c.id == id).expect("kept");
    assert_eq!(row(id).params, params);
    assert!(row(plain).params.is_empty());
    assert!(store.claim_trigger(id, "a").await.expect("claim"));

    let run = |params: Params| RunStart {
        job: job.clone(),
        slot: None,
        fire_kind: FireKind::Manual,
        instance_id: "a".into(),
        fence: 1,
        attempt: 1,
        params,
    };
    let with = store.run_started(&run(params.clone())).await.expect("run");
    let without = store.run_started(&run(Params::new())).await.expect("run");
    let batched = store
        .runs_started(&[run(params.clone())])
        .await
        .expect("batched run")[0];
    let history = store.history(&job, 10).await.expect("history");
    let record = |id| history.iter().find(|r| r.id == id).expect("in the history");
    assert_eq!(
        record(with).params,
        params,
        "parameters kept in the history"
    );
    assert_eq!(record(batched).params, params, "and by a batched start");
    assert!(record(without).params.is_empty());
    let page = store.history_page(&job, None, 10).await.expect("page");
    assert_eq!(
        page.iter()
            .find(|r| r.id == with)
            .expect("on the page")
            .params,
        params
    );
}
