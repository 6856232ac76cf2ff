//! The dashboard's bounds: a lock database that stops answering costs a 503 with the JSON
//! error shape within the request timeout, requests beyond the concurrency limit are shed
//! with a 503 at once, and a body larger than the dashboard's forms need is refused.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use lock_core::InMemoryLockProvider;
use lock_dashboard::Dashboard;
use lock_provider_postgres::PostgresLockProvider;
use test_support::private_postgres::PrivatePostgres;

/// What a loaded machine may add to a timeout before the answer is read.
const MARGIN: Duration = Duration::from_secs(8);

async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a free port");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    address
}

/// An answer: status, the whole response (head and body), how long it took.
struct Answer {
    status: u16,
    response: String,
    took: Duration,
}

/// `method path` over HTTP/1.0 with `body`, waiting at most `limit`; in a blocking thread.
async fn call(
    address: SocketAddr,
    method: &'static str,
    path: &'static str,
    body: String,
) -> Answer {
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut stream = TcpStream::connect(address).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(40)))
            .expect("read timeout");
        let head = format!(
            "{method} {path} HTTP/1.0\r\nHost: {address}\r\nContent-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).expect("send the head");
        // The server may answer (and close) before the whole body is read.
        let _ = stream.write_all(body.as_bytes());
        let mut response = Vec::new();
        let _ = stream.read_to_end(&mut response);
        let response = String::from_utf8_lossy(&response).into_owned();
        let status = response
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("{method} {path}: not an HTTP answer: {response:?}"));
        Answer {
            status,
            response,
            took: started.elapsed(),
        }
    })
    .await
    .expect("the request's thread")
}

/// The `error` of a JSON failure answer.
fn error_text(answer: &Answer) -> String {
    let body = answer
        .response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body)
        .unwrap_or_default();
    let json: serde_json::Value = serde_json::from_str(body)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", answer.response));
    json["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error field: {}", answer.response))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_database_is_a_503_within_the_request_timeout_and_a_flood_is_shed() {
    let Some(mut pg) = PrivatePostgres::start() else {
        return;
    };
    let provider = PostgresLockProvider::connect(&pg.url())
        .await
        .expect("connect to the private PostgreSQL");
    provider.ensure_schema().await.expect("create the tables");
    let provider = std::sync::Arc::new(provider);
    // The default request timeout (10 s), and a dashboard that serves one request at a time.
    let default = serve(Dashboard::new(provider.clone()).router()).await;
    let single = serve(
        Dashboard::new(provider.clone())
            .request_timeout(Duration::from_secs(3))
            .max_concurrent_requests(1)
            .router(),
    )
    .await;
    let before = call(default, "GET", "/api/locks", String::new()).await;
    assert_eq!(before.status, 200, "{}", before.response);

    pg.freeze();
    // First, so that it waits on the pool's open connection: the other requests wait for a
    // new one, whose pool create timeout (also 10 s) must not race this request's timeout.
    let timed_out = tokio::spawn(call(default, "GET", "/api/locks", String::new()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let occupying = tokio::spawn(call(single, "GET", "/api/locks", String::new()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let shed = call(single, "GET", "/api/locks", String::new()).await;
    assert_eq!(shed.status, 503, "{}", shed.response);
    assert!(
        error_text(&shed).contains("too many requests"),
        "{}",
        shed.response
    );
    assert!(
        shed.took < Duration::from_secs(2),
        "shed after {:?}",
        shed.took
    );

    let occupying = occupying.await.expect("the occupying request");
    assert_eq!(occupying.status, 503, "{}", occupying.response);
    assert!(
        occupying.took >= Duration::from_secs(3),
        "{:?}",
        occupying.took
    );
    assert!(
        occupying.took < Duration::from_secs(3) + MARGIN,
        "{:?}",
        occupying.took
    );

    let timed_out = timed_out
        .await
        .expect("the request on the default dashboard");
    assert_eq!(
        timed_out.status, 503,
        "after {:?}: {}",
        timed_out.took, timed_out.response
    );
    assert!(
        timed_out.response.contains("application/json"),
        "{}",
        timed_out.response
    );
    assert!(
        error_text(&timed_out).contains("request timeout"),
        "{}",
        timed_out.response
    );
    assert!(
        timed_out.took >= Duration::from_secs(10)
            && timed_out.took < Duration::from_secs(10) + MARGIN,
        "answered after {:?}",
        timed_out.took
    );
    pg.thaw();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_larger_than_the_forms_need_is_refused() {
    let address = serve(Dashboard::new(InMemoryLockProvider::new()).router()).await;
    let large = format!("token={}", "x".repeat(100 * 1024));
    let refused = call(address, "POST", "/login", large).await;
    assert_eq!(refused.status, 413, "{}", refused.response);
    // A form of the usual size is read (and its wrong token refused).
    let small = call(address, "POST", "/login", "token=wrong".to_owned()).await;
    assert_ne!(small.status, 413, "{}", small.response);
}
