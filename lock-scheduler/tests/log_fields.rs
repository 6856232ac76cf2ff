//! Names and requesters from the operations tables go into log lines as quoted fields
//! (`requested_by = ?..`, `job = ?..`): a requester with a newline or an ESC sequence (anyone
//! who can write the control table) cannot forge a log line or reach the terminal of whoever
//! reads the log.

use std::time::Duration;

use lock_cluster::ClusterProvider;
use lock_core::InMemoryLockProvider;
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::process::eventually;

#[tokio::test]
async fn a_hostile_requester_is_logged_on_one_line_quoted() {
    let (logs, _guard) = test_support::logs::capture_at(tracing::Level::INFO);
    let provider = std::sync::Arc::new(InMemoryLockProvider::new());
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .heartbeat_interval(Duration::from_millis(50))
        .jobs([Job::new(
            "nightly",
            Trigger::cron("0 0 3 * * *").unwrap(),
            || async {},
        )])
        .start()
        .await
        .unwrap();
    let store = provider.cluster().unwrap();
    store
        .request_trigger("nightly", "ops\nINFO forged: all clear\u{1b}]0;pwned\u{7}")
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "the requested run", || async {
        let runs = store.history("nightly", 1).await.unwrap();
        runs.first()
            .is_some_and(|r| r.ended_at.is_some())
            .then_some(())
    })
    .await;
    scheduler.shutdown().await.unwrap();
    let text = logs.text();
    let claimed: Vec<&str> = text
        .lines()
        .filter(|line| line.contains("manual run requested"))
        .collect();
    assert_eq!(claimed.len(), 1, "{text}");
    assert!(
        claimed[0].contains(r#"job="nightly""#)
            && claimed[0]
                .contains(r#"requested_by="ops\nINFO forged: all clear\u{1b}]0;pwned\u{7}""#),
        "{}",
        claimed[0]
    );
    assert!(
        !text.lines().any(|line| line.starts_with("INFO forged")),
        "a forged line:\n{text}"
    );
    assert!(!text.contains('\u{1b}'), "a raw ESC in the log:\n{text:?}");
}
