//! The webhook notifier against a real local HTTP receiver: the body is the README's JSON, the
//! signature verifies (and a wrong secret, a changed body or an old timestamp do not), and
//! what is retried is retried exactly as often as documented.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use chrono::TimeZone;
use lock_alerts::{
    Notice, NoticeState, Notifier, NotifyError, RetryPolicy, SIGNATURE_HEADER, SignatureError,
    TIMESTAMP_HEADER, WebhookConfig, WebhookNotifier, sign, verify_signature,
};
use test_support::receiver::{Receiver, Reply};

const SECRET: &str = "whsec_test_1234";
const TOLERANCE: Duration = Duration::from_secs(300);

fn notice() -> Notice {
    Notice::new(
        "failed_in_a_row/nightly_report",
        "failed_in_a_row",
        NoticeState::Firing,
        "nightly_report failed 3 times in a row",
        chrono::Utc.with_ymd_and_hms(2026, 12, 3, 7, 0, 0).unwrap(),
        "shedlock",
    )
    .job("nightly_report")
    .instance("web-1")
    .detail("failures", "3")
}

/// Short delays: the retry tests wait milliseconds, not the production seconds.
fn fast() -> RetryPolicy {
    RetryPolicy::default()
        .attempts(4)
        .base_delay(Duration::from_millis(10))
        .max_delay(Duration::from_millis(50))
        .attempt_timeout(Duration::from_secs(5))
}

fn webhook(receiver: &Receiver, retry: RetryPolicy) -> WebhookNotifier {
    WebhookNotifier::new(
        WebhookConfig::new(receiver.url("/hooks/locks?token=query-secret"))
            .secret(SECRET)
            .name("ops-webhook")
            .retry(retry),
    )
    .unwrap()
}

#[tokio::test]
async fn the_body_is_the_documented_json_and_its_signature_verifies() {
    let receiver = Receiver::start().await;
    webhook(&receiver, fast()).notify(&notice()).await.unwrap();

    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.method, "POST");
    assert_eq!(request.path_and_query, "/hooks/locks?token=query-secret");
    assert_eq!(request.header("content-type"), Some("application/json"));

    // The README's example, field for field.
    let json: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "version": 1,
            "incident_key": "failed_in_a_row/nightly_report",
            "rule": "failed_in_a_row",
            "job": "nightly_report",
            "instance": "web-1",
            "state": "firing",
            "summary": "nightly_report failed 3 times in a row",
            "details": {"failures": "3"},
            "at": "2026-12-03T07:00:00Z",
            "cluster": "shedlock"
        })
    );
    let parsed: Notice = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(parsed, notice());

    let timestamp = request
        .header(TIMESTAMP_HEADER)
        .expect("a timestamp header");
    let signature = request
        .header(SIGNATURE_HEADER)
        .expect("a signature header");
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert!(now.abs_diff(timestamp.parse().unwrap()) < 60, "{timestamp}");
    assert_eq!(
        verify_signature(
            SECRET.as_bytes(),
            timestamp,
            signature,
            &request.body,
            TOLERANCE
        ),
        Ok(())
    );

    // What a receiver must refuse.
    assert_eq!(
        verify_signature(
            b"another secret",
            timestamp,
            signature,
            &request.body,
            TOLERANCE
        ),
        Err(SignatureError::Mismatch)
    );
    let mut tampered = request.body.clone();
    let at = tampered.iter().position(|&b| b == b'3').unwrap();
    tampered[at] = b'4';
    assert_eq!(
        verify_signature(
            SECRET.as_bytes(),
            timestamp,
            signature,
            &tampered,
            TOLERANCE
        ),
        Err(SignatureError::Mismatch)
    );
    let later = (timestamp.parse::<u64>().unwrap() + 1).to_string();
    assert_eq!(
        verify_signature(
            SECRET.as_bytes(),
            &later,
            signature,
            &request.body,
            TOLERANCE
        ),
        Err(SignatureError::Mismatch),
        "the timestamp is part of what is signed"
    );
    // The same body replayed with a genuine but old signature: refused by its age.
    let old = now - 3600;
    let replayed = sign(SECRET.as_bytes(), old, &request.body);
    assert!(matches!(
        verify_signature(SECRET.as_bytes(), &old.to_string(), &replayed, &request.body, TOLERANCE),
        Err(SignatureError::Stale { skew_seconds }) if skew_seconds >= 3600
    ));
}

#[tokio::test]
async fn without_a_secret_no_signature_is_sent() {
    let receiver = Receiver::start().await;
    let unsigned = WebhookNotifier::new(WebhookConfig::new(receiver.url("/hook"))).unwrap();
    unsigned.notify(&notice()).await.unwrap();
    let request = &receiver.requests()[0];
    assert_eq!(request.header(SIGNATURE_HEADER), None);
    assert_eq!(request.header(TIMESTAMP_HEADER), None);
}

#[tokio::test]
async fn two_503s_then_200_is_three_requests_and_delivered() {
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(503), Reply::status(503)]);
    webhook(&receiver, fast()).notify(&notice()).await.unwrap();

    let requests = receiver.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        // Every attempt carries its own valid signature over the same body.
        assert_eq!(request.body, requests[0].body);
        let (timestamp, signature) = (
            request.header(TIMESTAMP_HEADER).unwrap(),
            request.header(SIGNATURE_HEADER).unwrap(),
        );
        verify_signature(
            SECRET.as_bytes(),
            timestamp,
            signature,
            &request.body,
            TOLERANCE,
        )
        .unwrap();
    }
}

#[tokio::test]
async fn a_400_is_not_retried_and_the_error_names_the_status_without_secrets() {
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(400)]);
    let error = webhook(&receiver, fast())
        .notify(&notice())
        .await
        .unwrap_err();

    assert_eq!(receiver.requests().len(), 1);
    assert!(
        matches!(&error, NotifyError::Status { status: 400, attempts: 1, notifier, .. } if notifier == "ops-webhook"),
        "{error:?}"
    );
    let shown = format!("{error} {error:?}");
    assert!(shown.contains("HTTP 400"), "{shown}");
    assert!(
        shown.contains(&format!("http://{}/…", receiver.address())),
        "{shown}"
    );
    assert!(
        !shown.contains("query-secret") && !shown.contains("/hooks/locks"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(302).header("location", "/elsewhere")]);
    let error = webhook(&receiver, fast())
        .notify(&notice())
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(302), "{error}");
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
}

#[tokio::test]
async fn a_5xx_every_time_spends_exactly_the_attempts() {
    let receiver = Receiver::start().await;
    receiver.script((0..3).map(|_| Reply::status(500)));
    let error = webhook(&receiver, fast().attempts(3))
        .notify(&notice())
        .await
        .unwrap_err();
    assert_eq!(receiver.requests().len(), 3);
    assert!(
        matches!(
            error,
            NotifyError::Status {
                status: 500,
                attempts: 3,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn retry_after_is_honoured_and_capped() {
    // Asked for 1 s, within the 5 s cap: the second request comes no sooner. (A lower bound
    // only: a loaded machine can make it later, never earlier.)
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(429).header("retry-after", "1")]);
    let started = Instant::now();
    webhook(&receiver, fast().max_delay(Duration::from_secs(5)))
        .notify(&notice())
        .await
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(receiver.requests().len(), 2);

    // Asked for an hour, capped at 100 ms: delivered long before (30 s is a bound a loaded
    // machine keeps; the hour would end the test run).
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(503).header("retry-after", "3600")]);
    let started = Instant::now();
    webhook(&receiver, fast().max_delay(Duration::from_millis(100)))
        .notify(&notice())
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(receiver.requests().len(), 2);
}

#[tokio::test]
async fn a_receiver_that_never_answers_costs_one_timeout_per_attempt() {
    let receiver = Receiver::start().await;
    receiver.script((0..2).map(|_| Reply::status(200).after(Duration::from_secs(60))));
    // 1 s: ample for a loopback request to reach the receiver on a loaded machine (it must be
    // recorded to count), far below the 60 s the receiver waits.
    let policy = fast().attempts(2).attempt_timeout(Duration::from_secs(1));
    let started = Instant::now();
    let error = webhook(&receiver, policy)
        .notify(&notice())
        .await
        .unwrap_err();

    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(receiver.requests().len(), 2);
    assert!(
        matches!(
            error,
            NotifyError::Transport {
                attempts: 2,
                retryable: true,
                ..
            }
        ),
        "{error:?}"
    );
    let chain = test_support::skip::chain(&error);
    assert!(chain.contains("timed out"), "{chain}");
}

#[tokio::test]
async fn a_refused_connection_is_retried_and_reported_without_the_url() {
    // A port nothing listens on.
    let port = test_support::process::free_port();
    let notifier = WebhookNotifier::new(
        WebhookConfig::new(format!(
            "http://127.0.0.1:{port}/hook/secret-path?token=t0k3n"
        ))
        .secret(SECRET)
        .retry(fast().attempts(2)),
    )
    .unwrap();
    let error = notifier.notify(&notice()).await.unwrap_err();
    assert!(
        matches!(error, NotifyError::Transport { attempts: 2, .. }),
        "{error:?}"
    );
    let shown = format!("{} | {error:?}", test_support::skip::chain(&error));
    assert!(
        shown.contains(&format!("http://127.0.0.1:{port}/…")),
        "{shown}"
    );
    for secret in ["secret-path", "t0k3n", SECRET] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(!format!("{notifier:?}").contains(SECRET));
}

#[test]
fn the_readme_example_is_what_is_sent() {
    let readme = include_str!("../README.md");
    let start = readme.find("```json\n").expect("the README's JSON example") + "```json\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let documented: serde_json::Value = serde_json::from_str(&readme[start..end]).unwrap();
    let sent = serde_json::to_value(notice().detail("last_error", "connection refused")).unwrap();
    assert_eq!(documented, sent);
}

/// HTTPS with the client's own TLS set-up (rustls, ring): the test authority added as a root
/// is trusted; without it (Mozilla's roots only) the receiver's certificate is refused.
#[tokio::test]
async fn https_verifies_the_receiver_against_the_roots() {
    let tls = test_support::servers::base_dir().join("tls");
    let (certificate, key) = (tls.join("server.pem"), tls.join("server.key"));
    if !(certificate.is_file() && key.is_file()) {
        test_support::skip::skip_unless_ci(format!(
            "{} missing: run scripts/test-servers",
            certificate.display()
        ));
        return;
    }
    let receiver = Receiver::start_tls(&certificate, &key).await;
    let url = receiver.url("/hook").replacen("http://", "https://", 1);
    let ca = std::fs::read(test_support::servers::ca_pem_path()).unwrap();

    let trusting = WebhookNotifier::new(
        WebhookConfig::new(&url)
            .secret(SECRET)
            .root_certificate_pem(ca)
            .retry(fast()),
    )
    .unwrap();
    trusting.notify(&notice()).await.unwrap();
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    verify_signature(
        SECRET.as_bytes(),
        request.header(TIMESTAMP_HEADER).unwrap(),
        request.header(SIGNATURE_HEADER).unwrap(),
        &request.body,
        TOLERANCE,
    )
    .unwrap();

    // Not retried: the certificate will not verify the next time either.
    let public_roots_only = WebhookNotifier::new(WebhookConfig::new(&url).retry(fast())).unwrap();
    let error = public_roots_only.notify(&notice()).await.unwrap_err();
    assert!(
        matches!(
            error,
            NotifyError::Transport {
                attempts: 1,
                retryable: false,
                ..
            }
        ),
        "{error:?}"
    );
    let chain = test_support::skip::chain(&error);
    assert!(chain.to_lowercase().contains("certificate"), "{chain}");
    assert_eq!(
        receiver.requests().len(),
        1,
        "nothing sent to an unverified server"
    );
}
