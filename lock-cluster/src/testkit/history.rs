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
