//! The README's programs run and say what they should: the cluster demo on SQLite, PostgreSQL
//! and MariaDB (no slot twice, none missed), and the quickstart.

use std::process::Command;

fn run(bin: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new(bin)
        .args(args)
        .output()
        .expect("the example runs");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

fn assert_demo_ok(args: &[&str]) {
    let (ok, text) = run(env!("CARGO_BIN_EXE_cluster_demo"), args);
    assert!(ok, "cluster_demo {args:?} failed:\n{text}");
    assert!(
        text.contains("OK: every due slot ran exactly once"),
        "{text}"
    );
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| {
            l.starts_with("every_second")
                || l.starts_with("fixed_rate")
                || l.starts_with("slow_report")
        })
        .collect();
    assert_eq!(rows.len(), 3, "{text}");
    for row in rows {
        let cells: Vec<&str> = row.split_whitespace().collect();
        let (due, runs) = (
            cells[1].parse::<u32>().unwrap(),
            cells[2].parse::<u32>().unwrap(),
        );
        let (duplicates, missed) = (cells[4], cells[5]);
        assert_eq!((duplicates, missed), ("0", "0"), "{row}");
        assert!(runs >= due, "{row}");
    }
}

/// Whether a server answers; with `CI` set, an unreachable server fails the test.
fn reachable(what: &str, addr: &str) -> bool {
    match std::net::TcpStream::connect(addr) {
        Ok(_) => true,
        Err(error) if std::env::var_os("CI").is_some() => {
            panic!("{what} unreachable at {addr}: {error}")
        }
        Err(error) => {
            eprintln!("SKIPPED: {what} unreachable at {addr}: {error}");
            false
        }
    }
}

#[test]
fn cluster_demo_on_sqlite() {
    assert_demo_ok(&["--seconds", "6"]);
}

#[test]
fn cluster_demo_on_postgres() {
    let url = std::env::var("LOCK_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    if reachable("PostgreSQL", "127.0.0.1:5432") {
        assert_demo_ok(&["--seconds", "6", "--postgres", &url]);
    }
}

#[test]
fn cluster_demo_on_mariadb() {
    let url = std::env::var("LOCK_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".into());
    if reachable("MariaDB", "127.0.0.1:3306") {
        assert_demo_ok(&["--seconds", "6", "--mysql", &url]);
    }
}

#[test]
fn cluster_demo_rejects_bad_arguments() {
    let (ok, text) = run(env!("CARGO_BIN_EXE_cluster_demo"), &["--instances", "x"]);
    assert!(!ok && text.contains("--instances"), "{text}");
}

#[test]
fn quickstart_runs_and_stops() {
    let (ok, text) = run(env!("CARGO_BIN_EXE_quickstart"), &["3"]);
    assert!(ok, "{text}");
    assert!(
        text.contains("generating bills"),
        "the job should have run at least once:\n{text}"
    );
    assert!(text.contains("scheduler shutting down"), "{text}");
}
