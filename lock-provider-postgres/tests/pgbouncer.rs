//! Behind a real PgBouncer in transaction mode (`scripts/test-servers`: port 6432, in front of
//! the test database): every transaction may run on another server connection, so nothing may
//! outlive one. With `statement_cache=false` the provider passes the whole conformance suite
//! there; with cached statements it fails as soon as a transaction lands on a server
//! connection that never saw the statement.

mod common;

use std::time::Duration;

use lock_core::{LockError, LockProvider, testkit};
use lock_provider_postgres::PostgresLockProvider;
use test_support::servers::{pgbouncer_url, with_params};

/// `Some(provider)` on the conformance table through PgBouncer, or the skip-unless-CI rule.
async fn through_pgbouncer(params: &str) -> Option<PostgresLockProvider> {
    let url = with_params(&pgbouncer_url(), params);
    let connected = PostgresLockProvider::connect(&url).await;
    let provider = test_support::skip::or_unreachable(
        "pgbouncer (scripts/test-servers)",
        &url,
        connected.map_err(|e| test_support::skip::chain(&e)),
    )?;
    let provider = provider
        .with_table(common::CONFORMANCE_TABLE)
        .expect("valid table");
    provider
        .ensure_schema()
        .await
        .expect("ensure_schema through pgbouncer");
    Some(provider)
}

async fn uncached() -> Option<PostgresLockProvider> {
    through_pgbouncer("statement_cache=false").await
}

lock_core::conformance_tests!(uncached());

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_cycle_through_pgbouncer() {
    let Some(provider) = uncached().await else {
        return;
    };
    testkit::lock_cycle(&provider).await;
}

/// PgBouncer hands out its most recently used idle server connection. A second client holding
/// a transaction open on that one forces the provider's next transaction onto another server
/// connection: a statement prepared on the first does not exist there. (A cached statement
/// may fail even earlier, on a name another client left on the server connection.) The pool
/// `test_pinning` serves this test alone, so no other test moves its server connections.
async fn across_two_server_connections(provider: &PostgresLockProvider) -> Result<(), LockError> {
    let first = testkit::unique_name("pgbouncer_pin_a");
    let second = testkit::unique_name("pgbouncer_pin_b");
    let request = |name| testkit::request(name, "bouncer", Duration::from_secs(30), None);
    // Prepared (when cached) on server connection X, which goes back idle.
    provider.acquire(&request(&first)).await?;
    // Another client takes X and keeps it.
    let url = pinning_url("");
    let (blocker, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("a second client through pgbouncer");
    let connection = tokio::spawn(connection);
    blocker
        .batch_execute("BEGIN; SELECT 1")
        .await
        .expect("hold a server connection");
    // The same statement again, now on server connection Y.
    let outcome = provider.acquire(&request(&second)).await.map(drop);
    blocker.batch_execute("ROLLBACK").await.expect("rollback");
    drop(blocker);
    let _ = tokio::time::timeout(Duration::from_secs(5), connection).await;
    outcome
}

fn pinning_url(params: &str) -> String {
    with_params(
        &pgbouncer_url().replacen("/test", "/test_pinning", 1),
        params,
    )
}

async fn pinning_provider(params: &str) -> Option<PostgresLockProvider> {
    let url = pinning_url(params);
    let connected = PostgresLockProvider::connect(&url).await;
    let provider = test_support::skip::or_unreachable(
        "pgbouncer (scripts/test-servers)",
        &url,
        connected.map_err(|e| test_support::skip::chain(&e)),
    )?;
    let provider = provider
        .with_table(common::CONFORMANCE_TABLE)
        .expect("valid table");
    provider.ensure_schema().await.expect("ensure_schema");
    Some(provider)
}

/// The server connections PgBouncer may open for `test_pinning`: `default_pool_size` in
/// `scripts/test-servers`.
const PINNING_POOL_SIZE: usize = 4;

/// Deallocates every prepared statement on every server connection of `test_pinning`.
///
/// PgBouncer keeps its server connections across test runs, and with them the statements an
/// earlier run's cached provider prepared: the same names (`s0`, `s1`, .. restart in each
/// process) for the same SQL. A later run whose second transaction landed on such a connection
/// found its statement there and passed where it had to fail. Holding one transaction open per
/// server connection the pool can have makes each client land on a different one.
async fn forget_prepared_statements() {
    let mut clients = Vec::new();
    for _ in 0..PINNING_POOL_SIZE {
        // Unreachable: `pinning_provider` applies the skip-unless-CI rule next.
        let Ok((client, connection)) =
            tokio_postgres::connect(&pinning_url(""), tokio_postgres::NoTls).await
        else {
            return;
        };
        tokio::spawn(connection);
        let held = tokio::time::timeout(
            Duration::from_secs(10),
            client.batch_execute("BEGIN; DEALLOCATE ALL"),
        )
        .await;
        assert!(
            matches!(held, Ok(Ok(()))),
            "hold a server connection of test_pinning: {held:?}"
        );
        clients.push(client);
    }
    for client in clients {
        client.batch_execute("COMMIT").await.expect("commit");
    }
}

/// One test, so that the two halves never share PgBouncer's `test_pinning` pool at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_statements_break_under_transaction_pooling_and_unnamed_ones_do_not() {
    forget_prepared_statements().await;
    let Some(cached) = pinning_provider("").await else {
        return;
    };
    let err = across_two_server_connections(&cached)
        .await
        .expect_err("a cached statement is missing on the other server connection");
    let text = test_support::skip::chain(&err);
    // "does not exist" on the second server connection; "already exists" if the first had a
    // statement of that name from another client: both are the cache meeting transaction
    // pooling.
    assert!(
        text.contains("prepared statement")
            && (text.contains("does not exist") || text.contains("already exists")),
        "the failure the statement cache causes: {text}"
    );
    drop(cached);

    let Some(uncached) = pinning_provider("statement_cache=false").await else {
        return;
    };
    across_two_server_connections(&uncached)
        .await
        .expect("unnamed statements do not care which server connection runs them");
}
