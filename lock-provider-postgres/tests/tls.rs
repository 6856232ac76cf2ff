//! TLS against a real PostgreSQL that accepts TLS only (`scripts/test-servers`: port 5433, its
//! `pg_hba.conf` rejects `hostnossl`, so a connection that works at all is encrypted), with a
//! certificate authority made at run time.

use lock_core::{LockError, LockProvider, testkit};
use lock_provider_postgres::{ConnectionConfig, PostgresLockProvider, SslMode};
use test_support::servers::{ca_pem_path, other_ca_pem_path, postgres_tls_url, with_params};

/// A table of the test-only TLS cluster; the suite's functions use unique lock names.
const TABLE: &str = "lockpg_tls";

/// `Some(url + params)` when the TLS server answers on TCP and its CA exists; otherwise the
/// skip-unless-CI rule.
async fn tls_url(params: &str) -> Option<String> {
    test_support::servers::tls_server_url("postgres", &postgres_tls_url(), params)
}

fn ca() -> String {
    ca_pem_path().display().to_string()
}

/// Whether the provider's own connection is encrypted, as the server sees it.
async fn server_sees_tls(provider: &PostgresLockProvider) -> bool {
    let client = provider.pool().get().await.expect("a pooled connection");
    let row = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("pg_stat_ssl");
    row.get(0)
}

async fn ready(provider: PostgresLockProvider) -> PostgresLockProvider {
    let provider = provider.with_table(TABLE).expect("valid table");
    provider
        .ensure_schema()
        .await
        .expect("ensure_schema over TLS");
    provider
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_encrypts_and_runs_a_lock_cycle() {
    let Some(url) = tls_url("sslmode=require").await else {
        return;
    };
    let provider = ready(PostgresLockProvider::connect(&url).await.expect("connect")).await;
    assert!(server_sees_tls(&provider).await);
    testkit::lock_cycle(&provider).await;
    testkit::exclusion(&provider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_sslrootcert_runs_conformance_functions() {
    let Some(url) = tls_url(&format!("sslmode=verify-full&sslrootcert={}", ca())).await else {
        return;
    };
    let provider = ready(PostgresLockProvider::connect(&url).await.expect("connect")).await;
    assert!(server_sees_tls(&provider).await);
    testkit::lock_cycle(&provider).await;
    testkit::fence_strictly_increasing(&provider).await;
    testkit::once_per_slot(&provider).await;
    testkit::release_only_by_owner(&provider).await;
    testkit::list_and_force_unlock(&provider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_with_pem_from_the_builder_and_no_statement_cache() {
    let Some(url) = tls_url("").await else { return };
    let pem = std::fs::read(ca_pem_path()).expect("CA PEM");
    let config = ConnectionConfig::from_url(&url)
        .expect("URL")
        .ssl_mode(SslMode::VerifyFull)
        .root_certificates_pem(&pem)
        .expect("PEM")
        .statement_cache(false)
        .pool_size(2);
    let provider = ready(
        PostgresLockProvider::connect_with(config)
            .await
            .expect("connect"),
    )
    .await;
    assert!(server_sees_tls(&provider).await);
    testkit::lock_cycle(&provider).await;
    testkit::extend_only_by_owner(&provider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_ca_accepts_another_host_name_and_verify_full_does_not() {
    let Some(url) = tls_url("").await else { return };
    // TCP to the same server, but the name checked against its certificate is another one.
    let renamed = url.replacen("127.0.0.1", "wrong-name.invalid", 1);
    let params = format!("hostaddr=127.0.0.1&sslrootcert={}", ca());
    let ca_only = with_params(&renamed, &format!("{params}&sslmode=verify-ca"));
    let provider = ready(
        PostgresLockProvider::connect(&ca_only)
            .await
            .expect("verify-ca"),
    )
    .await;
    testkit::lock_cycle(&provider).await;

    let full = with_params(&renamed, &format!("{params}&sslmode=verify-full"));
    let err = PostgresLockProvider::connect(&full).await.unwrap_err();
    let text = test_support::skip::chain(&err);
    assert!(matches!(err, LockError::Provider { .. }), "{text}");
    assert!(
        text.contains("not valid for name"),
        "names the name mismatch: {text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_root_certificate_fails_with_a_clear_error() {
    let other = other_ca_pem_path().display().to_string();
    for mode in ["require", "verify-ca", "verify-full"] {
        let Some(url) = tls_url(&format!("sslmode={mode}&sslrootcert={other}")).await else {
            return;
        };
        let err = PostgresLockProvider::connect(&url).await.unwrap_err();
        let text = test_support::skip::chain(&err);
        assert!(
            matches!(&err, LockError::Provider { operation, .. } if *operation == "connect"),
            "{mode}: {text}"
        );
        assert!(
            text.contains("UnknownIssuer"),
            "{mode}: says the issuer is unknown: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_modes_without_a_root_are_refused_before_connecting() {
    // No server needed: refused while building the pool.
    for mode in ["verify-ca", "verify-full"] {
        let url = with_params(&postgres_tls_url(), &format!("sslmode={mode}"));
        let err = PostgresLockProvider::connect(&url).await.unwrap_err();
        assert!(matches!(err, LockError::InvalidConfiguration(_)), "{err}");
        assert!(err.to_string().contains("sslrootcert"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_is_refused_by_the_tls_only_server() {
    for params in ["", "sslmode=disable"] {
        let Some(url) = tls_url(params).await else {
            return;
        };
        let err = PostgresLockProvider::connect(&url).await.unwrap_err();
        let text = test_support::skip::chain(&err);
        assert!(
            text.contains("no encryption"),
            "pg_hba.conf's hostnossl reject: {text}"
        );
    }
    // prefer falls back to plaintext only when the server declines TLS; this one offers it.
    let Some(url) = tls_url("sslmode=prefer").await else {
        return;
    };
    let provider = PostgresLockProvider::connect(&url).await.expect("prefer");
    assert!(server_sees_tls(&provider).await);
}

/// PgBouncer of `scripts/test-servers` has no TLS configured: the server without TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefer_falls_back_to_plaintext_and_require_does_not() {
    let base = test_support::servers::pgbouncer_url();
    let prefer = with_params(&base, "sslmode=prefer&statement_cache=false");
    let connected = PostgresLockProvider::connect(&prefer).await;
    let Some(provider) = test_support::skip::or_unreachable(
        "pgbouncer (scripts/test-servers)",
        &base,
        connected.map_err(|e| test_support::skip::chain(&e)),
    ) else {
        return;
    };
    // The conformance suite's table in the main test database, behind PgBouncer.
    let provider = provider
        .with_table("lockpg_conformance")
        .expect("valid table");
    provider.ensure_schema().await.expect("ensure_schema");
    provider
        .list_locks()
        .await
        .expect("plaintext after the server declined TLS");

    let require = with_params(&base, "sslmode=require");
    let err = PostgresLockProvider::connect(&require).await.unwrap_err();
    let text = test_support::skip::chain(&err);
    assert!(text.contains("server does not support TLS"), "{text}");
}
