//! lockctl is bounded: a database that accepts connections and never answers, or stops
//! answering after the handshake, is an error within `--timeout` (10 s by default), not a
//! hang; and `lockctl serve` closes idle and slow-header connections, so that a flood of them
//! does not keep its dashboard unreachable.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use common::{postgres_url, stderr};
use lock_provider_postgres::tokio_postgres::config::Host;
use test_support::process::free_port;

/// lockctl's default `--timeout`.
const TIMEOUT: Duration = Duration::from_secs(10);
/// What a loaded machine may add to it: a process start, a runtime, a few round trips.
const MARGIN: Duration = Duration::from_secs(10);
/// How long a child is waited for before it is killed and the test fails: a hang.
const HANG: Duration = Duration::from_secs(40);

/// Waits for `child` at most [`HANG`]; `None` (the child killed) when it hung.
fn wait_bounded(mut child: Child) -> Option<Output> {
    let deadline = Instant::now() + HANG;
    loop {
        match child.try_wait().expect("wait for lockctl") {
            Some(_) => return Some(child.wait_with_output().expect("lockctl's output")),
            None if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
            None => thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn spawn_lockctl(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lockctl"))
        .args(args)
        .env_remove("LOCKCTL_URL")
        .env_remove("LOCKCTL_TABLE")
        .env_remove("LOCKCTL_TIMEOUT")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start lockctl")
}

/// A server that accepts every connection and never sends a byte (the connections are held
/// open until the process ends).
fn silent_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}

/// Asserts that `output` is lockctl's run-time failure (exit code 1) after `took`, within the
/// timeout, naming `server` and saying it timed out.
fn assert_timed_out(output: Option<Output>, took: Duration, server: &str, what: &str) {
    let output = output.unwrap_or_else(|| panic!("{what}: lockctl hung for {HANG:?}"));
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(1), "{what}: {message}");
    assert!(
        took < TIMEOUT + MARGIN && took > Duration::ZERO,
        "{what}: took {took:?}: {message}"
    );
    // Each driver says it its own way when its own timeout comes first ("timed out",
    // "within the connect timeout").
    let lower = message.to_lowercase();
    assert!(
        message.contains(server) && (lower.contains("timed out") || lower.contains("timeout")),
        "{what}: {message}"
    );
}

#[test]
fn every_url_kind_times_out_against_a_server_that_never_answers() {
    let port = silent_server();
    let server = format!("127.0.0.1:{port}");
    let urls = [
        format!("postgres://app@{server}/test"),
        format!("mysql://app@{server}/test"),
        format!("redis://{server}/0"),
        format!("sqlx+postgres://app@{server}/test"),
        format!("sqlx+mysql://app@{server}/test"),
    ];
    // All at once: each waits its own timeout.
    let started = Instant::now();
    let children: Vec<(String, Child)> = urls
        .iter()
        .map(|url| (url.clone(), spawn_lockctl(&["list", "--url", url])))
        .collect();
    for (url, child) in children {
        let output = wait_bounded(child);
        assert_timed_out(output, started.elapsed(), &server, &url);
    }
}

#[test]
fn a_shorter_timeout_is_taken_and_a_zero_one_refused() {
    let port = silent_server();
    let server = format!("127.0.0.1:{port}");
    let url = format!("postgres://app@{server}/test");
    let started = Instant::now();
    let output = wait_bounded(spawn_lockctl(&["list", "--timeout", "2s", "--url", &url]));
    let took = started.elapsed();
    assert_timed_out(output, took, &server, "--timeout 2s");
    assert!(took >= Duration::from_secs(2), "{took:?}");
    assert!(took < Duration::from_secs(2) + MARGIN, "{took:?}");

    let refused = wait_bounded(spawn_lockctl(&["list", "--timeout", "0s", "--url", &url]))
        .expect("a usage error does not connect");
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("longer than zero"),
        "{}",
        stderr(&refused)
    );
}

/// A proxy to PostgreSQL that passes the startup handshake (the client's startup message and
/// every answer of the server) and then swallows whatever the client sends: a database that
/// accepted the connection and then stopped answering.
fn mute_after_handshake(upstream: (String, u16)) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let upstream = upstream.clone();
            thread::spawn(move || relay_startup_then_mute(client, upstream));
        }
    });
    port
}

fn relay_startup_then_mute(mut client: TcpStream, upstream: (String, u16)) {
    let Ok(mut server) = TcpStream::connect((upstream.0.as_str(), upstream.1)) else {
        return;
    };
    let Ok(mut from_server) = server.try_clone() else {
        return;
    };
    let Ok(mut to_client) = client.try_clone() else {
        return;
    };
    // Everything the server says reaches the client: it answers the handshake, and nothing
    // else, since nothing else reaches it.
    thread::spawn(move || {
        let _ = std::io::copy(&mut from_server, &mut to_client);
    });
    // The startup message: a 4-byte big-endian length that counts itself, then the rest.
    let mut length = [0u8; 4];
    if client.read_exact(&mut length).is_err() {
        return;
    }
    let mut startup = vec![0u8; (u32::from_be_bytes(length) as usize).saturating_sub(4)];
    if client.read_exact(&mut startup).is_err() {
        return;
    }
    let _ = server.write_all(&length);
    let _ = server.write_all(&startup);
    // Then every statement is read and dropped: no answer ever comes.
    let mut sink = [0u8; 4096];
    while matches!(client.read(&mut sink), Ok(n) if n > 0) {}
}

#[test]
fn list_fails_within_the_timeout_when_postgres_stops_answering_after_the_handshake() {
    let url = postgres_url();
    let Some(upstream) = shared_postgres(&url) else {
        return;
    };
    let port = mute_after_handshake(upstream);
    let muted = format!("postgres://postgres@127.0.0.1:{port}/test");
    let started = Instant::now();
    let output = wait_bounded(spawn_lockctl(&["list", "--url", &muted]));
    assert_timed_out(
        output,
        started.elapsed(),
        &format!("127.0.0.1:{port}"),
        "list on a muted PostgreSQL",
    );
}

/// The shared PostgreSQL's host and port, `None` after the skip-unless-CI rule when it is not
/// reachable.
fn shared_postgres(url: &str) -> Option<(String, u16)> {
    let config = lock_provider_postgres::ConnectionConfig::from_url(url).expect("the test URL");
    let driver = config.driver_config();
    let host = match driver.get_hosts().first() {
        Some(Host::Tcp(name)) => name.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = driver.get_ports().first().copied().unwrap_or(5432);
    match TcpStream::connect((host.as_str(), port)) {
        Ok(_) => Some((host, port)),
        Err(e) => {
            test_support::skip::unreachable("PostgreSQL", url, &e);
            None
        }
    }
}

/// `lockctl serve` on a SQLite file, under a limit of 256 file descriptors, with `held`
/// connections open that send nothing or half a request.
#[test]
fn serve_closes_idle_and_slow_connections_so_a_request_still_gets_through() {
    if !test_support::skip::command_available("prlimit") {
        test_support::skip::skip_unless_ci("prlimit (util-linux) is not installed");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("locks.db");
    // lockctl never creates a database: make the file and its table first.
    let provider = lock_provider_sqlite::SqliteLockProvider::open(&db).expect("open sqlite");
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(provider.ensure_schema())
        .expect("create the table");
    drop(provider);
    let port = free_port();
    let mut served = Command::new("prlimit")
        .arg("--nofile=256")
        .arg(env!("CARGO_BIN_EXE_lockctl"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--url")
        .arg(format!("sqlite://{}", db.display()))
        .env_remove("LOCKCTL_URL")
        .env_remove("LOCKCTL_TABLE")
        .env_remove("LOCKCTL_DASHBOARD_TOKENS")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start lockctl serve");
    let _kill = KillOnDrop(&mut served);
    let address = ("127.0.0.1", port);
    let up = Instant::now() + Duration::from_secs(30);
    while test_support::http::get(address, "/api/locks").is_err() {
        assert!(Instant::now() < up, "lockctl serve never answered");
        thread::sleep(Duration::from_millis(100));
    }

    // 300 connections: more than the process has file descriptors. Half send nothing, half
    // the start of a request and then nothing.
    let flooded = Instant::now();
    let mut held = Vec::new();
    for i in 0..300 {
        let mut stream = TcpStream::connect(address).expect("connect (the kernel queues it)");
        if i % 2 == 1 {
            stream
                .write_all(b"GET /api/locks HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                .expect("half a request");
        }
        held.push(stream);
    }

    // A normal request behind them gets its answer once the idle ones are closed: after the
    // header-read timeout (10 s), not after the flood ends (they are held until the test ends).
    let (status, body) = get_within(address, "/api/locks", TIMEOUT + MARGIN)
        .unwrap_or_else(|e| panic!("no answer behind 300 idle connections: {e}"));
    assert_eq!(status, 200, "{body}");
    assert!(
        flooded.elapsed() < TIMEOUT + MARGIN,
        "{:?}",
        flooded.elapsed()
    );

    // Every held connection was closed by the server: read EOF (or a reset), within the
    // timeout of the last accepted ones.
    for (i, mut stream) in held.into_iter().enumerate() {
        let left = (flooded + 2 * TIMEOUT + MARGIN).saturating_duration_since(Instant::now());
        stream
            .set_read_timeout(Some(left.max(Duration::from_millis(10))))
            .expect("read timeout");
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf) {
                // A 408 for the half request may come before the close.
                Ok(n) if n > 0 => continue,
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!(
                    "connection {i} still open after {:?}: {e}",
                    flooded.elapsed()
                ),
            }
        }
    }
}

/// `GET path` over HTTP/1.0, waiting at most `limit` for the whole answer.
fn get_within(address: (&str, u16), path: &str, limit: Duration) -> std::io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(address)?;
    stream.set_read_timeout(Some(limit))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {response:?}")))?;
    Ok((status, response))
}

struct KillOnDrop<'a>(&'a mut Child);

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
