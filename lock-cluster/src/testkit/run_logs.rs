//! A run's log lines ([`OperatorStore::run_logs`](crate::OperatorStore::run_logs)): written
//! with the end row (single and batched), read back exactly for the runs asked, and deleted
//! with their rows by housekeeping.

use chrono::TimeDelta;

use crate::{ClusterProvider, Expired, RunEnd, RunLog, RunLogWriter, RunStart, RunState};
use lock_core::testkit::unique_name;
use lock_core::{FireKind, FireSlot};

/// Four runs of one job and one of another, between them in id: the first ended with log
/// lines through [`run_ended`](crate::ClusterStore::run_ended) (tabs, newlines, backslashes,
/// HTML and non-ASCII text, a count of lines not kept), the second through a batched
/// [`runs_ended`](crate::ClusterStore::runs_ended) with a log near the 64 KiB default bound,
/// the third with none, the fourth still running. `run_logs` over the job's ids returns the
/// two logs, newest first, each exactly as written, and not the other job's; over one id,
/// that run's; the history reads are unchanged. Housekeeping that deletes the rows deletes
/// their lines. Expects that deleting every run older than a minute from now touches nothing
/// of other tests (a table of its own); called by [`operations_store`](super::operations_store).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::run_logs(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn run_logs(provider: &dyn ClusterProvider) {
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let now = provider.database_time().await.expect("database time");
    let slot = FireSlot::new(now).instant();
    let job = unique_name("logs");
    let other = unique_name("logs-other");
    let start = |job: &str| RunStart {
        job: job.to_owned(),
        slot: Some(slot),
        fire_kind: FireKind::Scheduled,
        instance_id: "testkit:logs".into(),
        fence: 1,
        attempt: 1,
        params: Default::default(),
    };
    let first = store.run_started(&start(&job)).await.expect("start");
    let between = store.run_started(&start(&other)).await.expect("start");
    let second = store.run_started(&start(&job)).await.expect("start");
    let third = store.run_started(&start(&job)).await.expect("start");
    let running = store.run_started(&start(&job)).await.expect("start");

    let mut special = RunLogWriter::new(2, 65536);
    special.line(now, "INFO", "billing::charge", |m| {
        m.push_str("charged <b>3</b> & \"more\"\tcolumn\nnext line \\ é 日本")
    });
    special.line(now, "WARN", "a target", |m| m.push_str("second"));
    special.line(now, "ERROR", "t", |m| m.push_str("not kept"));
    let special = special.finish().expect("lines");
    let mut big = RunLogWriter::new(10_000, 65536);
    for i in 0..2000 {
        big.line(now, "DEBUG", "bulk", |m| {
            m.push_str(&format!("line {i} of a long run's log"))
        });
    }
    let big = big.finish().expect("lines");
    assert!(big.as_stored().len() > 60_000, "near the bound");

    store
        .run_ended(&RunEnd::new(first, RunState::Succeeded, None).with_logs(Some(special.clone())))
        .await
        .expect("end with logs");
    store
        .run_ended(
            &RunEnd::new(between, RunState::Succeeded, None).with_logs(Some(special.clone())),
        )
        .await
        .expect("end of the other job");
    store
        .runs_ended(&[
            RunEnd::new(second, RunState::Failed, Some("boom")).with_logs(Some(big.clone())),
            RunEnd::new(third, RunState::Succeeded, None),
        ])
        .await
        .expect("batched ends");

    let logs = store
        .run_logs(&job, first..=running)
        .await
        .expect("run logs");
    let ids: Vec<i64> = logs.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [second, first], "the runs with lines, newest first");
    assert_eq!(logs[0].1, big, "the batched end's lines, exactly");
    assert_eq!(logs[1].1, special, "the single end's lines, exactly");
    let lines = logs[1].1.lines().expect("lines parse");
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0].message,
        "charged <b>3</b> & \"more\"\tcolumn\nnext line \\ é 日本"
    );
    assert_eq!(
        (lines[1].level.as_str(), lines[1].target.as_str()),
        ("WARN", "a target")
    );
    assert_eq!(logs[1].1.dropped(), 1);

    let one = store.run_logs(&job, first..=first).await.expect("one run");
    assert_eq!(one, vec![(first, special.clone())]);
    assert!(
        store
            .run_logs(&job, third..=running)
            .await
            .expect("no lines")
            .is_empty(),
        "a run ended without lines and a running one have none"
    );
    assert_eq!(
        store
            .run_logs(&other, first..=running)
            .await
            .expect("other job")
            .len(),
        1,
        "only the other job's own run"
    );
    let history = store.history(&job, 10).await.expect("history");
    assert_eq!(history.len(), 4);
    assert_eq!(history[2].outcome, RunState::Failed, "{history:?}");

    // Aged with the history: the rows go, and their lines with them.
    let future = provider.database_time().await.expect("database time") + TimeDelta::seconds(60);
    while store
        .delete_expired(Expired::Runs, future, 1000)
        .await
        .expect("delete")
        > 0
    {}
    assert!(store.history(&job, 10).await.expect("history").is_empty());
    let left: Vec<(i64, RunLog)> = store
        .run_logs(&job, first..=running)
        .await
        .expect("run logs");
    assert!(left.is_empty(), "lines outlived their rows: {left:?}");
}
