//! The Slack notifier against a real local HTTP receiver: Slack's incoming-webhook body.

use std::time::Duration;

use lock_alerts::{Notice, NoticeState, Notifier, RetryPolicy, SlackConfig, SlackNotifier};
use test_support::receiver::{Receiver, Reply};

#[tokio::test]
async fn the_body_is_an_incoming_webhook_message() {
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(500)]);
    let slack = SlackNotifier::new(
        SlackConfig::new(receiver.url("/services/T000/B000/XXXX")).retry(
            RetryPolicy::default()
                .base_delay(Duration::from_millis(10))
                .max_delay(Duration::from_millis(20)),
        ),
    )
    .unwrap();
    let notice = Notice::new(
        "running_too_long/export",
        "running_too_long",
        NoticeState::Resolved,
        "export finished after 2 h 10 min",
        chrono::Utc::now(),
        "shedlock",
    )
    .job("export")
    .detail("running_for", "PT2H10M");
    slack.notify(&notice).await.unwrap();

    let requests = receiver.requests();
    assert_eq!(requests.len(), 2, "the 500 was retried once");
    let request = &requests[1];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path_and_query, "/services/T000/B000/XXXX");
    assert_eq!(request.header("content-type"), Some("application/json"));
    let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        body["text"],
        ":white_check_mark: RESOLVED running_too_long: export: export finished after 2 h 10 min"
    );
    let blocks = body["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0]["type"], "section");
    assert_eq!(blocks[0]["text"]["type"], "mrkdwn");
    let fields: Vec<&str> = blocks[0]["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "*Rule*\nrunning_too_long",
            "*Job*\nexport",
            "*running_for*\nPT2H10M"
        ]
    );
    assert_eq!(blocks[1]["type"], "context");
    let context = blocks[1]["elements"][0]["text"].as_str().unwrap();
    assert!(context.contains("cluster shedlock"), "{context}");
    assert!(
        context.contains("incident running_too_long/export"),
        "{context}"
    );
}
