//! The README's programs run and say what they should: the cluster demo on SQLite, PostgreSQL,
//! MariaDB and Redis (no slot twice, none missed), and the quickstart.

use test_support::db::{mysql_url, postgres_url, redis_url, socket_address};
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
    let addr = server_address(url);
    let connected = std::net::TcpStream::connect(&addr);
    test_support::skip::or_unreachable(what, &addr, connected).is_some()
}

/// Where the server of a `LOCK_TEST_*_URL` is: its host, and its port or the scheme's default.
fn server_address(url: &str) -> String {
    socket_address(url).unwrap_or_else(|| panic!("no host in {url}"))
}

/// The reachability check goes where the demo will: the URL's own host and port, and the
/// scheme's default port when the URL names none (as the drivers do).
#[test]
fn the_reachability_check_uses_the_urls_host_and_port() {
    for (url, expected) in [
        (
            "postgres://postgres@db.internal:5433/test",
            "db.internal:5433",
        ),
        ("postgres://postgres@db.internal/test", "db.internal:5432"),
        ("mysql://root@10.1.2.3:3307/test", "10.1.2.3:3307"),
        (
            "mysql://root@10.1.2.3/test?prefer_socket=false",
            "10.1.2.3:3306",
        ),
    ] {
        assert_eq!(server_address(url), expected, "{url}");
    }
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
fn cluster_demo_on_redis() {
    let url = redis_url();
    if reachable("Redis", &url) {
        assert_demo_ok(&["--seconds", "6", "--redis", &url]);
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
