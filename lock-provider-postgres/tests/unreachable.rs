//! A database that cannot be reached: the error names the host and port and says whether the
//! database refused the connection, did not answer, or rejected the login, and what to check.

mod common;

use std::net::TcpListener;

use lock_provider_postgres::PostgresLockProvider;

/// What connecting to `url` says, with every cause.
async fn connect_error(url: &str) -> String {
    match PostgresLockProvider::connect(url).await {
        Ok(_) => panic!("the database at {url} cannot be reached, yet it connected"),
        Err(error) => test_support::skip::chain(&error),
    }
}

#[tokio::test]
async fn a_closed_port_is_named_as_refused() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let error = connect_error(&format!("postgres://app@127.0.0.1:{port}/app")).await;
    let expected =
        format!("cannot connect to PostgreSQL at 127.0.0.1:{port}: the connection was refused");
    assert!(error.contains(&expected), "{error}");
    assert!(
        error.contains("check that the database is running"),
        "{error}"
    );
}

#[tokio::test]
async fn a_listener_that_never_answers_is_named_as_timed_out() {
    // Accepted by the kernel into the backlog, never read: the startup message gets no answer.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let url = format!("postgres://app@127.0.0.1:{port}/app?connect_timeout=1");
    let error = connect_error(&url).await;
    let expected =
        format!("cannot connect to PostgreSQL at 127.0.0.1:{port}: the connection timed out");
    assert!(error.contains(&expected), "{error}");
    drop(listener);
}

#[tokio::test]
async fn a_database_that_does_not_exist_is_named_as_a_rejected_login() {
    // The shared server trusts every user, so the login is refused by its database name.
    let url = common::url();
    if test_support::skip::or_unreachable(
        "postgres",
        &url,
        PostgresLockProvider::connect(&url).await,
    )
    .is_none()
    {
        return;
    }
    let (base, _database) = url.rsplit_once('/').unwrap();
    let after_at = base.rsplit_once('@').map_or(base, |(_, rest)| rest);
    let address = match after_at.contains(':') {
        true => after_at.to_owned(),
        false => format!("{after_at}:5432"),
    };
    let error = connect_error(&format!("{base}/no_such_database_i34")).await;
    let expected =
        format!("cannot connect to PostgreSQL at {address}: the server rejected the login");
    assert!(error.contains(&expected), "{error}");
    assert!(
        error.contains("no_such_database_i34"),
        "the server's own reason: {error}"
    );
}
