//! The alert rules across real service processes, three instances, each configured by the
//! environment (`LOCK_ALERT_..`) with a signed webhook to a local receiver and mail to a local
//! SMTP server (Debian's `aiosmtpd`): each incident told exactly once on each notifier, and its
//! end once, whichever instance evaluates.
//!
//! - `alert_flaky` (every second) fails while a flag file exists: three failures in a row,
//!   across the instances, give one `failed_in_a_row` notice; removing the file, one resolved.
//! - `alert_slow` (6 s), triggered once with the limit at 2 s: one `running_too_long`, one
//!   resolved when it ends.
//! - One instance killed with `SIGKILL`: one `instance_gone`; the others stopped gracefully
//!   afterwards: nothing for them.
//! - Every webhook request's signature verifies with the shared secret, and the same body
//!   changed by one byte does not.
//!
//! `cargo test -p fault-tests --test alerts_processes`

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Fixture, Instance, Provider};
use lock_alerts::{Notice, NoticeState, SIGNATURE_HEADER, TIMESTAMP_HEADER, verify_signature};
use test_support::receiver::{Receiver, Recorded};
use test_support::smtp_sink::{SinkTls, SmtpSink};

const SECOND: Duration = Duration::from_secs(1);
const SECRET: &str = "whsec_fault_tests";

scenario!(each_incident_told_once: postgres => Postgres, mariadb => MySql);

/// The notices the receiver got, in order.
fn webhook_notices(requests: &[Recorded]) -> Vec<Notice> {
    requests
        .iter()
        .map(|r| {
            serde_json::from_slice(&r.body).unwrap_or_else(|e| {
                panic!("a webhook body that is no notice ({e}): {}", r.body_text())
            })
        })
        .collect()
}

/// `(incident key, state)` of each notice of `key`, in order.
fn told(notices: &[Notice], key: &str) -> Vec<NoticeState> {
    notices
        .iter()
        .filter(|n| n.incident_key == key)
        .map(|n| n.state)
        .collect()
}

/// The unfolded `Subject:` of a raw mail.
fn subject(mail: &str) -> String {
    let mut lines = mail.lines().skip_while(|l| !l.starts_with("Subject:"));
    let mut subject = lines
        .next()
        .unwrap_or_else(|| panic!("a mail without a subject:\n{mail}"))["Subject:".len()..]
        .trim()
        .to_owned();
    for continued in lines.take_while(|l| l.starts_with([' ', '\t'])) {
        subject.push(' ');
        subject.push_str(continued.trim());
    }
    subject
}

async fn each_incident_told_once(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "alerts").await else {
        return;
    };
    let Some(mail) = SmtpSink::start(SinkTls::Plain).await else {
        return;
    };
    let receiver = Receiver::start().await;
    let flag = tempfile::NamedTempFile::new().expect("a flag file");
    let flag_path = flag.path().to_str().expect("a UTF-8 temp path").to_owned();
    let smtp_url = format!("smtp+plain://127.0.0.1:{}", mail.port);
    let hook = receiver.url("/hook");
    let mut instances: Vec<Instance> = ["A", "B", "C"]
        .iter()
        .map(|letter| {
            fx.service(letter)
                .jobs("alert_flaky,alert_slow")
                .arg("--fail-while")
                .arg(&flag_path)
                // Gone after 5 missed heartbeats: 1.25 s.
                .arg("--heartbeat-ms")
                .arg("250")
                .env("LOCK_ALERT_WEBHOOK_URL", &hook)
                .env("LOCK_ALERT_WEBHOOK_SECRET", SECRET)
                .env("LOCK_ALERT_SMTP_URL", &smtp_url)
                .env("LOCK_ALERT_MAIL_FROM", "locks@example.com")
                .env("LOCK_ALERT_MAIL_TO", "oncall@example.com")
                .env("LOCK_ALERT_EVERY", "1s")
                .env("LOCK_ALERT_RUNNING_LONGER_THAN", "2s")
                .env("LOCK_ALERT_CLUSTER", &fx.tag)
                .spawn()
        })
        .collect();
    for instance in &mut instances {
        instance.ready().await;
    }
    let notices = || webhook_notices(&receiver.requests());
    let wait_for = |key: String, state: NoticeState, within: Duration| {
        let notices = &notices;
        async move {
            common::eventually(within, &format!("{state} {key}"), || async {
                told(&notices(), &key).contains(&state).then_some(())
            })
            .await
        }
    };

    // Three failures in a row, whichever instances ran them: one firing notice.
    let failing = "failed_in_a_row/alert_flaky".to_owned();
    wait_for(failing.clone(), NoticeState::Firing, 30 * SECOND).await;
    std::fs::remove_file(flag.path()).expect("remove the flag file");
    wait_for(failing.clone(), NoticeState::Resolved, 30 * SECOND).await;

    // One run over its limit: one firing notice while it runs, one resolved after it.
    let slow = "running_too_long/alert_slow".to_owned();
    fx.cluster()
        .request_trigger("alert_slow", "fault-tests")
        .await
        .expect("ask for a run of alert_slow");
    wait_for(slow.clone(), NoticeState::Firing, 30 * SECOND).await;
    wait_for(slow.clone(), NoticeState::Resolved, 30 * SECOND).await;

    // An instance killed: one instance_gone. (An evaluator killed mid-evaluation holds the
    // rules up for its lease, 15 s.)
    let killed = format!("{}-C", fx.tag);
    let gone = format!("instance_gone/{killed}");
    instances[2].signal("KILL");
    instances[2].wait_exit(10 * SECOND).await.expect("killed");
    wait_for(gone.clone(), NoticeState::Firing, 45 * SECOND).await;

    // Quiet: a few more evaluations by each survivor, then graceful stops, one at a time, so
    // the last one evaluates after the other left.
    tokio::time::sleep(4 * SECOND).await;
    instances[0].stop(30 * SECOND).await;
    tokio::time::sleep(4 * SECOND).await;
    instances[1].stop(30 * SECOND).await;

    let notices = notices();
    let mut by_key: BTreeMap<&str, Vec<NoticeState>> = BTreeMap::new();
    for notice in &notices {
        by_key
            .entry(notice.incident_key.as_str())
            .or_default()
            .push(notice.state);
        assert_eq!(notice.cluster, fx.tag);
    }
    use NoticeState::{Firing, Resolved};
    let expected = BTreeMap::from([
        (failing.as_str(), vec![Firing, Resolved]),
        (gone.as_str(), vec![Firing]),
        (slow.as_str(), vec![Firing, Resolved]),
    ]);
    assert_eq!(
        by_key, expected,
        "each incident told once on the webhook: {notices:#?}"
    );
    let firing = notices
        .iter()
        .find(|n| n.incident_key == failing && n.state == Firing)
        .expect("the firing notice");
    assert_eq!(firing.job.as_deref(), Some("alert_flaky"));
    assert_eq!(firing.details["last_error"], "the flag file says fail");
    let gone_notice = notices
        .iter()
        .find(|n| n.incident_key == gone)
        .expect("gone");
    assert_eq!(gone_notice.instance.as_deref(), Some(killed.as_str()));

    // The same incidents by mail, one mail per notice.
    let mut subjects: Vec<String> = mail.messages().iter().map(|m| subject(m)).collect();
    subjects.sort();
    let mut expected_subjects = vec![
        "[scheduled-locks] FIRING failed_in_a_row: alert_flaky".to_owned(),
        "[scheduled-locks] RESOLVED failed_in_a_row: alert_flaky".to_owned(),
        "[scheduled-locks] FIRING running_too_long: alert_slow".to_owned(),
        "[scheduled-locks] RESOLVED running_too_long: alert_slow".to_owned(),
        format!("[scheduled-locks] FIRING instance_gone: {killed}"),
    ];
    expected_subjects.sort();
    assert_eq!(
        subjects, expected_subjects,
        "each incident told once by mail"
    );

    // The receiver can tell a signed body from a changed one.
    let tolerance = Duration::from_secs(300);
    for request in receiver.requests() {
        let timestamp = request
            .header(TIMESTAMP_HEADER)
            .expect("a timestamp header");
        let signature = request
            .header(SIGNATURE_HEADER)
            .expect("a signature header");
        assert_eq!(
            verify_signature(
                SECRET.as_bytes(),
                timestamp,
                signature,
                &request.body,
                tolerance
            ),
            Ok(()),
            "{}",
            request.body_text()
        );
        let mut changed = request.body.clone();
        changed[0] ^= 1;
        assert!(
            verify_signature(SECRET.as_bytes(), timestamp, signature, &changed, tolerance).is_err(),
            "a changed body must not verify"
        );
        assert!(
            verify_signature(
                b"another secret",
                timestamp,
                signature,
                &request.body,
                tolerance
            )
            .is_err()
        );
    }
    drop(instances);
    fx.cleanup().await;
}
