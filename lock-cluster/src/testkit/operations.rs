//! The contract of an [`Cluster`](crate::Cluster): registry,
//! history, control and housekeeping, checked against a provider's real tables.
//!
//! Not part of `conformance_tests!`: a provider without operations tables passes the lock
//! suite. A provider that keeps them calls [`operations_store`] on a table of its own (the
//! function expects empty operations tables).

use chrono::TimeDelta;

use crate::ClusterProvider;
use crate::{
    ControlKind, Expired, Heartbeat, InstanceInfo, JobRegistration, RunEnd, RunRecord, RunStart,
    RunState,
};
use lock_core::{FireKind, FireSlot};

/// Every operation of the provider's [`Cluster`](crate::Cluster),
/// on empty tables: heartbeat upsert and read-back, pause and resume (idempotent), trigger
/// requests claimed exactly once and withdrawn only while unclaimed, run start and end with
/// their times on the store's clock, history order and limit, the last run and success per
/// job, housekeeping deletes in bounded batches, the batched history writes
/// ([`history_batches`](super::history_batches)), the action log
/// ([`action_log`](super::action_log)) and the hand-back of a claimed trigger request
/// ([`trigger_hand_back`](super::trigger_hand_back)) and one pause row under concurrent
/// pauses ([`concurrent_pauses`](super::concurrent_pauses)), the requests that run a dependent
/// job ([`after_requests`](super::after_requests)), a manual run's parameters
/// ([`trigger_params`](super::trigger_params)), a run's log lines
/// ([`run_logs`](super::run_logs)) and the alert rules' incidents
/// ([`incidents`](super::incidents)).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::operations_store(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn operations_store(provider: &dyn ClusterProvider) {
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    store.check().await.expect("the operations tables exist");
    let db_now = || async { provider.database_time().await.expect("database time") };
    let started = FireSlot::new(db_now().await).instant();
    let slack = TimeDelta::seconds(5);

    // Registry: one row for the instance, one per job; a second beat updates them in place.
    let instance = InstanceInfo {
        instance_id: "testkit:1:aa".into(),
        host: "testkit-host".into(),
        pid: 4242,
        version: "9.9.9".into(),
        started_at: started,
        clock_offset_ms: -12,
        heartbeat_ms: 1000,
    };
    let job = |next: i64| JobRegistration {
        name: "report".into(),
        lock_name: "report_lock".into(),
        trigger: "cron `0 0 3 * * *` in Europe/Berlin".into(),
        zone: Some("Europe/Berlin".into()),
        next_fire: Some(started + TimeDelta::seconds(next)),
        following_fire: Some(started + TimeDelta::seconds(next + 60)),
    };
    let beat = |next| Heartbeat {
        instance: instance.clone(),
        jobs: vec![
            job(next),
            JobRegistration {
                name: "poll".into(),
                lock_name: "poll".into(),
                trigger: "fixed delay 5s".into(),
                zone: None,
                next_fire: None,
                following_fire: None,
            },
        ],
    };
    assert!(
        store
            .heartbeat(&beat(60))
            .await
            .expect("heartbeat")
            .is_empty()
    );
    store.heartbeat(&beat(120)).await.expect("second heartbeat");
    let registry = store.registry().await.expect("registry");
    assert_eq!(
        registry.len(),
        3,
        "one instance row and two job rows: {registry:?}"
    );
    // The instances alone: the instance's own row, none of its jobs'.
    let instances = store.instances().await.expect("instances");
    assert_eq!(
        instances,
        registry
            .iter()
            .filter(|r| r.job.is_none())
            .cloned()
            .collect::<Vec<_>>(),
        "instances() reads the instances' own rows only"
    );
    let own = registry
        .iter()
        .find(|r| r.job.is_none())
        .expect("instance row");
    assert_eq!(own.instance, instance, "the instance's fields round-trip");
    assert!(
        (own.heartbeat_at - started).abs() < slack,
        "heartbeat on the store's clock"
    );
    let report = registry
        .iter()
        .find_map(|r| r.job.as_ref().filter(|j| j.name == "report"))
        .expect("job row");
    assert_eq!(
        *report,
        job(120),
        "the second heartbeat updated the job row"
    );

    // A beat of what changed writes the rows it carries and leaves the others; a complete
    // one deletes the rows of jobs it does not carry. Apart by more than the stores' time
    // resolution (a millisecond), as a scheduler's beats are.
    let pause = || tokio::time::sleep(std::time::Duration::from_millis(5));
    pause().await;
    let changed = Heartbeat {
        instance: instance.clone(),
        jobs: vec![job(180)],
    };
    store
        .heartbeat_changes(&changed)
        .await
        .expect("heartbeat of changes");
    let registry = store.registry().await.expect("registry");
    let row = |name: &str| {
        registry
            .iter()
            .find(|r| r.job.as_ref().is_some_and(|j| j.name == name))
            .cloned()
    };
    let own_at = registry
        .iter()
        .find(|r| r.job.is_none())
        .expect("instance row")
        .heartbeat_at;
    assert!(own_at > own.heartbeat_at, "the instance row was written");
    assert_eq!(row("report").and_then(|r| r.job), Some(job(180)));
    let poll = row("poll").expect("the job row not carried is left as it was");
    assert!(
        poll.heartbeat_at < own_at,
        "and keeps its heartbeat_at: {poll:?}"
    );
    pause().await;
    store.heartbeat(&changed).await.expect("complete heartbeat");
    let registry = store.registry().await.expect("registry");
    let jobs: Vec<&str> = registry
        .iter()
        .filter_map(|r| r.job.as_ref().map(|j| j.name.as_str()))
        .collect();
    assert_eq!(
        jobs,
        ["report"],
        "a complete heartbeat deletes the rows of jobs it does not carry"
    );
    pause().await;
    store
        .heartbeat(&beat(120))
        .await
        .expect("complete heartbeat");
    assert_eq!(store.registry().await.expect("registry").len(), 3);

    // Pause: one row however often asked; resume removes it; both say whether they changed.
    assert!(store.pause("report", "op@host").await.expect("pause"));
    assert!(!store.pause("report", "op@host").await.expect("pause again"));
    let control = store.heartbeat(&beat(120)).await.expect("heartbeat");
    assert_eq!(
        control.len(),
        1,
        "the heartbeat brings back the pause: {control:?}"
    );
    assert_eq!(
        (control[0].kind, control[0].job.as_str()),
        (ControlKind::Pause, "report")
    );
    assert_eq!(control[0].requested_by, "op@host");
    assert!(store.resume("report").await.expect("resume"));
    assert!(!store.resume("report").await.expect("resume again"));

    // Trigger requests: claimed once; a claimed one is no longer polled nor withdrawable.
    let first = store
        .request_trigger("report", "op")
        .await
        .expect("trigger");
    let second = store
        .request_trigger("report", "op")
        .await
        .expect("trigger");
    assert!(second > first, "request ids increase");
    let pending = store.heartbeat(&beat(120)).await.expect("heartbeat");
    assert_eq!(
        pending.iter().map(|c| c.id).collect::<Vec<_>>(),
        [first, second]
    );
    assert!(store.claim_trigger(first, "a").await.expect("claim"));
    assert!(
        !store.claim_trigger(first, "b").await.expect("claim again"),
        "claimed twice"
    );
    assert!(
        !store
            .withdraw_trigger(first)
            .await
            .expect("withdraw claimed")
    );
    assert!(
        store
            .withdraw_trigger(second)
            .await
            .expect("withdraw pending")
    );
    let control = store.control().await.expect("control");
    assert_eq!(control.len(), 1);
    assert_eq!(control[0].claimed_by.as_deref(), Some("a"));
    assert!(control[0].claimed_at.is_some());
    assert!(
        store
            .heartbeat(&beat(120))
            .await
            .expect("heartbeat")
            .is_empty()
    );

    // History: start and end on the store's clock, newest first, limited.
    let slot = FireSlot::new(started).instant();
    let mut ids = Vec::new();
    for (fence, kind) in [
        (1, FireKind::Scheduled),
        (2, FireKind::Manual),
        (3, FireKind::CatchUp),
    ] {
        let run = RunStart {
            job: "report".into(),
            slot: (kind != FireKind::Manual).then_some(slot),
            fire_kind: kind,
            instance_id: instance.instance_id.clone(),
            fence,
            // Attempts of the same fire share its fence: 1 and 2 are distinct rows.
            attempt: fence as u32,
            params: Default::default(),
        };
        ids.push(store.run_started(&run).await.expect("run start"));
    }
    assert!(
        ids.windows(2).all(|w| w[1] > w[0]),
        "run ids increase: {ids:?}"
    );
    let long = "é".repeat(600);
    let error = crate::truncate(&long, crate::MAX_ERROR_LEN);
    store
        .run_ended(&RunEnd::new(ids[0], RunState::Succeeded, None).with_cancel_requested(true))
        .await
        .expect("end");
    store
        .run_ended(&RunEnd::new(ids[1], RunState::Failed, Some(error)))
        .await
        .expect("end");
    let history = store.history("report", 2).await.expect("history");
    assert_eq!(history.len(), 2, "the limit holds");
    assert_eq!(history[0].id, ids[2], "newest first");
    assert_eq!(
        (history[0].outcome, history[0].ended_at),
        (RunState::Running, None)
    );
    assert_eq!(history[0].fire_kind, FireKind::CatchUp);
    assert_eq!((history[1].fence, history[1].slot), (2, None));
    assert_eq!(history[1].outcome, RunState::Failed);
    assert_eq!(
        (history[1].attempt, history[1].cancel_requested),
        (2, false),
        "the attempt round-trips; cancellation not asked"
    );
    assert_eq!(history[0].attempt, 3, "a running row has its attempt");
    assert_eq!(
        history[1].error.as_deref(),
        Some(error),
        "the error text round-trips"
    );
    let all = store.history("report", 10).await.expect("history");
    // Keyset pages (the dashboard's): the newest, then those older than the last one seen.
    let ids_of = |runs: Vec<RunRecord>| runs.iter().map(|r| r.id).collect::<Vec<_>>();
    let page = store.history_page("report", None, 2).await.expect("page");
    assert_eq!(ids_of(page), [ids[2], ids[1]], "the first page");
    let older = store.history_page("report", Some(ids[1]), 2).await;
    assert_eq!(
        ids_of(older.expect("page")),
        [ids[0]],
        "the page before run {}",
        ids[1]
    );
    assert_eq!(all[2].slot, Some(slot));
    assert_eq!(
        (all[2].outcome, all[2].attempt, all[2].cancel_requested),
        (RunState::Succeeded, 1, true),
        "a run that finished after cancellation was asked: its own outcome, and the flag"
    );
    assert!(all[2].ended_at.is_some_and(|end| end >= all[2].started_at));
    assert!((all[2].started_at - started).abs() < slack);
    assert!(
        store
            .history("nothing", 10)
            .await
            .expect("history")
            .is_empty()
    );
    let last = store.last_runs().await.expect("last runs");
    assert_eq!(last.iter().map(|r| r.id).collect::<Vec<_>>(), [ids[2]]);
    let successes = store.last_successes().await.expect("successes");
    assert_eq!(successes.len(), 1);
    assert_eq!(successes[0].0, "report");

    // Housekeeping: at most `limit` rows per call, only rows older than the cut-off.
    let future = db_now().await + TimeDelta::seconds(60);
    assert_eq!(
        store
            .delete_expired(Expired::Runs, started - slack, 10)
            .await
            .expect("delete"),
        0
    );
    assert_eq!(
        store
            .delete_expired(Expired::Runs, future, 2)
            .await
            .expect("delete"),
        2
    );
    assert_eq!(
        store
            .delete_expired(Expired::Runs, future, 2)
            .await
            .expect("delete"),
        1
    );
    assert!(
        store
            .history("report", 10)
            .await
            .expect("history")
            .is_empty()
    );
    assert_eq!(
        store
            .delete_expired(Expired::ClaimedTriggers, future, 10)
            .await
            .expect("delete"),
        1
    );
    assert!(store.control().await.expect("control").is_empty());
    assert_eq!(
        store
            .delete_expired(Expired::StaleRegistry, future, 2)
            .await
            .expect("delete"),
        2
    );
    assert_eq!(
        store
            .delete_expired(Expired::StaleRegistry, future, 2)
            .await
            .expect("delete"),
        1
    );
    assert!(store.registry().await.expect("registry").is_empty());
    super::history_batches(provider).await;
    super::run_times(provider).await;

    super::action_log(provider).await;
    super::trigger_hand_back(provider).await;
    super::concurrent_pauses(provider).await;
    super::after_requests(provider).await;
    super::trigger_params(provider).await;
    super::run_logs(provider).await;
    super::incidents(provider).await;
}
