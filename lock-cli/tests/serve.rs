//! `lockctl serve`: the dashboard served standalone by the binary against a provider URL,
//! with a token from `LOCKCTL_DASHBOARD_TOKENS`; an action's audit line names the token.

mod common;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{HOLDER, LOCK, hold_lock, postgres_url, reachable, unique_table};
use lock_core::LockProvider;
use lock_provider_postgres::PostgresLockProvider;
use test_support::http::{get, request};
use test_support::process::free_port;

const SECRET: &str = "operator-secret-0123456789";

/// `lockctl serve` as a child, killed when dropped.
struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn serve_shows_the_dashboard_and_allows_actions_to_a_token() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let url = postgres_url();
    let Some(provider) = reachable(
        "PostgreSQL",
        &url,
        runtime.block_on(PostgresLockProvider::connect(&url)),
    ) else {
        return;
    };
    let table = unique_table("serve");
    let _drop = test_support::table::drop_postgres_table(&table);
    let provider = provider.with_table(&table).expect("a valid table name");
    runtime.block_on(async {
        provider.ensure_schema().await.expect("create the tables");
        hold_lock(&provider).await;
    });

    let port = free_port();
    let mut served = Served(
        Command::new(env!("CARGO_BIN_EXE_lockctl"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--url", &url, "--table", &table])
            .env_remove("LOCKCTL_URL")
            .env_remove("LOCKCTL_TABLE")
            .env("LOCKCTL_DASHBOARD_TOKENS", format!("ops={SECRET}"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start lockctl serve"),
    );
    let address = ("127.0.0.1", port);
    // Up within 30 s on a loaded machine (it connects to the database first).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (status, jobs) = loop {
        match get(address, "/") {
            Ok(reply) => break reply,
            Err(e) if std::time::Instant::now() > deadline => {
                panic!("lockctl serve never answered: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    assert_eq!(status, 200, "{jobs}");
    assert!(
        jobs.contains("<h1>Jobs") && jobs.contains("log in"),
        "{jobs}"
    );
    let (status, locks) = get(address, "/api/locks").expect("GET /api/locks");
    assert_eq!(status, 200, "{locks}");
    let locks: serde_json::Value = serde_json::from_str(&locks).expect("JSON");
    assert_eq!(
        (locks[0]["name"].as_str(), locks[0]["locked_by"].as_str()),
        (Some(LOCK), Some(HOLDER))
    );

    let unlock = format!("/api/locks/{LOCK}/unlock?force=true");
    let refused = request(address, "POST", &unlock, &[], "").expect("POST");
    assert_eq!(refused.status, 403, "{}", refused.body);
    let bearer = format!("Bearer {SECRET}");
    let released =
        request(address, "POST", &unlock, &[("Authorization", &bearer)], "").expect("POST");
    assert_eq!(released.status, 200, "{}", released.body);
    let record = runtime
        .block_on(provider.read_lock(LOCK))
        .expect("read")
        .expect("the row");
    assert!(!record.held, "{record:?}");

    let _ = served.0.kill();
    let _ = served.0.wait();
    let mut stderr = String::new();
    served
        .0
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(
        stderr.contains(&format!(
            "on http://127.0.0.1:{port}/, actions allowed to tokens ops"
        )),
        "{stderr}"
    );
    let audit = stderr
        .lines()
        .find(|line| line.contains("dashboard action"))
        .unwrap_or_else(|| panic!("no audit line: {stderr}"));
    assert!(
        audit.contains("token=ops") && audit.contains("action=\"unlock\"") && audit.contains(LOCK),
        "{audit}"
    );
}

/// A secret that must never reach stderr, in any part.
const LEAKY: &str = "Zq9xS3CRETp7f2bKp0wLm4";

/// Whether any 5 consecutive characters of [`LEAKY`] are in `text`.
fn leaks(text: &str) -> bool {
    LEAKY
        .as_bytes()
        .windows(5)
        .any(|part| text.contains(std::str::from_utf8(part).expect("ASCII")))
}

/// `lockctl serve` with `args` and `env` against an unreachable URL: its exit code and stderr
/// (every token setting is settled before the database is reached).
fn refused_serve(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_lockctl"))
        .arg("serve")
        .args(args)
        .args(["--url", "postgres://postgres@127.0.0.1:1/test"])
        .env_remove("LOCKCTL_URL")
        .env_remove("LOCKCTL_DASHBOARD_TOKENS")
        .envs(env.iter().copied())
        .output()
        .expect("run lockctl serve");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Arguments and environment variables of one `lockctl serve`.
type Case<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);

#[test]
fn a_malformed_token_setting_never_prints_its_secret() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("tokens");
    std::fs::write(
        &file,
        format!("# ops\nops:viewer=secret-of-ops-0001\n{LEAKY}\n"),
    )
    .unwrap();
    let file = file.to_str().expect("UTF-8 path").to_owned();
    let with_role = format!("alice:{LEAKY}");
    let bad_role = format!("alice:{LEAKY}=x-0123456789abcdef");
    let cases: [Case; 6] = [
        (vec![], vec![("LOCKCTL_DASHBOARD_TOKENS", LEAKY)]),
        (vec![], vec![("LOCKCTL_DASHBOARD_TOKENS", &with_role)]),
        (vec![], vec![("LOCKCTL_DASHBOARD_TOKENS", &bad_role)]),
        (vec!["--token", LEAKY], vec![]),
        (vec!["--token", &with_role], vec![]),
        (vec!["--token-file", &file], vec![]),
    ];
    for (args, env) in cases {
        let (code, stderr) = refused_serve(&args, &env);
        assert_eq!(code, Some(2), "{args:?} {env:?}: {stderr}");
        assert!(
            !leaks(&stderr),
            "{args:?} {env:?}: the secret is on stderr: {stderr}"
        );
        assert!(stderr.contains("token"), "{stderr}");
    }
    let (_, stderr) = refused_serve(&["--token-file", &file], &[]);
    assert!(stderr.contains("line 3"), "{stderr}");
}

#[test]
fn beyond_loopback_reads_need_a_token_and_serve_says_so() {
    let (code, stderr) = refused_serve(&["--listen", "0.0.0.0:0"], &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("reads need a token") && stderr.contains("--public-reads"),
        "{stderr}"
    );
}

/// `GET path` with `Host: host` and `headers`; the status and body.
fn get_as(port: u16, host: &str, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut head = format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not HTTP: {response:?}"));
    (status, response)
}

#[test]
fn serve_takes_role_tokens_from_a_file_and_the_environment_and_protects_reads() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let url = postgres_url();
    let Some(provider) = reachable(
        "PostgreSQL",
        &url,
        runtime.block_on(PostgresLockProvider::connect(&url)),
    ) else {
        return;
    };
    let table = unique_table("serve_access");
    let _drop = test_support::table::drop_postgres_table(&table);
    let provider = provider.with_table(&table).expect("a valid table name");
    runtime.block_on(async {
        provider.ensure_schema().await.expect("create the tables");
        hold_lock(&provider).await;
    });
    let dir = tempfile::tempdir().expect("a temporary directory");
    let file = dir.path().join("tokens");
    std::fs::write(
        &file,
        "# who may look\nvera:viewer=secret-of-vera-0001\n\noncall:operator=secret-of-oncall-01\n",
    )
    .unwrap();
    let port = free_port();
    let mut served = Served(
        Command::new(env!("CARGO_BIN_EXE_lockctl"))
            .args(["serve", "--listen", &format!("0.0.0.0:{port}")])
            .args(["--url", &url, "--table", &table])
            .arg("--token-file")
            .arg(&file)
            .args(["--token", "bob=secret-of-bob-00000002"])
            .args(["--allow-host", "dashboard.example"])
            .env_remove("LOCKCTL_URL")
            .env_remove("LOCKCTL_TABLE")
            .env("LOCKCTL_DASHBOARD_TOKENS", format!("ops={SECRET}"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start lockctl serve"),
    );
    let address = ("127.0.0.1", port);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let (status, body) = loop {
        match get(address, "/api/locks") {
            Ok(reply) => break reply,
            Err(e) if std::time::Instant::now() > deadline => {
                panic!("lockctl serve never answered: {e}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    assert_eq!(status, 401, "a read without a token: {body}");
    let (status, _) = get(address, "/").expect("GET /");
    assert_eq!(status, 303, "a page without a session goes to the login");
    let vera = "Bearer secret-of-vera-0001";
    let read = request(address, "GET", "/api/locks", &[("Authorization", vera)], "").expect("GET");
    assert_eq!(read.status, 200, "{}", read.body);
    let unlock = format!("/api/locks/{LOCK}/unlock?force=true");
    let refused = request(address, "POST", &unlock, &[("Authorization", vera)], "").expect("POST");
    assert_eq!(refused.status, 403, "{}", refused.body);
    let oncall = "Bearer secret-of-oncall-01";
    let refused =
        request(address, "POST", &unlock, &[("Authorization", oncall)], "").expect("POST");
    assert_eq!(
        refused.status, 403,
        "an operator unlocked: {}",
        refused.body
    );
    let (status, body) = get_as(
        port,
        &format!("evil.example:{port}"),
        "/api/locks",
        &[("Authorization", vera)],
    );
    assert_eq!(status, 403, "{body}");
    let (status, body) = get_as(
        port,
        "dashboard.example",
        "/api/locks",
        &[("Authorization", vera)],
    );
    assert_eq!(status, 200, "an allowed name: {body}");
    let bearer = format!("Bearer {SECRET}");
    let released =
        request(address, "POST", &unlock, &[("Authorization", &bearer)], "").expect("POST");
    assert_eq!(released.status, 200, "{}", released.body);

    let _ = served.0.kill();
    let _ = served.0.wait();
    let mut stderr = String::new();
    served
        .0
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    assert!(
        stderr.contains(
            "actions allowed to tokens vera (viewer), oncall (operator), ops (admin), bob (admin)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("reads need a token, as it listens beyond loopback"),
        "{stderr}"
    );
    let warning = stderr
        .lines()
        .find(|line| line.contains("warning: --token shows"))
        .unwrap_or_else(|| panic!("no --token warning: {stderr}"));
    assert!(
        warning.contains("ps")
            && warning.contains("--token-file")
            && warning.contains("LOCKCTL_DASHBOARD_TOKENS"),
        "{warning}"
    );
    for secret in [
        "secret-of-vera",
        "secret-of-oncall",
        "secret-of-bob",
        SECRET,
    ] {
        assert!(!stderr.contains(secret), "{secret} on stderr: {stderr}");
    }
}
