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
