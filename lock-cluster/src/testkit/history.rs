//! The batched run-history writes of an [`Cluster`](crate::Cluster)
//! (`runs_started`, `runs_ended`): each row exactly what the single writes would have made.

use crate::ClusterProvider;
use crate::{MAX_ERROR_LEN, RunEnd, RunStart, RunState, truncate};
use lock_core::testkit::unique_name;
use lock_core::{FireKind, FireSlot};

/// Three runs of three jobs started in one call: one id each, in the order given, each row with
/// its own job, slot, kind, instance and fence, running; ended in one call with their own
/// outcomes and error texts. Empty calls write nothing. Called by
/// [`operations_store`](super::operations_store).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::history_batches(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn history_batches(provider: &dyn ClusterProvider) {
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let slot = FireSlot::new(provider.database_time().await.expect("database time")).instant();
    let jobs = [
        unique_name("hist-a"),
        unique_name("hist-b"),
        unique_name("hist-c"),
    ];
    let kinds = [FireKind::Scheduled, FireKind::Manual, FireKind::CatchUp];
    let runs: Vec<RunStart> = jobs
        .iter()
        .zip(kinds)
        .enumerate()
        .map(|(i, (job, kind))| RunStart {
            job: job.to_string(),
            slot: (kind != FireKind::Manual).then_some(slot),
            fire_kind: kind,
            instance_id: format!("testkit:history:{i}"),
            fence: 10 + i as u64,
            attempt: 1 + i as u32,
            params: Default::default(),
        })
        .collect();
    assert!(
        store.runs_started(&[]).await.expect("no runs").is_empty(),
        "no runs, no ids"
    );
    let ids = store.runs_started(&runs).await.expect("runs started");
    assert_eq!(ids.len(), 3, "{ids:?}");
    for (run, id) in runs.iter().zip(&ids) {
        let rows = store.history(&run.job, 5).await.expect("history");
        assert_eq!(rows.len(), 1, "one row for {}: {rows:?}", run.job);
        let row = &rows[0];
        assert_eq!(row.id, *id, "the id returned for {} is its row's", run.job);
        assert_eq!(
            (
                row.slot,
                row.fire_kind,
                row.instance_id.as_str(),
                row.fence,
                row.attempt
            ),
            (
                run.slot,
                run.fire_kind,
                run.instance_id.as_str(),
                run.fence,
                run.attempt
            ),
        );
        assert_eq!((row.outcome, row.ended_at), (RunState::Running, None));
    }
    store.runs_ended(&[]).await.expect("no ends");
    let long = "é".repeat(600);
    let error = truncate(&long, MAX_ERROR_LEN);
    let ends = [
        RunEnd::new(ids[0], RunState::Succeeded, None).with_cancel_requested(true),
        RunEnd::new(ids[1], RunState::Failed, Some(error)),
        RunEnd::new(ids[2], RunState::Panicked, Some("boom <b>")),
    ];
    store.runs_ended(&ends).await.expect("runs ended");
    for (job, end) in jobs.iter().zip(&ends) {
        let row = &store.history(job, 1).await.expect("history")[0];
        assert_eq!(row.outcome, end.outcome, "{job}");
        assert_eq!(row.error, end.error, "{job}");
        assert_eq!(row.cancel_requested, end.cancel_requested, "{job}");
        let ended = row.ended_at.expect("an end time");
        assert!(ended >= row.started_at, "{job}: {row:?}");
    }
}

/// [`runs_started_at`](crate::ClusterStore::runs_started_at) and
/// [`runs_ended_at`](crate::ClusterStore::runs_ended_at): a store that
/// [takes run times](crate::ClusterStore::takes_run_times) writes the times given (to the
/// millisecond), a start past its now as its now, and an end before its row's start as the
/// start; one that does not writes its own clock, as `runs_started` and `runs_ended` do.
/// Called by [`operations_store`](super::operations_store).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::run_times(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn run_times(provider: &dyn ClusterProvider) {
    use chrono::TimeDelta;

    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let now = provider.database_time().await.expect("database time");
    let jobs = [unique_name("times-a"), unique_name("times-b")];
    let runs: Vec<RunStart> = jobs
        .iter()
        .map(|job| RunStart {
            job: job.to_string(),
            slot: Some(FireSlot::new(now).instant()),
            fire_kind: FireKind::Scheduled,
            instance_id: "testkit:times".into(),
            fence: 1,
            attempt: 1,
            params: Default::default(),
        })
        .collect();
    // The first started 10 s ago; the second says a minute ahead of the store's clock.
    let ago = now - TimeDelta::milliseconds(10_000);
    let ahead = now + TimeDelta::seconds(60);
    let ids = store
        .runs_started_at(&runs, &[ago, ahead])
        .await
        .expect("runs started at");
    assert_eq!(ids.len(), 2, "{ids:?}");
    // The first ended 4 s after its start; the second says an hour before its own.
    let ends = [
        RunEnd::new(ids[0], RunState::Succeeded, None),
        RunEnd::new(ids[1], RunState::Succeeded, None),
    ];
    let ended = ago + TimeDelta::seconds(4);
    store
        .runs_ended_at(&ends, &[ended, now - TimeDelta::hours(1)])
        .await
        .expect("runs ended at");
    let after = provider.database_time().await.expect("database time");
    let row = |job: &str| {
        let job = job.to_owned();
        async move {
            let rows = store.history(&job, 5).await.expect("history");
            assert_eq!(rows.len(), 1, "one row for {job}: {rows:?}");
            rows.into_iter().next().expect("one row")
        }
    };
    let (a, b) = (row(&jobs[0]).await, row(&jobs[1]).await);
    let millis = |t: chrono::DateTime<chrono::Utc>| t.timestamp_millis();
    // A store's clock read between `now` (less a millisecond of truncation) and `after`.
    let the_store_clock = |t: chrono::DateTime<chrono::Utc>| {
        millis(t) >= millis(now) - 1 && millis(t) <= millis(after) + 1
    };
    if store.takes_run_times() {
        assert_eq!(millis(a.started_at), millis(ago), "the start given: {a:?}");
        assert_eq!(
            a.ended_at.map(millis),
            Some(millis(ended)),
            "the end given: {a:?}"
        );
        assert!(
            the_store_clock(b.started_at),
            "a start past the store's clock is written as its now ({now}..{after}): {b:?}"
        );
        assert_eq!(
            b.ended_at,
            Some(b.started_at),
            "an end before its row's start is written as the start: {b:?}"
        );
    } else {
        for row in [&a, &b] {
            assert!(
                the_store_clock(row.started_at) && row.ended_at.is_some_and(&the_store_clock),
                "a store that does not take run times writes its own clock ({now}..{after}): \
                 {row:?}"
            );
        }
    }
}
