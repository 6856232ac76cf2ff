//! The README's programs run and say what they should: the cluster demo on SQLite, PostgreSQL
//! and MariaDB (no slot twice, none missed), and the quickstart.

use test_support::db::{address, mysql_url, postgres_url};
use test_support::process::run_to_end as run;

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

/// Whether the server of `url` answers; with `CI` set, an unreachable server fails the test.
fn reachable(what: &str, url: &str) -> bool {
    let addr = address(url).unwrap_or_else(|| panic!("no host:port in {url}"));
    let connected = std::net::TcpStream::connect(&addr);
    test_support::skip::or_unreachable(what, &addr, connected).is_some()
}

#[test]
fn cluster_demo_on_sqlite() {
    assert_demo_ok(&["--seconds", "6"]);
}

#[test]
fn cluster_demo_on_postgres() {
    let url = postgres_url();
    if reachable("PostgreSQL", &url) {
        assert_demo_ok(&["--seconds", "6", "--postgres", &url]);
    }
}

#[test]
fn cluster_demo_on_mariadb() {
    let url = mysql_url();
    if reachable("MariaDB", &url) {
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
