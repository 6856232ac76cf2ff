//! A trigger request's parameters reach the manual run it starts: the body's
//! `JobContext::params()` and the run's history row carry them; a scheduled fire has none.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_cluster::{ClusterProvider, RunState};
use lock_core::{FireKind, InMemoryLockProvider, JobContext, Params};
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::process::eventually;

const WAIT: Duration = Duration::from_secs(20);

/// What each run's body saw: its fire kind and parameters.
type Seen = Arc<Mutex<Vec<(FireKind, Params)>>>;

fn recording(name: &str, every: Duration, seen: &Seen) -> Job {
    let seen = seen.clone();
    Job::new(
        name,
        Trigger::fixed_rate(every).unwrap(),
        move |ctx: JobContext| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push((ctx.fire_kind(), ctx.params().clone()));
            }
        },
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_requests_params_reach_the_body_and_the_history() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let seen: Seen = Arc::default();
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .heartbeat_interval(Duration::from_millis(50))
        .jobs([recording("report", Duration::from_millis(300), &seen)])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    let params = Params::parse_pairs(["month=2026-11", "region=eu"]).unwrap();
    store
        .request_trigger_with_params("report", "lockctl:alice", &params)
        .await
        .unwrap();
    let runs = eventually(
        WAIT,
        "the manual run and a scheduled one, ended",
        || async {
            let runs = store.history("report", 100).await.unwrap();
            let ended = |kind| {
                runs.iter()
                    .any(|r| r.fire_kind == kind && r.outcome == RunState::Succeeded)
            };
            (ended(FireKind::Manual) && ended(FireKind::Scheduled)).then_some(runs)
        },
    )
    .await;
    scheduler.shutdown().await.unwrap();
    for run in &runs {
        let expected = if run.fire_kind == FireKind::Manual {
            params.clone()
        } else {
            Params::new()
        };
        assert_eq!(run.params, expected, "{run:?}");
    }
    let seen = seen.lock().unwrap();
    let manual: Vec<_> = seen
        .iter()
        .filter(|(kind, _)| *kind == FireKind::Manual)
        .collect();
    assert_eq!(manual.len(), 1);
    assert_eq!(manual[0].1.get("month"), Some("2026-11"));
    assert_eq!(manual[0].1.get("region"), Some("eu"));
    assert!(
        seen.iter()
            .filter(|(kind, _)| *kind != FireKind::Manual)
            .all(|(_, params)| params.is_empty())
    );
    assert!(seen.iter().any(|(kind, _)| *kind == FireKind::Scheduled));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_body_sees_its_requests_params() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let seen: Seen = Arc::default();
    let job = {
        let seen = seen.clone();
        Job::blocking(
            "export",
            Trigger::cron("0 0 3 * * *").unwrap(),
            move |ctx: JobContext| {
                seen.lock()
                    .unwrap()
                    .push((ctx.fire_kind(), ctx.params().clone()));
            },
        )
    };
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .heartbeat_interval(Duration::from_millis(50))
        .jobs([job])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    let params = Params::parse_pairs(["table=orders"]).unwrap();
    store
        .request_trigger_with_params("export", "lockctl:bob", &params)
        .await
        .unwrap();
    let run = eventually(WAIT, "the manual run, ended", || async {
        let runs = store.history("export", 10).await.unwrap();
        runs.into_iter().find(|r| r.outcome == RunState::Succeeded)
    })
    .await;
    scheduler.shutdown().await.unwrap();
    assert_eq!(run.params, params);
    assert_eq!(*seen.lock().unwrap(), [(FireKind::Manual, params)]);
}
