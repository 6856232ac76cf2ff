//! A dashboard served on a free port of this process against a lock table of the test's own
//! in the real PostgreSQL, with a cluster's rows written through the provider itself.

#![allow(dead_code)] // Each test file uses its own part of this module.

use lock_cluster::ClusterProvider;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use lock_cluster::{Heartbeat, InstanceInfo, JobRegistration, RunEnd, RunStart, RunState};
use lock_core::{AcquireOutcome, FireKind, testkit};
use lock_provider_postgres::PostgresLockProvider;
use test_support::http::Reply;
use test_support::table::Cleanup;

/// The job whose name is a script: it must render as text everywhere.
pub const EVIL_JOB: &str = "<script>alert(1)</script>";
/// The instance every seeded row comes from.
pub const INSTANCE: &str = "host-a:4242:cafe";
/// The tokens of the dashboards that allow actions.
pub const ALICE_SECRET: &str = "alice-secret-0123456789";

/// A served dashboard and what it reads.
pub struct Served {
    pub address: SocketAddr,
    pub provider: Arc<PostgresLockProvider>,
    pub table: String,
    _cleanup: Cleanup,
}

/// A provider on a new table, its schema created; `None` after the skip-unless-CI rule.
pub async fn provider() -> Option<(Arc<PostgresLockProvider>, String, Cleanup)> {
    let url = test_support::db::postgres_url();
    let connected = PostgresLockProvider::connect(&url).await;
    let provider = test_support::skip::or_unreachable("postgres", &url, connected)?;
    let table = test_support::table::unique_table("dashboard");
    let cleanup = test_support::table::drop_postgres_table(&table);
    let provider = provider.with_table(&table).expect("table name");
    provider.ensure_schema().await.expect("ensure_schema");
    Some((Arc::new(provider), table, cleanup))
}

/// Serves `app` on a free loopback port of this runtime, with each connection's client
/// address (as `lockctl serve` does: the login limit is per address).
pub async fn serve_app(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a free port");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .expect("serve")
    });
    address
}

/// A dashboard built by `build` from a seeded cluster, served; `None` after the skip rule.
pub async fn serve(
    build: impl FnOnce(Arc<PostgresLockProvider>) -> axum::Router,
) -> Option<Served> {
    let (provider, table, cleanup) = provider().await?;
    seed(provider.as_ref()).await;
    let address = serve_app(build(Arc::clone(&provider))).await;
    Some(Served {
        address,
        provider,
        table,
        _cleanup: cleanup,
    })
}

/// One instance registering three jobs (`report`, `billing`, [`EVIL_JOB`]); `report` ran
/// fine twice, `billing` failed with an error that is HTML, the evil job succeeded; `report`'s
/// lock is held.
pub async fn seed(provider: &dyn ClusterProvider) {
    let store = provider.cluster().expect("operations tables");
    let now = provider.database_time().await.expect("database time");
    let job = |name: &str, lock: &str| JobRegistration {
        name: name.to_owned(),
        lock_name: lock.to_owned(),
        trigger: "fixed rate 1h".to_owned(),
        zone: None,
        next_fire: Some(now + TimeDelta::hours(1)),
        following_fire: Some(now + TimeDelta::hours(2)),
    };
    store
        .heartbeat(&Heartbeat {
            instance: InstanceInfo {
                instance_id: INSTANCE.to_owned(),
                host: "host-a".to_owned(),
                pid: 4242,
                version: "0.1.0".to_owned(),
                started_at: now,
                clock_offset_ms: 12,
                // Alive for the whole test (gone after five intervals without a heartbeat).
                heartbeat_ms: 600_000,
            },
            jobs: vec![
                job("report", "report"),
                job("billing", "billing"),
                job(EVIL_JOB, "evil"),
            ],
        })
        .await
        .expect("heartbeat");
    for (name, outcome, error) in [
        ("report", RunState::Succeeded, None),
        ("report", RunState::Succeeded, None),
        ("billing", RunState::Failed, Some("<b>boom</b> & more")),
        (EVIL_JOB, RunState::Succeeded, None),
    ] {
        let id = store
            .run_started(&RunStart {
                job: name.to_owned(),
                slot: Some(now - TimeDelta::seconds(1)),
                fire_kind: FireKind::Scheduled,
                instance_id: INSTANCE.to_owned(),
                fence: 1,
                attempt: 1,
                params: Default::default(),
            })
            .await
            .expect("run start");
        store
            .run_ended(&RunEnd::new(id, outcome, error))
            .await
            .expect("run end");
    }
    let request = testkit::request(&"report".into(), INSTANCE, Duration::from_secs(600), None);
    let AcquireOutcome::Acquired(_) = provider.acquire(&request).await.expect("acquire") else {
        panic!("a fresh table refused the lock");
    };
}

/// A second instance (`host-b:1:dots`) registering jobs `names` (each under a lock of its own).
pub async fn register_jobs(provider: &dyn ClusterProvider, names: &[&str]) {
    let store = provider.cluster().expect("operations tables");
    let now = provider.database_time().await.expect("database time");
    let jobs = names
        .iter()
        .enumerate()
        .map(|(at, name)| JobRegistration {
            name: (*name).to_owned(),
            lock_name: format!("job-lock-{at}"),
            trigger: "fixed rate 1h".to_owned(),
            zone: None,
            next_fire: Some(now + TimeDelta::hours(1)),
            following_fire: None,
        })
        .collect();
    store
        .heartbeat(&Heartbeat {
            instance: InstanceInfo {
                instance_id: "host-b:1:dots".to_owned(),
                host: "host-b".to_owned(),
                pid: 1,
                version: "0.1.0".to_owned(),
                started_at: now,
                clock_offset_ms: 0,
                heartbeat_ms: 600_000,
            },
            jobs,
        })
        .await
        .expect("heartbeat");
}

/// `method path` with `headers` and `body`, off the runtime's threads.
pub async fn call(
    address: SocketAddr,
    method: &'static str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let (shown, path, body) = (path.to_owned(), path.to_owned(), body.to_owned());
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        test_support::http::request(address, method, &path, &headers, &body)
    })
    .await
    .expect("request thread")
    .unwrap_or_else(|e| panic!("{method} {shown}: {e}"))
}

/// `method path` sent with `Host: host` (and no other `Host`), as a browser sends a request
/// for a name that resolves to the dashboard.
pub async fn call_as(
    address: SocketAddr,
    host: &str,
    method: &'static str,
    path: &str,
    headers: &[(&str, &str)],
) -> Reply {
    use std::io::{Read, Write};
    let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {host}\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let shown = format!("{method} {path} for {host}");
    let response = tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(address)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        stream.write_all(head.as_bytes())?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok::<_, std::io::Error>(response)
    })
    .await
    .expect("request thread")
    .unwrap_or_else(|e| panic!("{shown}: {e}"));
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{shown}: not an HTTP response: {response:?}"));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{shown}: no status in {head:?}"));
    Reply {
        status,
        headers: lines
            .filter_map(|line| line.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect(),
        body: body.to_owned(),
    }
}

/// The body of a JSON reply, asserting it is `{"error": "..."}`; the error text.
pub fn json_error(reply: &Reply, what: &str) -> String {
    assert!(
        reply
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json")),
        "{what}: not JSON: {:?} {}",
        reply.headers,
        reply.body
    );
    let value: serde_json::Value =
        serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{what}: {e}: {}", reply.body));
    value["error"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: no error field: {}", reply.body))
        .to_owned()
}

/// `GET path`, asserting 200.
pub async fn page(address: SocketAddr, path: &str, headers: &[(&str, &str)]) -> String {
    let reply = call(address, "GET", path, headers, "").await;
    assert_eq!(reply.status, 200, "GET {path}: {}", reply.body);
    reply.body
}

/// `GET path` as JSON, asserting 200.
pub async fn json(address: SocketAddr, path: &str) -> serde_json::Value {
    let body = page(address, path, &[]).await;
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
}

/// The value of `name="csrf" value="..."` in a page.
pub fn csrf(page: &str) -> String {
    let at = page
        .find(r#"name="csrf" value=""#)
        .expect("a form with a CSRF token")
        + 19;
    page[at..].split('"').next().expect("a value").to_owned()
}

/// Logs in with `secret` and returns the `Cookie` header value of the session.
pub async fn login(address: SocketAddr, prefix: &str, secret: &str) -> String {
    let reply = call(
        address,
        "POST",
        &format!("{prefix}/login"),
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &format!("token={secret}"),
    )
    .await;
    assert_eq!(reply.status, 303, "login: {}", reply.body);
    let cookie = reply.header("set-cookie").expect("a session cookie");
    cookie.split(';').next().expect("name=value").to_owned()
}
