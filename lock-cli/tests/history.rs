//! `lockctl history` on a real SQLite file: each row says which attempt of its fire it is and
//! whether cancellation was asked before the body ended, in the text and in `--json`; with
//! `--logs`, each run's log lines.

mod common;

use common::{assert_exit, lockctl, stdout};
use lock_cluster::{ClusterProvider, RunEnd, RunLogWriter, RunStart, RunState};
use lock_core::FireKind;
use lock_provider_sqlite::SqliteLockProvider;

/// A fire that failed, then succeeded on its retry after shutdown asked it to cancel: two
/// rows of one slot and fence, attempts 1 and 2.
#[tokio::test]
async fn history_shows_each_attempt_and_whether_cancellation_was_asked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("locks.db");
    let provider = SqliteLockProvider::open(&path).expect("open");
    provider.ensure_schema().await.expect("ensure_schema");
    let store = provider.cluster().expect("operations tables");
    let slot = chrono::Utc::now();
    for (attempt, outcome) in [(1, RunState::Failed), (2, RunState::Succeeded)] {
        let id = store
            .run_started(&RunStart {
                job: "export".into(),
                slot: Some(slot),
                fire_kind: FireKind::Scheduled,
                instance_id: "host:1:a".into(),
                fence: 4,
                attempt,
                params: Default::default(),
            })
            .await
            .expect("start");
        let end = RunEnd::new(id, outcome, (attempt == 1).then_some("feed not ready"))
            .with_cancel_requested(attempt == 2);
        store.run_ended(&end).await.expect("end");
    }
    let url = format!("sqlite://{}", path.display());

    let output = lockctl(&["history", "export", "--json", "--url", &url]);
    assert_exit(&output, 0, "history --json");
    let rows: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let rows: Vec<_> = rows
        .as_array()
        .expect("an array")
        .iter()
        .map(|r| {
            (
                r["attempt"].as_u64().expect("attempt"),
                r["outcome"].as_str().expect("outcome").to_owned(),
                r["cancel_requested"].as_bool().expect("cancel_requested"),
                r["fence"].as_u64().expect("fence"),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (2, "succeeded".to_owned(), true, 4),
            (1, "failed".to_owned(), false, 4)
        ]
    );

    let output = lockctl(&["history", "export", "--url", &url]);
    assert_exit(&output, 0, "history");
    let text = stdout(&output);
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let column = |name: &str| lines[0].iter().position(|h| *h == name).expect(name);
    let (attempt, cancel) = (column("ATTEMPT"), column("CANCEL_REQUESTED"));
    assert_eq!(
        (lines[1][attempt], lines[1][cancel]),
        ("2", "yes"),
        "{text}"
    );
    assert_eq!((lines[2][attempt], lines[2][cancel]), ("1", "-"), "{text}");
}

/// `history --logs`: each run followed by its lines (escaped for the terminal, the count of
/// lines not kept last), `--json` with each run's `logs`; without `--logs` neither changes.
#[tokio::test]
async fn history_logs_prints_each_run_with_its_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("locks.db");
    let provider = SqliteLockProvider::open(&path).expect("open");
    provider.ensure_schema().await.expect("ensure_schema");
    let store = provider.cluster().expect("operations tables");
    let at = chrono::Utc::now();
    let start = RunStart {
        job: "billing".into(),
        slot: Some(at),
        fire_kind: FireKind::Scheduled,
        instance_id: "host:1:a".into(),
        fence: 7,
        attempt: 1,
        params: Default::default(),
    };
    let quiet = store.run_started(&start).await.expect("start");
    store
        .run_ended(&RunEnd::new(quiet, RunState::Succeeded, None))
        .await
        .expect("end");
    let chatty = store.run_started(&start).await.expect("start");
    let mut lines = RunLogWriter::new(2, 65536);
    lines.line(at, "INFO", "billing::charge", |m| {
        m.push_str("charged 3 accounts")
    });
    lines.line(at, "WARN", "billing", |m| m.push_str("late\n\u{1b}[31mred"));
    lines.line(at, "INFO", "billing", |m| m.push_str("not kept"));
    store
        .run_ended(&RunEnd::new(chatty, RunState::Failed, Some("boom")).with_logs(lines.finish()))
        .await
        .expect("end");
    let url = format!("sqlite://{}", path.display());

    let output = lockctl(&["history", "billing", "--logs", "--url", &url]);
    assert_exit(&output, 0, "history --logs");
    let text = stdout(&output);
    let printed: Vec<&str> = text.lines().collect();
    assert_eq!(printed.len(), 6, "{text}");
    assert!(
        printed[0]
            .contains(" failed (run of scheduled, attempt 1, instance host:1:a, fence 7): boom"),
        "{text}"
    );
    assert!(
        printed[1].ends_with("INFO  billing::charge: charged 3 accounts"),
        "{text}"
    );
    assert!(printed[2].contains("WARN  billing: late"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "no escape reaches the terminal: {text:?}"
    );
    assert_eq!(printed[3], "    … 1 more lines not kept", "{text}");
    assert!(printed[4].contains(" succeeded "), "{text}");
    assert_eq!(printed[5], "    (no log lines)", "{text}");

    let output = lockctl(&["history", "billing", "--logs", "--json", "--url", &url]);
    assert_exit(&output, 0, "history --logs --json");
    let rows: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let logs = &rows[0]["logs"];
    assert_eq!(logs["dropped"], 1);
    assert_eq!(logs["lines"][1]["level"], "WARN");
    assert_eq!(logs["lines"][1]["message"], "late\n\u{1b}[31mred");
    assert_eq!(logs["lines"][0]["target"], "billing::charge");
    assert_eq!(rows[1]["logs"]["lines"].as_array().map(Vec::len), Some(0));

    let output = lockctl(&["history", "billing", "--json", "--url", &url]);
    let rows: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert!(rows[0].get("logs").is_none(), "without --logs: {rows}");
    let output = lockctl(&["history", "billing", "--url", &url]);
    let text = stdout(&output);
    assert!(
        text.starts_with("STARTED_AT"),
        "the table, unchanged: {text}"
    );
    assert!(!text.contains("charged"), "{text}");
}
