//! The extra servers `scripts/test-servers` starts for the TLS and connection-pooling tests,
//! and the certificates it makes for them. Each URL has a variable to point elsewhere.

use std::path::PathBuf;

/// Where `scripts/test-servers` keeps the servers' data and the certificates
/// (`LOCK_TEST_SERVERS_DIR`, default `/tmp/scheduled-locks-servers`).
///
/// ```
/// assert!(test_support::servers::base_dir().is_absolute());
/// ```
pub fn base_dir() -> PathBuf {
    std::env::var_os("LOCK_TEST_SERVERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/scheduled-locks-servers"))
}

/// The test certificate authority that signed the TLS servers' certificate (PEM), whose
/// certificate names `localhost` and `127.0.0.1`.
///
/// ```
/// assert!(test_support::servers::ca_pem_path().ends_with("tls/ca.pem"));
/// ```
pub fn ca_pem_path() -> PathBuf {
    base_dir().join("tls/ca.pem")
}

/// An authority that signed nothing the servers present: the wrong root.
///
/// ```
/// assert!(test_support::servers::other_ca_pem_path().ends_with("tls/other-ca.pem"));
/// ```
pub fn other_ca_pem_path() -> PathBuf {
    base_dir().join("tls/other-ca.pem")
}

/// PostgreSQL accepting TLS only (`LOCK_TEST_POSTGRES_TLS_URL`, default
/// `postgres://postgres@127.0.0.1:5433/postgres`), without `sslmode`: tests add it.
///
/// ```
/// assert!(test_support::servers::postgres_tls_url().starts_with("postgres://"));
/// ```
pub fn postgres_tls_url() -> String {
    std::env::var("LOCK_TEST_POSTGRES_TLS_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5433/postgres".to_owned())
}

/// MariaDB accepting TLS only (`LOCK_TEST_MYSQL_TLS_URL`, default
/// `mysql://root@127.0.0.1:3307/test`), without TLS parameters: tests add them.
///
/// ```
/// assert!(test_support::servers::mysql_tls_url().starts_with("mysql://"));
/// ```
pub fn mysql_tls_url() -> String {
    std::env::var("LOCK_TEST_MYSQL_TLS_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3307/test".to_owned())
}

/// PgBouncer in transaction mode in front of the main PostgreSQL's `test` database
/// (`LOCK_TEST_PGBOUNCER_URL`, default `postgres://postgres@127.0.0.1:6432/test`).
///
/// ```
/// assert!(test_support::servers::pgbouncer_url().contains(":6432/"));
/// ```
pub fn pgbouncer_url() -> String {
    std::env::var("LOCK_TEST_PGBOUNCER_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:6432/test".to_owned())
}

/// `url` with `?`/`&` and `params` appended.
///
/// ```
/// use test_support::servers::with_params;
/// assert_eq!(with_params("postgres://h/db", "sslmode=require"), "postgres://h/db?sslmode=require");
/// assert_eq!(with_params("postgres://h/db?a=1", "b=2"), "postgres://h/db?a=1&b=2");
/// ```
pub fn with_params(url: &str, params: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}{params}")
}

/// `Some(base + params)` when the TLS server of `base` answers on TCP within 5 s and the test
/// authority's certificate exists (both made by `scripts/test-servers`); otherwise
/// [`skip::or_unreachable`](crate::skip::or_unreachable)'s rule: `None` with a `SKIPPED` line,
/// or a panic under `CI`.
///
/// ```
/// // Port 1 answers nothing: without CI set this is a skip.
/// if std::env::var_os("CI").is_none() {
///     let url = test_support::servers::tls_server_url("nothing", "postgres://h@127.0.0.1:1/db", "sslmode=require");
///     assert_eq!(url, None);
/// }
/// ```
pub fn tls_server_url(what: &str, base: &str, params: &str) -> Option<String> {
    let reachable = crate::db::socket_address(base)
        .ok_or_else(|| format!("no host:port in {base}"))
        .and_then(|address| {
            use std::net::ToSocketAddrs;
            let address = address
                .to_socket_addrs()
                .map_err(|e| e.to_string())?
                .next()
                .ok_or_else(|| format!("{address} resolves to nothing"))?;
            std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(5))
                .map_err(|e| e.to_string())
        })
        .and_then(|_| {
            std::fs::metadata(ca_pem_path())
                .map(drop)
                .map_err(|e| format!("{}: {e}", ca_pem_path().display()))
        });
    crate::skip::or_unreachable(
        &format!("{what} (TLS, scripts/test-servers)"),
        base,
        reachable,
    )?;
    Some(with_params(base, params))
}
