//! `lockctl history` on a real SQLite file: each row says which attempt of its fire it is and
//! whether cancellation was asked before the body ended, in the text and in `--json`.

mod common;

use common::{assert_exit, lockctl, stdout};
use lock_cluster::{ClusterProvider, RunEnd, RunStart, RunState};
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
