//! Pause and resume under concurrency: one row, one `true`.

use futures_util::future::join_all;

use crate::{ClusterProvider, ControlKind};
use lock_core::testkit::unique_name;

/// How many operators pause (then resume) one job at the same instant.
const CONCURRENT: usize = 40;

/// How many jobs are raced so, one after another: the window of a racy pause is short.
const ROUNDS: usize = 10;

/// [`pause`](crate::OperatorStore::pause) and [`resume`](crate::OperatorStore::resume) called
/// 40 times at once for one job (ten jobs in turn): exactly one pause answers `true` and exactly one pause row
/// exists, then exactly one resume answers `true` and no pause row is left. What an operator
/// double-clicking, or two dashboards, must not break: the audit would record two pauses, and
/// a resume would have two rows to delete. Works on tables that hold other rows (its job name
/// is its own). Run by [`operations_store`](super::operations_store).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::concurrent_pauses(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn concurrent_pauses(provider: &dyn ClusterProvider) {
    for _ in 0..ROUNDS {
        race(provider, &unique_name("pause-race")).await;
    }
}

async fn race(provider: &dyn ClusterProvider, job: &str) {
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let pause_rows = || async {
        store
            .control()
            .await
            .expect("control")
            .into_iter()
            .filter(|c| *c.job == *job && c.kind == ControlKind::Pause)
            .count()
    };
    let paused = join_all((0..CONCURRENT).map(|i| {
        let by = format!("op{i}@host");
        async move { store.pause(job, &by).await.expect("pause") }
    }))
    .await;
    assert_eq!(
        paused.iter().filter(|changed| **changed).count(),
        1,
        "{CONCURRENT} concurrent pauses of {job:?}: exactly one pauses it, the others find it paused"
    );
    assert_eq!(pause_rows().await, 1, "one pause row for {job:?}");

    let resumed = join_all((0..CONCURRENT).map(|_| store.resume(job))).await;
    let resumed: Vec<bool> = resumed.into_iter().map(|r| r.expect("resume")).collect();
    assert_eq!(
        resumed.iter().filter(|changed| **changed).count(),
        1,
        "{CONCURRENT} concurrent resumes of {job:?}: exactly one resumes it"
    );
    assert_eq!(pause_rows().await, 0, "no pause row left for {job:?}");
}
