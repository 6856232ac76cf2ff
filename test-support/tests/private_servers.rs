//! The private servers' controls do what they say: the processes are stopped when frozen,
//! answer again when thawed, and a crash restart or a stop and start keeps the port and data.

use std::process::Command;
use std::time::Duration;

use test_support::private_postgres::PrivatePostgres;
use test_support::redis_server::{Durability, PrivateRedis};

/// The state letter of `/proc/<pid>/stat` (`T`: stopped); `X` once the process is gone (a
/// backend that ended between the listing and the read).
fn state(pid: u32) -> char {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 'X';
    };
    let after = stat.rsplit_once(')').expect("a stat line").1;
    after.trim_start().chars().next().expect("a state")
}

/// `SELECT 1` through the server's own `psql` with a connect timeout; whether it answered.
fn answers(pg: &PrivatePostgres) -> bool {
    Command::new("timeout")
        .arg("5")
        .arg(pg.bin_dir().join("psql"))
        .args([&pg.url(), "-tAc", "SELECT 1"])
        .env("PGCONNECT_TIMEOUT", "2")
        .output()
        .is_ok_and(|out| out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "1")
}

#[test]
fn private_postgres_freezes_thaws_crashes_stops_and_starts() {
    let Some(mut pg) = PrivatePostgres::start() else {
        return;
    };
    let dir = pg.data_dir();
    assert!(answers(&pg), "a fresh cluster answers:\n{}", pg.log());
    let pids = pg.pids();
    assert!(
        pids.len() >= 4,
        "postmaster and its background processes: {pids:?}"
    );

    pg.freeze();
    for pid in pg.pids() {
        // `Z`: a backend whose session (the probe's) ended; the stopped postmaster cannot reap it.
        let state = state(pid);
        assert!(
            matches!(state, 'T' | 'Z' | 'X'),
            "process {pid} of {pids:?} is stopped: {state}"
        );
    }
    assert!(!answers(&pg), "a frozen server answers nothing");
    pg.thaw();
    for pid in pg.pids() {
        let state = state(pid);
        assert!(!matches!(state, 'T'), "process {pid} runs again: {state}");
    }
    assert!(answers(&pg), "a thawed server answers");

    let before = pg.pids()[0];
    pg.restart_immediate();
    assert_ne!(
        pg.pids()[0],
        before,
        "a new postmaster after the crash restart"
    );
    assert!(
        answers(&pg),
        "the server answers after crash recovery:\n{}",
        pg.log()
    );
    assert!(pg.log().contains("was interrupted") || pg.log().contains("not properly shut down"));

    pg.stop();
    assert!(pg.pids().is_empty(), "no postmaster once stopped");
    assert!(!answers(&pg), "a stopped server answers nothing");
    pg.start_again();
    assert!(answers(&pg), "the server answers after the start");

    drop(pg);
    assert!(!dir.exists(), "the folder is removed on drop");
}

#[test]
fn private_redis_freezes_and_thaws() {
    let Some(redis) = PrivateRedis::start(Durability::AppendOnly) else {
        return;
    };
    let pid = redis.pid().expect("a running server");
    redis.freeze();
    // `kill` returns once the signal is queued; the process stops when it is next scheduled.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while state(pid) != 'T' {
        assert!(
            std::time::Instant::now() < deadline,
            "redis-server {pid} not stopped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    redis.thaw();
    assert!(redis.command("PING").expect("PING").starts_with("+PONG"));
}
