//! Names, holders and hosts written straight into the tables (as ShedLock in Java, an older
//! version or anyone with write access could) reach no terminal raw: every text command of
//! `lockctl` shows their control and bidirectional characters escaped, a name with a newline
//! forges no row, the JSON keeps the exact values, and such a row stays releasable by its
//! stored name.

mod common;

use std::process::Output;

use common::{HOLDER, LOCK, assert_exit, hold_lock, lockctl, stderr, stdout};
use lock_cluster::ClusterProvider;
use lock_cluster::{Heartbeat, InstanceInfo, JobRegistration};
use lock_core::LockProvider;
use lock_provider_sqlite::SqliteLockProvider;
use lock_provider_sqlite::rusqlite::{Connection, params};

/// Would forge a row: `billing  free` on a line of its own.
const FORGER: &str = "nl\nbilling  free";
/// Clears the screen.
const CLEAR: &str = "\u{1b}[2J";
/// Sets the window title, then rings.
const TITLE: &str = "\u{1b}]0;pwned\u{7}";
/// Shows what follows it reversed.
const REVERSED: &str = "\u{202e}fdp.exe";

/// What no output may carry: a control character other than lockctl's own newlines, a
/// bidirectional control, a line or paragraph separator.
fn assert_terminal_safe(output: &Output, what: &str) {
    for (stream, text) in [("stdout", stdout(output)), ("stderr", stderr(output))] {
        let raw: Vec<char> = text
            .chars()
            .filter(|&c| {
                (c.is_control() && c != '\n')
                    || lock_trigger::is_bidi_control(c)
                    || matches!(c, '\u{2028}' | '\u{2029}')
            })
            .collect();
        assert!(raw.is_empty(), "{what}: raw {raw:?} on {stream}:\n{text:?}");
        assert!(
            !text.lines().any(|line| line.starts_with("billing")),
            "{what}: a forged line on {stream}:\n{text}"
        );
    }
}

/// A database with three lock rows whose names and holders are hostile, written by SQL, and a
/// registry whose instance, host and job names are.
async fn hostile_database(path: &std::path::Path) -> SqliteLockProvider {
    let provider = SqliteLockProvider::open(path).expect("open");
    provider.ensure_schema().await.expect("ensure_schema");
    hold_lock(&provider).await;
    let connection = Connection::open(path).expect("open");
    connection
        .execute(
            "UPDATE shedlock SET name = ?1, locked_by = ?2 WHERE name = ?3",
            params![FORGER, TITLE, LOCK],
        )
        .expect("a name with a newline, a holder with an OSC sequence");
    for (name, holder) in [(CLEAR, HOLDER), (REVERSED, REVERSED)] {
        connection
            .execute(
                "INSERT INTO shedlock (name, lock_until, locked_at, locked_by) \
                 SELECT ?1, lock_until, locked_at, ?2 FROM shedlock WHERE name = ?3",
                params![name, holder, FORGER],
            )
            .expect("a copy of the row under another name");
    }
    let store = provider.cluster().expect("operations tables");
    let beat = Heartbeat {
        instance: InstanceInfo {
            instance_id: format!("i{CLEAR}"),
            host: format!("host\nbilling  alive{TITLE}"),
            pid: 1,
            version: REVERSED.into(),
            started_at: chrono::Utc::now(),
            clock_offset_ms: 0,
            heartbeat_ms: 60_000,
        },
        jobs: vec![JobRegistration {
            name: FORGER.into(),
            lock_name: FORGER.into(),
            trigger: format!("fixed rate 1h{CLEAR}"),
            zone: None,
            next_fire: None,
            following_fire: None,
        }],
    };
    store.heartbeat(&beat).await.expect("heartbeat");
    provider
}

#[tokio::test]
async fn hostile_names_are_shown_escaped_and_stay_releasable() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("locks.db");
    let provider = hostile_database(&path).await;
    let url = format!("sqlite://{}", path.display());
    let run = |args: &[&str]| {
        let mut args = args.to_vec();
        args.extend(["--url", url.as_str()]);
        lockctl(&args)
    };

    let output = run(&["list"]);
    assert_exit(&output, 0, "list");
    assert_terminal_safe(&output, "list");
    let listed = stdout(&output);
    assert_eq!(
        listed.lines().count(),
        4,
        "a header and three rows:\n{listed}"
    );
    assert!(listed.contains("nl\\nbilling  free"), "{listed}");
    assert!(listed.contains("\\u{1b}]0;pwned\\u{7}"), "{listed}");
    assert!(listed.contains("\\u{202e}fdp.exe"), "{listed}");

    // The JSON keeps the stored values, written as JSON escapes.
    let output = run(&["list", "--json"]);
    assert_exit(&output, 0, "list --json");
    assert_terminal_safe(&output, "list --json");
    let rows: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let names: Vec<&str> = rows
        .as_array()
        .expect("an array")
        .iter()
        .map(|row| row["name"].as_str().expect("a name"))
        .collect();
    for name in [FORGER, CLEAR, REVERSED] {
        assert!(names.contains(&name), "{name:?} not in {names:?}");
    }

    for args in [
        vec!["status"],
        vec!["instances"],
        vec!["history", FORGER],
        vec!["unlock", FORGER],
        vec!["unlock", REVERSED],
        vec!["reset-slot", CLEAR],
        vec!["unlock", "\u{1b}[2Jgone", "--force"],
        vec!["pause", "\u{1b}]0;nobody\u{7}"],
    ] {
        let output = run(&args);
        assert_terminal_safe(&output, &format!("{args:?}"));
    }
    let output = run(&["status"]);
    assert!(
        stdout(&output).contains("nl\\nbilling  free"),
        "{}",
        stdout(&output)
    );
    let output = run(&["instances"]);
    assert!(
        stdout(&output).contains("host\\nbilling  alive"),
        "{}",
        stdout(&output)
    );
    let output = run(&["unlock", FORGER]);
    assert_exit(&output, 2, "unlock without --force");
    assert!(
        stderr(&output).contains("held by \\u{1b}]0;pwned"),
        "{}",
        stderr(&output)
    );
    let output = run(&["unlock", "\u{1b}[2Jgone", "--force"]);
    assert_exit(&output, 1, "unlock of a name no row has");
    assert!(
        stderr(&output).contains("there is no lock named \"\\u{1b}[2Jgone\""),
        "{}",
        stderr(&output)
    );
    let output = run(&["pause", "\u{1b}]0;nobody\u{7}"]);
    assert!(
        stderr(&output).contains("(the registry has: nl\\nbilling  free)"),
        "{}",
        stderr(&output)
    );

    // A row written under a name today's rule refuses is released by its name as stored.
    let output = run(&["unlock", FORGER, "--force"]);
    assert_exit(&output, 0, "unlock --force of a stored name");
    assert_terminal_safe(&output, "unlock --force");
    assert!(
        stdout(&output)
            .starts_with("released lock \"nl\\nbilling  free\", held by \\u{1b}]0;pwned"),
        "{}",
        stdout(&output)
    );
    let record = provider
        .read_lock(FORGER)
        .await
        .expect("read")
        .expect("the row");
    assert!(!record.held, "{record:?}");
    // The action log holds the release; `actions` shows it escaped.
    let output = run(&["actions", FORGER]);
    assert_exit(&output, 0, "actions");
    assert_terminal_safe(&output, "actions");
    assert!(stdout(&output).contains("unlock"), "{}", stdout(&output));
}
