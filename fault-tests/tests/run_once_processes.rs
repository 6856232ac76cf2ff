//! Run once at start-up: three real processes call `run_once` for one task at the same
//! instant, on a real database; the first run anywhere fails. The task must end up done
//! exactly once, by another process, with every process told so.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Fixture, Provider};
use test_support::process::Process;

const SERVICE: &str = env!("CARGO_BIN_EXE_run-once-service");

/// Bounds each process: 1 s of work per run (2 runs), process start and database round trips
/// on a loaded machine; far below it when all goes well.
const EXIT_WITHIN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_one_failing_once_sqlite() {
    three_processes_one_failing_once(Provider::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_one_failing_once_postgres() {
    three_processes_one_failing_once(Provider::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_one_failing_once_mysql() {
    three_processes_one_failing_once(Provider::MySql).await;
}

async fn three_processes_one_failing_once(provider: Provider) {
    let Some(fixture) = Fixture::new(provider, "once").await else {
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir for the task's files");
    let effects = dir.path().join("effects");
    let fail_marker = dir.path().join("failed-once");
    // Far enough ahead for three processes to start and connect; they then call together.
    let start_at = chrono::Utc::now().timestamp_millis() + 1_500;
    let mut processes: Vec<Process> = ["a", "b", "c"]
        .iter()
        .map(|letter| {
            let instance = format!("{}-{letter}", fixture.tag);
            let mut command = Command::new(SERVICE);
            command.args([
                "--backend",
                fixture.backend.kind(),
                "--lock-url",
                &fixture.backend.location(),
                "--lock-table",
                &fixture.lock_table,
                "--instance",
                &instance,
                "--task",
                "migrate_users",
                "--version",
                "v3",
                "--start-at",
                &start_at.to_string(),
                "--effects",
                &effects.display().to_string(),
                "--fail-marker",
                &fail_marker.display().to_string(),
            ]);
            Process::spawn(instance, &mut command).show_output_if("SHOW_OUTPUT")
        })
        .collect();
    let mut outcomes = Vec::new();
    for process in &mut processes {
        let status = process
            .wait_exit(EXIT_WITHIN)
            .await
            .unwrap_or_else(|| panic!("{} did not exit within {EXIT_WITHIN:?}", process.name));
        assert!(
            status.success(),
            "{} failed: {}",
            process.name,
            process.stderr.text()
        );
        outcomes.extend(
            process
                .stdout
                .all()
                .into_iter()
                .filter_map(|line| line.strip_prefix("OUTCOME ").map(str::to_owned)),
        );
    }
    outcomes.sort();
    let words: Vec<&str> = outcomes
        .iter()
        .map(|o| o.rsplit(' ').next().unwrap())
        .collect();
    let count = |w: &str| words.iter().filter(|x| **x == w).count();
    assert_eq!(
        count("failed"),
        1,
        "exactly the first run fails: {outcomes:?}"
    );
    assert_eq!(count("ran"), 1, "exactly one successful run: {outcomes:?}");
    assert_eq!(count("timed_out"), 0, "{outcomes:?}");
    // Three processes, one of which called twice (after its failure): 4 calls, 2 told done.
    assert_eq!(count("already_done"), 2, "{outcomes:?}");
    assert_eq!(words.len(), 4, "{outcomes:?}");
    let effects = std::fs::read_to_string(&effects).expect("the successful run wrote its effect");
    assert_eq!(
        effects.lines().count(),
        1,
        "the task's effect happened once: {effects:?}"
    );
    let ran = outcomes.iter().find(|o| o.ends_with(" ran")).unwrap();
    assert!(ran.starts_with(effects.trim()), "{ran} vs {effects}");

    let done = fixture
        .lock_row("migrate_users@v3:done")
        .await
        .expect("the done marker's row");
    assert!(done.last_fire.is_some(), "{done:?}");
    let run_lock = fixture
        .lock_row("migrate_users@v3")
        .await
        .expect("the run lock's row");
    assert!(!run_lock.held, "the run lock is released: {run_lock:?}");
}
