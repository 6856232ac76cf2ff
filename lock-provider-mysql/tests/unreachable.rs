//! A database that cannot be reached: the error names the host and port and says whether the
//! database refused the connection or rejected the login, and what to check.

mod common;

use std::net::TcpListener;

use lock_provider_mysql::MySqlLockProvider;

/// What connecting to `url` says, with every cause.
async fn connect_error(url: &str) -> String {
    match MySqlLockProvider::connect(url).await {
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
    let error = connect_error(&format!("mysql://root@127.0.0.1:{port}/test")).await;
    let expected =
        format!("cannot connect to MySQL at 127.0.0.1:{port}: the connection was refused");
    assert!(error.contains(&expected), "{error}");
}

#[tokio::test]
async fn a_wrong_password_is_named_as_a_rejected_login() {
    let url = common::url();
    if test_support::skip::or_unreachable("mysql", &url, MySqlLockProvider::connect(&url).await)
        .is_none()
    {
        return;
    }
    // `mysql://user[:password]@host:port/db`: the same user with a password it does not have.
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, at) = rest.split_once('@').unwrap();
    let user = user.split(':').next().unwrap();
    let authority = at.split(['/', '?']).next().unwrap();
    let address = match authority.contains(':') {
        true => authority.to_owned(),
        false => format!("{authority}:3306"),
    };
    let error = connect_error(&format!("{scheme}://{user}:not-the-password-i34@{at}")).await;
    let expected = format!("cannot connect to MySQL at {address}: the server rejected the login");
    assert!(error.contains(&expected), "{error}");
}
