//! Shutdown while bodies drain, on the in-memory provider's cluster tables: the instance
//! stays alive in the registry until the last body has ended, and a trigger request it
//! claimed but did not run is handed back, not lost.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_cluster::{ClusterOptions, ClusterProvider, ClusterView, RunState};
use lock_core::{FireKind, InMemoryLockProvider, JobContext};
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::process::eventually;

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_go_on_while_a_body_drains_after_shutdown_began() {
    let provider = Arc::new(InMemoryLockProvider::new());
    // 200 ms heartbeats: gone after 1 s of silence (five intervals). The body drains 3 s after
    // its `cancelled()` resolves; the registry is read 2 s into the drain, a second past the
    // point where a silent instance counts as gone, and a second before the body ends.
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id("drain-a")
        .history(Duration::from_secs(3600))
        .heartbeat_interval(Duration::from_millis(200))
        .shutdown_timeout(Duration::from_secs(20))
        .jobs([Job::new(
            "drain-slow",
            Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
            || async {
                let ctx = JobContext::current().unwrap();
                ctx.cancelled().await;
                tokio::time::sleep(Duration::from_secs(3)).await;
            },
        )])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    eventually(WAIT, "the run started", || async {
        let runs = store.history("drain-slow", 1).await.unwrap();
        runs.first()
            .is_some_and(|r| r.outcome == RunState::Running)
            .then_some(())
    })
    .await;
    let stopping = tokio::spawn({
        let scheduler = scheduler.clone();
        async move { scheduler.shutdown().await }
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let view = ClusterView::read(provider.as_ref(), &ClusterOptions::default())
        .await
        .unwrap();
    let me = view
        .instances
        .iter()
        .find(|i| i.info.instance_id == "drain-a")
        .expect("the instance is in the registry");
    assert!(
        me.alive,
        "still alive two seconds into the drain (heartbeats every 200 ms): {view:?}"
    );
    let during = ClusterView::history(provider.as_ref(), "drain-slow", 1)
        .await
        .unwrap();
    assert_eq!(
        during[0].outcome,
        RunState::Running,
        "the draining run is running, not unfinished"
    );
    assert!(
        !stopping.is_finished(),
        "the body is still draining: the check ran during the drain"
    );
    stopping.await.unwrap().expect("the body ended in time");
    let after = ClusterView::history(provider.as_ref(), "drain-slow", 1)
        .await
        .unwrap();
    assert!(after[0].ended_at.is_some(), "recorded finished: {after:?}");
    // It finished its 3 s of work after shutdown asked: its own result, and the flag.
    assert_eq!(
        (after[0].outcome, after[0].cancel_requested),
        (RunState::Succeeded, true),
        "{after:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trigger_request_claimed_before_shutdown_is_handed_back_and_runs_elsewhere() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let kinds = Arc::new(Mutex::new(Vec::new()));
    let start = |id: &'static str, holds: bool| {
        let kinds = kinds.clone();
        // Instance a's scheduled fire holds the lock until shutdown, so the manual run it
        // claims waits for the lock; instance b's returns at once.
        let job = Job::new(
            "handed-back",
            Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
            move |ctx: JobContext| {
                let kinds = kinds.clone();
                async move {
                    kinds
                        .lock()
                        .unwrap()
                        .push((ctx.fire_kind(), ctx.instance_id().to_owned()));
                    if holds {
                        ctx.cancelled().await;
                    }
                }
            },
        );
        Scheduler::builder()
            .lock_provider(provider.clone())
            .instance_id(id)
            .history(Duration::from_secs(3600))
            .heartbeat_interval(Duration::from_millis(100))
            .jobs([job])
            .start()
    };
    let a = start("handed-back-a", true).await.unwrap();
    let store = provider.cluster().unwrap();
    eventually(WAIT, "a's scheduled fire holds the lock", || async {
        (!kinds.lock().unwrap().is_empty()).then_some(())
    })
    .await;
    let id = store.request_trigger("handed-back", "test").await.unwrap();
    eventually(WAIT, "a claimed the request", || async {
        let control = store.control().await.unwrap();
        control
            .iter()
            .any(|c| c.id == id && c.claimed_by.as_deref() == Some("handed-back-a"))
            .then_some(())
    })
    .await;
    // Its manual run is refused (the lock is held) and waits for it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.shutdown().await.unwrap();
    let control = store.control().await.unwrap();
    let request = control.iter().find(|c| c.id == id).expect("kept");
    assert_eq!(
        request.claimed_by, None,
        "handed back unclaimed at shutdown, not dropped: {request:?}"
    );
    assert_eq!(
        kinds
            .lock()
            .unwrap()
            .iter()
            .filter(|(kind, _)| *kind == FireKind::Manual)
            .count(),
        0,
        "a did not run it"
    );

    let b = start("handed-back-b", false).await.unwrap();
    eventually(WAIT, "b runs the handed-back request", || async {
        kinds
            .lock()
            .unwrap()
            .contains(&(FireKind::Manual, "handed-back-b".to_owned()))
            .then_some(())
    })
    .await;
    b.shutdown().await.unwrap();
    let control = store.control().await.unwrap();
    assert_eq!(
        control
            .iter()
            .find(|c| c.id == id)
            .unwrap()
            .claimed_by
            .as_deref(),
        Some("handed-back-b")
    );
}
