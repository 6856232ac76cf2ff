//! A server that accepts the TCP connection and never answers the startup message is a connect
//! error after the URL's `connect_timeout`, not a hang: tokio-postgres's own `connect_timeout`
//! covers the TCP connect only, so the pool's create timeout bounds the handshake.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use lock_provider_postgres::PostgresLockProvider;

#[tokio::test]
async fn a_server_that_never_answers_the_handshake_is_a_connect_error_in_time() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let url = format!("postgres://app@127.0.0.1:{port}/test?connect_timeout=2");
    let started = Instant::now();
    let connected =
        tokio::time::timeout(Duration::from_secs(30), PostgresLockProvider::connect(&url))
            .await
            .expect("connect hung for 30 s on a server that never answers");
    let took = started.elapsed();
    let error = connected.expect_err("no server answered: an error");
    // 2 s, and what a loaded machine adds.
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(10),
        "{took:?}"
    );
    let text = test_support::skip::chain(&error);
    assert!(text.to_lowercase().contains("timeout"), "{text}");
}
