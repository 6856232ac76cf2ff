//! A lazy pool on a database that cannot be reached: the error `start()` returns names the
//! host and port and says whether the database refused the connection, did not answer, or
//! rejected the login, instead of sqlx's bare "pool timed out while waiting for an open
//! connection".

mod common;

use std::net::TcpListener;
use std::time::Duration;

use lock_provider_sqlx::SqlxLockProvider;
use lock_provider_sqlx::sqlx::mysql::MySqlPoolOptions;
use lock_provider_sqlx::sqlx::postgres::PgPoolOptions;
use lock_scheduler::{Job, Scheduler, Trigger};

/// What `start()` says about `provider`, with every cause.
async fn start_error(provider: SqlxLockProvider) -> String {
    let job = Job::new("tick", Trigger::cron("0 0 3 * * *").unwrap(), || async {});
    let error = Scheduler::builder()
        .lock_provider(provider)
        .jobs([job])
        .start()
        .await
        .expect_err("the database cannot be reached");
    test_support::skip::chain(&error)
}

/// `host:port` of a URL (`scheme://user@host:port/...`), `default` when it has no port.
fn host_port(url: &str, default: u16) -> String {
    let after_at = url.rsplit_once('@').map_or(url, |(_, rest)| rest);
    let authority = after_at.split(['/', '?']).next().unwrap();
    match authority.rsplit_once(':') {
        Some(_) => authority.to_owned(),
        None => format!("{authority}:{default}"),
    }
}

/// A lazy PostgreSQL pool on `url` that gives up after a second.
fn lazy_pg(url: &str) -> SqlxLockProvider {
    let pool = PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(1))
        .connect_lazy(url)
        .unwrap();
    SqlxLockProvider::postgres(pool)
}

#[tokio::test]
async fn a_closed_port_is_named_as_refused() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let error = start_error(lazy_pg(&format!("postgres://app@127.0.0.1:{port}/app"))).await;
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
    let error = start_error(lazy_pg(&format!("postgres://app@127.0.0.1:{port}/app"))).await;
    let expected =
        format!("cannot connect to PostgreSQL at 127.0.0.1:{port}: the connection timed out");
    assert!(error.contains(&expected), "{error}");
    drop(listener);
}

#[tokio::test]
async fn a_database_that_does_not_exist_is_named_as_a_rejected_login() {
    // The shared server trusts every user, so the login is refused by its database name.
    let Some(_reachable) = common::pg_pool().await else {
        return;
    };
    let (base, _database) = common::postgres_url()
        .rsplit_once('/')
        .map(|(b, d)| (b.to_owned(), d.to_owned()))
        .unwrap();
    let address = host_port(&base, 5432);
    let error = start_error(lazy_pg(&format!("{base}/no_such_database_i34"))).await;
    let expected =
        format!("cannot connect to PostgreSQL at {address}: the server rejected the login");
    assert!(error.contains(&expected), "{error}");
    assert!(
        error.contains("no_such_database_i34"),
        "the server's own reason: {error}"
    );
}

#[tokio::test]
async fn a_wrong_mysql_password_is_named_as_a_rejected_login() {
    let Some(_reachable) = common::mysql_pool().await else {
        return;
    };
    // `mysql://user[:password]@host:port/db`: the same user with a password it does not have.
    let url = common::mysql_url();
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, at) = rest.split_once('@').unwrap();
    let user = user.split(':').next().unwrap();
    let address = host_port(&url, 3306);
    let pool = MySqlPoolOptions::new()
        .acquire_timeout(Duration::from_secs(1))
        .connect_lazy(&format!("{scheme}://{user}:not-the-password-i34@{at}"))
        .unwrap();
    let error = start_error(SqlxLockProvider::mysql(pool)).await;
    let expected = format!("cannot connect to MySQL at {address}: the server rejected the login");
    assert!(error.contains(&expected), "{error}");
}
