//! Dead-man-switch pings against a real local HTTP receiver: they arrive in order (start, then
//! success or fail), follow healthchecks.io's and Cronitor's conventions, and a monitor that
//! cannot be reached is logged, not raised.

use std::time::Duration;

use lock_alerts::{DeadManSwitch, RetryPolicy};
use test_support::receiver::{Receiver, Reply};

fn paths(receiver: &Receiver) -> Vec<String> {
    receiver
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path_and_query))
        .collect()
}

#[tokio::test]
async fn healthchecks_start_then_success() {
    let receiver = Receiver::start().await;
    let check = DeadManSwitch::healthchecks(&receiver.url("/ping/0f1e2d3c")).unwrap();
    assert!(check.start().await);
    assert!(check.success().await);
    assert_eq!(
        paths(&receiver),
        ["POST /ping/0f1e2d3c/start", "POST /ping/0f1e2d3c"]
    );
}

#[tokio::test]
async fn healthchecks_start_then_fail_with_the_message_as_body() {
    let receiver = Receiver::start().await;
    let check = DeadManSwitch::healthchecks(&receiver.url("/ping/0f1e2d3c")).unwrap();
    let run = check.run("5d2b1c1e-8e4a-4b8a-9a57-3f2e1d0c9b8a");
    assert!(run.start().await);
    assert!(run.fail("database unreachable: connection refused").await);
    let requests = receiver.requests();
    assert_eq!(
        paths(&receiver),
        [
            "POST /ping/0f1e2d3c/start?rid=5d2b1c1e-8e4a-4b8a-9a57-3f2e1d0c9b8a",
            "POST /ping/0f1e2d3c/fail?rid=5d2b1c1e-8e4a-4b8a-9a57-3f2e1d0c9b8a"
        ]
    );
    assert_eq!(requests[0].body_text(), "");
    assert_eq!(
        requests[1].body_text(),
        "database unreachable: connection refused"
    );
}

#[tokio::test]
async fn cronitor_run_then_complete_and_run_then_fail() {
    let receiver = Receiver::start().await;
    let check = DeadManSwitch::cronitor(&receiver.url("/p/KEY/nightly")).unwrap();
    assert!(check.start().await);
    assert!(check.success().await);
    let run = check.run("run-7");
    assert!(run.start().await);
    assert!(run.fail("disk full").await);
    assert_eq!(
        paths(&receiver),
        [
            "GET /p/KEY/nightly?state=run",
            "GET /p/KEY/nightly?state=complete",
            "GET /p/KEY/nightly?state=run&series=run-7",
            "GET /p/KEY/nightly?state=fail&message=disk+full&series=run-7",
        ]
    );
}

#[tokio::test]
async fn a_ping_is_retried_briefly() {
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(502)]);
    let check = DeadManSwitch::healthchecks(&receiver.url("/ping/abc"))
        .unwrap()
        .retry(RetryPolicy::default().base_delay(Duration::from_millis(10)));
    assert!(check.success().await);
    assert_eq!(paths(&receiver), ["POST /ping/abc", "POST /ping/abc"]);
}

#[tokio::test]
async fn an_unreachable_monitor_is_a_warning_without_the_url_not_an_error() {
    let port = test_support::process::free_port();
    let check = DeadManSwitch::healthchecks(&format!("http://127.0.0.1:{port}/secret-uuid"))
        .unwrap()
        .retry(RetryPolicy::no_retry());
    let (logs, guard) = test_support::logs::capture();
    let delivered = check.fail("boom").await;
    drop(guard);
    assert!(!delivered);
    let text = logs.text();
    assert!(text.contains("WARN"), "{text}");
    assert!(
        text.contains("dead-man-switch ping not delivered"),
        "{text}"
    );
    assert!(
        text.contains(&format!("http://127.0.0.1:{port}/…")),
        "{text}"
    );
    assert!(!text.contains("secret-uuid"), "{text}");
}
