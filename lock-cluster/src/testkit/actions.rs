//! The contract of the action log of an
//! [`Cluster`](crate::Cluster): rows written on the store's clock,
//! read back newest first per job, texts cut to the columns, and housekeeping in batches.

use chrono::TimeDelta;

use crate::ClusterProvider;
use crate::{Action, ActionRecord, Expired, MAX_DETAIL_LEN, MAX_TEXT_LEN, truncate};
use lock_core::FireSlot;

/// The action log of the provider's store, on an empty log: [`record_action`] then
/// [`actions`] (newest first, per job, limited, times on the store's clock, texts cut to
/// [`MAX_TEXT_LEN`] and [`MAX_DETAIL_LEN`] bytes), and [`Expired::Actions`] deleting at most
/// `limit` rows older than the cut-off. Run by [`operations_store`](super::operations_store).
///
/// [`record_action`]: crate::OperatorStore::record_action
/// [`actions`]: crate::OperatorStore::actions
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::action_log(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn action_log(provider: &dyn ClusterProvider) {
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let db_now = || async { provider.database_time().await.expect("database time") };
    let started = FireSlot::new(db_now().await).instant();
    let slack = TimeDelta::seconds(5);

    let long_detail = "é".repeat(600);
    let long_requester = format!("dashboard:{}", "b".repeat(300));
    let written = [
        ActionRecord::new("report", Action::Pause, "dashboard:alice"),
        ActionRecord::new("report", Action::Resume, "lockctl:bob")
            .with_detail(Some("was not paused; nothing changed")),
        ActionRecord::new("report", Action::Trigger, "dashboard:alice")
            .with_detail(Some("request 42")),
        ActionRecord::new("report_lock", Action::Unlock, long_requester.as_str())
            .with_detail(Some(long_detail.as_str())),
    ];
    for action in &written {
        store.record_action(action).await.expect("record action");
    }

    let log = store.actions("report", 10).await.expect("actions");
    let seen: Vec<_> = log
        .iter()
        .map(|a| (a.action, a.requested_by.as_str(), a.detail.as_deref()))
        .collect();
    assert_eq!(
        seen,
        [
            (Action::Trigger, "dashboard:alice", Some("request 42")),
            (
                Action::Resume,
                "lockctl:bob",
                Some("was not paused; nothing changed")
            ),
            (Action::Pause, "dashboard:alice", None),
        ],
        "the job's actions, newest first, and only the job's: {log:?}"
    );
    assert!(
        log.windows(2)
            .all(|w| w[0].id > w[1].id && w[0].at >= w[1].at),
        "ids and times decrease down the log: {log:?}"
    );
    assert!(log.iter().all(|a| a.job == "report"));
    assert!(
        log.iter().all(|a| (a.at - started).abs() < slack),
        "times on the store's clock ({started}): {log:?}"
    );
    let limited = store.actions("report", 2).await.expect("actions");
    assert_eq!(
        limited.iter().map(|a| a.id).collect::<Vec<_>>(),
        [log[0].id, log[1].id],
        "the limit keeps the newest"
    );

    let unlock = store.actions("report_lock", 10).await.expect("actions");
    assert_eq!(unlock.len(), 1, "{unlock:?}");
    assert_eq!(unlock[0].action, Action::Unlock);
    assert_eq!(
        unlock[0].requested_by,
        truncate(&long_requester, MAX_TEXT_LEN),
        "the requester cut to its column"
    );
    assert_eq!(
        unlock[0].detail.as_deref(),
        Some(truncate(&long_detail, MAX_DETAIL_LEN)),
        "the detail cut to its column at a character boundary"
    );
    assert!(
        store
            .actions("nothing", 10)
            .await
            .expect("actions")
            .is_empty()
    );

    // Housekeeping: only rows older than the cut-off, at most `limit` per call.
    let future = db_now().await + TimeDelta::seconds(60);
    let delete = |before, limit| store.delete_expired(Expired::Actions, before, limit);
    assert_eq!(delete(started - slack, 10).await.expect("delete"), 0);
    assert_eq!(delete(future, 3).await.expect("delete"), 3);
    assert_eq!(delete(future, 3).await.expect("delete"), 1);
    assert!(
        store
            .actions("report_lock", 10)
            .await
            .expect("actions")
            .is_empty()
    );
}
