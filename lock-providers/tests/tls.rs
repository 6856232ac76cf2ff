//! `open(url)` (what lockctl runs) connects over TLS and through PgBouncer exactly as the
//! providers' own `connect` does: the real servers of `scripts/test-servers`.

use std::time::Duration;

use lock_providers::{OpenOptions, SchemaAction};
use test_support::servers::{
    ca_pem_path, mysql_tls_url, pgbouncer_url, postgres_tls_url, with_params,
};

/// Opens `url`, creating the table, and lists the locks: `None` (after the skip-unless-CI
/// rule) when the server does not answer on TCP.
async fn open_and_list(kind: &str, base: &str, url: &str, table: &str) -> Option<()> {
    let address = test_support::db::socket_address(base).expect("host:port");
    let reachable = tokio::time::timeout(
        Duration::from_secs(5),
        tokio::net::TcpStream::connect(address),
    )
    .await
    .map_err(|_| "no answer within 5 s".to_owned())
    .and_then(|r| r.map_err(|e| e.to_string()));
    test_support::skip::or_unreachable(kind, base, reachable)?;
    let opened = OpenOptions::new()
        .table(table)
        .schema(SchemaAction::Create)
        .open(url)
        .await
        .unwrap_or_else(|e| panic!("{kind}: open: {}", test_support::skip::chain(&e)));
    opened
        .provider()
        .list_locks()
        .await
        .expect("list over the opened provider");
    opened.close().await;
    Some(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_verify_full_url() {
    let base = postgres_tls_url();
    let url = with_params(
        &base,
        &format!(
            "sslmode=verify-full&sslrootcert={}",
            ca_pem_path().display()
        ),
    );
    open_and_list("postgres (TLS)", &base, &url, "lockpg_tls").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_verify_identity_url() {
    let base = mysql_tls_url();
    let url = with_params(
        &base,
        &format!(
            "ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
            ca_pem_path().display()
        ),
    );
    open_and_list("mariadb (TLS)", &base, &url, "lock_provider_mysql_tls").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_through_pgbouncer_without_cached_statements() {
    let base = pgbouncer_url();
    let url = with_params(&base, "statement_cache=false");
    open_and_list("pgbouncer", &base, &url, "lockpg_conformance").await;
}
