//! What the cluster commands say when they cannot do what was asked: operations tables
//! missing (with their DDL), no such job, no live instance, a name that cannot be a job's; and
//! the empty answers of a fresh set of tables.

mod common;

use common::{assert_exit, lockctl, stderr, stdout};
use lock_cluster::ClusterProvider;
use lock_cluster::{Heartbeat, InstanceInfo, JobRegistration};
use lock_provider_sqlite::SqliteLockProvider;

fn shedlock_only(path: &std::path::Path) {
    let connection = lock_provider_sqlite::rusqlite::Connection::open(path).expect("open");
    connection
        .execute_batch(
            "CREATE TABLE shedlock (name VARCHAR(64) NOT NULL PRIMARY KEY, \
             lock_until TEXT NOT NULL, locked_at TEXT NOT NULL, locked_by VARCHAR(255) NOT NULL)",
        )
        .expect("ShedLock's DDL");
}

#[test]
fn missing_operations_tables_are_named_with_their_ddl() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("locks.db");
    shedlock_only(&path);
    let url = format!("sqlite://{}", path.display());
    for command in [vec!["status"], vec!["instances"], vec!["history", "report"]] {
        let mut args = command.clone();
        args.extend(["--url", url.as_str()]);
        let output = lockctl(&args);
        assert_exit(&output, 1, &command.join(" "));
        let err = stderr(&output);
        assert!(
            err.contains(
                "the operations tables shedlock_instances, shedlock_runs, shedlock_control, \
                 shedlock_actions, shedlock_incidents do not exist"
            ),
            "{err}"
        );
        assert!(
            err.contains("CREATE TABLE IF NOT EXISTS \"shedlock_runs\""),
            "{err}"
        );
    }
}

#[tokio::test]
async fn unknown_jobs_and_bad_names_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("locks.db");
    let provider = SqliteLockProvider::open(&path).expect("open");
    provider.ensure_schema().await.expect("ensure_schema");
    let url = format!("sqlite://{}", path.display());
    for command in ["pause", "trigger"] {
        let output = lockctl(&[command, "report", "--url", &url]);
        assert_exit(&output, 1, command);
        assert!(
            stderr(&output).contains("no job named \"report\" in the registry"),
            "{}",
            stderr(&output)
        );
    }
    let output = lockctl(&["trigger", "", "--url", &url]);
    assert_exit(&output, 2, "trigger with an empty name");
    assert!(stderr(&output).contains("a job name is 1 to 255 bytes"));
    let output = lockctl(&["resume", "report", "--url", &url]);
    assert_exit(&output, 0, "resume");
    assert_eq!(stdout(&output), "job \"report\" was not paused\n");
    for command in [
        vec!["status", "--json"],
        vec!["instances", "--json"],
        vec!["history", "report", "--json"],
    ] {
        let mut args = command.clone();
        args.extend(["--url", url.as_str()]);
        let output = lockctl(&args);
        assert_exit(&output, 0, &command.join(" "));
        assert_eq!(stdout(&output).trim(), "[]");
    }
    let output = lockctl(&["status", "--grace", "soon", "--url", &url]);
    assert_exit(&output, 2, "a bad grace");
}

#[tokio::test]
async fn a_trigger_for_a_job_without_live_instances_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("locks.db");
    let provider = SqliteLockProvider::open(&path).expect("open");
    provider.ensure_schema().await.expect("ensure_schema");
    // An instance that heartbeated once, with a 1 ms interval: gone 5 ms later.
    let store = provider.cluster().expect("operations");
    let beat = Heartbeat {
        instance: InstanceInfo {
            instance_id: "old:1:aa".into(),
            host: "old".into(),
            pid: 1,
            version: "0.1.0".into(),
            started_at: chrono::Utc::now(),
            clock_offset_ms: 0,
            heartbeat_ms: 1,
        },
        jobs: vec![JobRegistration {
            name: "report".into(),
            lock_name: "report".into(),
            trigger: "fixed rate 1h".into(),
            zone: None,
            next_fire: None,
            following_fire: None,
        }],
    };
    store.heartbeat(&beat).await.expect("heartbeat");
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let url = format!("sqlite://{}", path.display());
    let output = lockctl(&["trigger", "report", "--url", &url]);
    assert_exit(&output, 1, "trigger");
    assert!(
        stderr(&output).contains("no live instance runs job \"report\""),
        "{}",
        stderr(&output)
    );
    assert!(
        store.control().await.expect("control").is_empty(),
        "no request was left"
    );
    let output = lockctl(&["pause", "report", "--url", &url]);
    assert_exit(&output, 0, "pause of a registered job");
    let output = lockctl(&["pause", "report", "--url", &url]);
    assert_eq!(stdout(&output), "job \"report\" was already paused\n");
}
