//! The mail notifier against a real local SMTP server (Debian's aiosmtpd, see test-support's
//! `smtp_sink`): plain, STARTTLS and implicit TLS on the test certificate authority of
//! `scripts/test-servers`; STARTTLS never falls back to plain text; a wrong root is refused.

use std::time::Duration;

use lock_alerts::{
    Notice, NoticeState, Notifier, NotifyError, RetryPolicy, SmtpConfig, SmtpNotifier, SmtpSecurity,
};
use test_support::smtp_sink::{SinkTls, SmtpSink};

fn notice() -> Notice {
    Notice::new(
        "failed_in_a_row/nightly_report",
        "failed_in_a_row",
        NoticeState::Firing,
        "nightly_report failed 3 times in a row",
        chrono::Utc::now(),
        "shedlock",
    )
    .job("nightly_report")
    .detail("last_error", "connection refused")
}

fn config(sink: &SmtpSink, security: SmtpSecurity) -> SmtpConfig {
    SmtpConfig::new("127.0.0.1", "Scheduled Locks <locks@example.com>")
        .port(sink.port)
        .security(security)
        .to("oncall@example.com")
        .to("Ops Team <ops@example.com>")
        .retry(
            RetryPolicy::default()
                .attempts(2)
                .base_delay(Duration::from_millis(10))
                .attempt_timeout(Duration::from_secs(10)),
        )
}

fn ca_pem() -> Vec<u8> {
    std::fs::read(test_support::servers::ca_pem_path()).expect("the test CA")
}

/// The one received message, with its headers unfolded.
fn only_message(sink: &SmtpSink) -> String {
    let messages = sink.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    messages[0].replace("\r\n", "\n")
}

fn assert_is_the_notice(message: &str) {
    let (head, body) = message.split_once("\n\n").expect("headers and body");
    assert!(
        head.contains("Subject: [scheduled-locks] FIRING failed_in_a_row: nightly_report"),
        "{head}"
    );
    assert!(
        head.contains("From: \"Scheduled Locks\" <locks@example.com>"),
        "{head}"
    );
    assert!(
        head.contains("To: oncall@example.com, \"Ops Team\" <ops@example.com>"),
        "{head}"
    );
    assert!(
        head.contains("Content-Type: text/plain; charset=utf-8"),
        "{head}"
    );
    assert!(
        body.starts_with("FIRING failed_in_a_row: nightly_report\n"),
        "{body}"
    );
    assert!(
        body.contains("nightly_report failed 3 times in a row"),
        "{body}"
    );
    assert!(body.contains("last_error: connection refused"), "{body}");
}

#[tokio::test]
async fn plain_mode_delivers_to_a_local_relay() {
    let Some(sink) = SmtpSink::start(SinkTls::Plain).await else {
        return;
    };
    let mail = SmtpNotifier::new(config(&sink, SmtpSecurity::Plain)).unwrap();
    mail.notify(&notice()).await.unwrap();
    assert_is_the_notice(&only_message(&sink));
}

/// The sink requires STARTTLS before `MAIL` (aiosmtpd's default with `--tlscert`), so a mail
/// that arrives went over TLS.
#[tokio::test]
async fn starttls_delivers_over_tls() {
    let Some(sink) = SmtpSink::start(SinkTls::StartTls).await else {
        return;
    };
    let mail =
        SmtpNotifier::new(config(&sink, SmtpSecurity::StartTls).root_certificate_pem(ca_pem()))
            .unwrap();
    mail.notify(&notice()).await.unwrap();
    assert_is_the_notice(&only_message(&sink));
}

#[tokio::test]
async fn implicit_tls_delivers() {
    let Some(sink) = SmtpSink::start(SinkTls::Implicit).await else {
        return;
    };
    let mail =
        SmtpNotifier::new(config(&sink, SmtpSecurity::Tls).root_certificate_pem(ca_pem())).unwrap();
    mail.notify(&notice()).await.unwrap();
    assert_is_the_notice(&only_message(&sink));
}

#[tokio::test]
async fn starttls_mode_refuses_a_server_without_starttls() {
    let Some(sink) = SmtpSink::start(SinkTls::Plain).await else {
        return;
    };
    let mail = SmtpNotifier::new(config(&sink, SmtpSecurity::StartTls)).unwrap();
    let error = mail.notify(&notice()).await.unwrap_err();
    assert!(matches!(error, NotifyError::Transport { .. }), "{error:?}");
    assert!(sink.messages().is_empty(), "nothing sent in plain text");
}

#[tokio::test]
async fn a_certificate_from_an_unknown_authority_is_refused_at_once() {
    let Some(sink) = SmtpSink::start(SinkTls::Implicit).await else {
        return;
    };
    let wrong_root = std::fs::read(test_support::servers::other_ca_pem_path()).unwrap();
    let mail = SmtpNotifier::new(config(&sink, SmtpSecurity::Tls).root_certificate_pem(wrong_root))
        .unwrap();
    let error = mail.notify(&notice()).await.unwrap_err();
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
    assert!(
        chain.contains(&format!("smtps://127.0.0.1:{}", sink.port)),
        "{chain}"
    );
    assert!(sink.messages().is_empty());
}
