//! How [`PostgresLockProvider::connect`](crate::PostgresLockProvider::connect) reaches the
//! server: the driver's settings from the URL, plus what the driver does not parse itself, TLS
//! as libpq defines it (`sslmode`, `sslrootcert`) and whether statements are cached
//! (`statement_cache`).

use std::fmt;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use lock_core::LockError;
use lock_sql::{ConnectError, ConnectFailure};

use crate::ssl_mode::SslMode;

/// Everything [`PostgresLockProvider::connect_with`](crate::PostgresLockProvider::connect_with)
/// needs: the driver's [`Config`](tokio_postgres::Config), TLS, the statement cache and the
/// pool size. Made from a URL by [`from_url`](Self::from_url), then adjusted by the builder
/// methods.
///
/// Besides the driver's own parameters, the URL may carry:
/// - `sslmode=disable|prefer|require|verify-ca|verify-full` (see [`SslMode`]);
/// - `sslrootcert=/path/to/ca.pem`: root certificates (PEM) to check the server against;
/// - `statement_cache=false`: no prepared statements kept on the connection, for PgBouncer in
///   transaction mode (see [`statement_cache`](Self::statement_cache)).
///
/// ```
/// use lock_provider_postgres::{ConnectionConfig, SslMode};
///
/// let config = ConnectionConfig::from_url(
///     "postgres://app@pgbouncer.internal:6432/app?statement_cache=false&application_name=jobs",
/// )?
/// .pool_size(8);
/// assert!(!config.get_statement_cache());
/// assert_eq!(config.get_ssl_mode(), SslMode::Disable);
/// assert_eq!(config.driver_config().get_application_name(), Some("jobs"));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone)]
pub struct ConnectionConfig {
    driver: tokio_postgres::Config,
    ssl_mode: SslMode,
    /// DER, from `sslrootcert` and [`root_certificates_pem`](Self::root_certificates_pem).
    root_certificates: Vec<Vec<u8>>,
    statement_cache: bool,
    pool_size: Option<usize>,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        let mut driver = tokio_postgres::Config::new();
        driver.ssl_mode(tokio_postgres::config::SslMode::Disable);
        ConnectionConfig {
            driver,
            ssl_mode: SslMode::Disable,
            root_certificates: Vec::new(),
            statement_cache: true,
            pool_size: None,
        }
    }
}

impl fmt::Debug for ConnectionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The driver's Debug redacts the password.
        f.debug_struct("ConnectionConfig")
            .field("driver", &self.driver)
            .field("ssl_mode", &self.ssl_mode)
            .field("root_certificates", &self.root_certificates.len())
            .field("statement_cache", &self.statement_cache)
            .field("pool_size", &self.pool_size)
            .finish()
    }
}

impl ConnectionConfig {
    /// Reads a URL (`postgres://user:password@host:port/database?...`) or a libpq key-value
    /// string (`host=... dbname=... sslmode=...`). `sslrootcert` is read here, so a missing or
    /// malformed file is an error now rather than at the first connection. A connect timeout
    /// of 10 s applies unless the URL sets `connect_timeout` (seconds); it bounds each new
    /// connection whole, TCP, TLS and the startup handshake included, per host of the URL.
    ///
    /// ```
    /// use lock_provider_postgres::ConnectionConfig;
    ///
    /// assert!(ConnectionConfig::from_url("postgres://app@db/app?sslmode=verify-full").is_ok());
    /// let err = ConnectionConfig::from_url("postgres://app@db/app?sslmode=strict").unwrap_err();
    /// assert!(err.to_string().contains("sslmode=\"strict\""), "{err}");
    /// ```
    pub fn from_url(url: &str) -> Result<Self, LockError> {
        let (driver_url, ours) = split_options(url)?;
        let mut driver: tokio_postgres::Config = driver_url.parse().map_err(|e| {
            // The driver's message never repeats the URL, so no password ends up in logs.
            invalid(format!("PostgreSQL connection URL: {e}"))
        })?;
        if driver.get_connect_timeout().is_none() {
            driver.connect_timeout(Duration::from_secs(10));
        }
        let mut config = ConnectionConfig {
            driver,
            ..ConnectionConfig::default()
        };
        if let Some(mode) = ours.sslmode {
            config = config.ssl_mode(mode.parse()?);
        } else {
            config = config.ssl_mode(SslMode::Disable);
        }
        if let Some(path) = ours.sslrootcert {
            if path == "system" {
                return Err(invalid(
                    "sslrootcert=system is not supported: give the path of a PEM file with the \
                     root certificates",
                ));
            }
            let pem = std::fs::read(&path).map_err(|e| {
                invalid(format!(
                    "sslrootcert={path}: cannot read the root certificates: {e}"
                ))
            })?;
            config = config
                .root_certificates_pem(&pem)
                .map_err(|e| invalid(format!("sslrootcert={path}: {e}")))?;
        }
        if let Some(cache) = ours.statement_cache {
            config = config.statement_cache(match cache.as_str() {
                "true" => true,
                "false" => false,
                other => {
                    return Err(invalid(format!(
                        "statement_cache={other:?} is not true or false"
                    )));
                }
            });
        }
        Ok(config)
    }

    /// Sets the TLS mode (the URL's `sslmode`).
    ///
    /// ```
    /// use lock_provider_postgres::{ConnectionConfig, SslMode};
    /// let config = ConnectionConfig::from_url("postgres://app@db/app")?.ssl_mode(SslMode::Require);
    /// assert_eq!(config.get_ssl_mode(), SslMode::Require);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn ssl_mode(mut self, mode: SslMode) -> Self {
        use tokio_postgres::config::SslMode as Driver;
        self.ssl_mode = mode;
        self.driver.ssl_mode(match mode {
            SslMode::Disable => Driver::Disable,
            SslMode::Prefer => Driver::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Driver::Require,
        });
        self
    }

    /// The TLS mode.
    ///
    /// ```
    /// use lock_provider_postgres::{ConnectionConfig, SslMode};
    /// assert_eq!(ConnectionConfig::default().get_ssl_mode(), SslMode::Disable);
    /// ```
    pub fn get_ssl_mode(&self) -> SslMode {
        self.ssl_mode
    }

    /// Adds the root certificates in `pem` (one or more `CERTIFICATE` blocks) to those the
    /// server's certificate is checked against, as the URL's `sslrootcert` does. Only these
    /// are trusted: no system or built-in roots.
    ///
    /// ```
    /// use lock_provider_postgres::ConnectionConfig;
    ///
    /// let err = ConnectionConfig::default().root_certificates_pem(b"not a certificate").unwrap_err();
    /// assert!(err.to_string().contains("no PEM certificate"), "{err}");
    /// ```
    pub fn root_certificates_pem(mut self, pem: &[u8]) -> Result<Self, LockError> {
        let certificates = pem_certificates(pem)?;
        self.root_certificates.extend(certificates);
        Ok(self)
    }

    /// Whether statements are prepared once per connection and kept (default `true`, one round
    /// trip per operation either way). `false` (the URL's `statement_cache=false`) sends each
    /// statement unnamed with its parameter types, so nothing outlives the transaction: needed
    /// behind PgBouncer in transaction mode (before 1.21, or with `max_prepared_statements =
    /// 0`), where the next transaction may run on another server connection that never saw the
    /// prepared statement. It costs the server a parse and plan per statement.
    ///
    /// ```
    /// use lock_provider_postgres::ConnectionConfig;
    /// let config = ConnectionConfig::default().statement_cache(false);
    /// assert!(!config.get_statement_cache());
    /// ```
    pub fn statement_cache(mut self, cache: bool) -> Self {
        self.statement_cache = cache;
        self
    }

    /// Whether statements are prepared once per connection and kept.
    ///
    /// ```
    /// assert!(lock_provider_postgres::ConnectionConfig::default().get_statement_cache());
    /// ```
    pub fn get_statement_cache(&self) -> bool {
        self.statement_cache
    }

    /// The most connections the pool opens (default: deadpool's, four per CPU). Each lease
    /// held with keep-alive needs a connection for every extend while its body runs, and each
    /// fire one for its acquire and release: size the pool for the jobs that run at once.
    ///
    /// ```
    /// let config = lock_provider_postgres::ConnectionConfig::default().pool_size(4);
    /// assert_eq!(config.get_pool_size(), Some(4));
    /// ```
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = Some(size);
        self
    }

    /// The pool size set by [`pool_size`](Self::pool_size), if any.
    ///
    /// ```
    /// assert_eq!(lock_provider_postgres::ConnectionConfig::default().get_pool_size(), None);
    /// ```
    pub fn get_pool_size(&self) -> Option<usize> {
        self.pool_size
    }

    /// The driver's settings: hosts, database, user, timeouts.
    ///
    /// ```
    /// let config = lock_provider_postgres::ConnectionConfig::from_url("postgres://app@db/jobs")?;
    /// assert_eq!(config.driver_config().get_dbname(), Some("jobs"));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn driver_config(&self) -> &tokio_postgres::Config {
        &self.driver
    }

    /// The driver's settings, to change what the URL cannot say.
    ///
    /// ```
    /// let mut config = lock_provider_postgres::ConnectionConfig::default();
    /// config.driver_config_mut().host("db.internal").user("app").dbname("app");
    /// ```
    pub fn driver_config_mut(&mut self) -> &mut tokio_postgres::Config {
        &mut self.driver
    }

    /// A pool that connects as configured (lazily: nothing is sent yet). Refused when a
    /// verifying mode has no root certificates, or when TLS is asked for and the crate was
    /// built without its `tls` feature.
    ///
    /// ```
    /// use lock_provider_postgres::{ConnectionConfig, SslMode};
    ///
    /// let config = ConnectionConfig::from_url("postgres://app@db/app?sslmode=verify-full")?;
    /// let err = config.build_pool().unwrap_err();
    /// assert!(err.to_string().contains("sslrootcert"), "{err}");
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn build_pool(&self) -> Result<Pool, LockError> {
        if self.ssl_mode.verifies() && self.root_certificates.is_empty() {
            return Err(invalid(format!(
                "sslmode={} checks the server's certificate, but no root certificate was \
                 given: add sslrootcert=/path/to/ca.pem to the URL or call \
                 ConnectionConfig::root_certificates_pem",
                self.ssl_mode
            )));
        }
        let manager_config = ManagerConfig {
            // A dead connection is dropped at checkout by `is_closed`; a stale one that is not
            // yet known dead is handled by the provider's retry, so no probe query per checkout
            // (which would double the round trips of every fire).
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = if self.ssl_mode == SslMode::Disable {
            Manager::from_config(self.driver.clone(), tokio_postgres::NoTls, manager_config)
        } else {
            Manager::from_config(self.driver.clone(), self.tls()?, manager_config)
        };
        // The driver's `connect_timeout` covers the TCP connect only: a server that accepts
        // and never answers the startup message would hold a new connection for the system's
        // TCP timeout (minutes). The pool's create timeout bounds the whole of it, one
        // `connect_timeout` for each host the driver may try in turn.
        let hosts = self.driver.get_hosts().len().max(1) as u32;
        let create_timeout = self.driver.get_connect_timeout().map(|t| *t * hosts);
        let mut builder = Pool::builder(manager)
            .runtime(Runtime::Tokio1)
            .create_timeout(create_timeout);
        if let Some(size) = self.pool_size {
            builder = builder.max_size(size);
        }
        builder
            .build()
            .map_err(|e| LockError::provider("connect", "", "postgres", e))
    }

    #[cfg(feature = "tls")]
    fn tls(&self) -> Result<tokio_postgres_rustls::MakeRustlsConnect, LockError> {
        crate::tls::connector(self.ssl_mode, &self.root_certificates)
    }

    #[cfg(not(feature = "tls"))]
    fn tls(&self) -> Result<tokio_postgres::NoTls, LockError> {
        Err(invalid(format!(
            "sslmode={} needs TLS, and lock-provider-postgres was built without its `tls` \
             feature",
            self.ssl_mode
        )))
    }
}

impl ConnectionConfig {
    /// `host:port` of each host the driver tries, joined by `, `, for connect errors.
    pub(crate) fn endpoint(&self) -> String {
        let ports = self.driver.get_ports();
        let port = |i: usize| ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        let hosts = self.driver.get_hosts();
        if hosts.is_empty() {
            return format!("localhost:{}", port(0));
        }
        hosts
            .iter()
            .enumerate()
            .map(|(i, host)| match host {
                tokio_postgres::config::Host::Tcp(name) => format!("{name}:{}", port(i)),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `error` as a [`ConnectError`] naming `endpoint` when it is a failure to connect (refused,
/// timed out, login rejected); any other error is given back. `endpoint` is `None` for a pool
/// built by the caller, whose host the provider cannot read.
pub(crate) fn unreachable(
    endpoint: Option<&str>,
    error: deadpool_postgres::PoolError,
) -> Result<ConnectError, deadpool_postgres::PoolError> {
    use deadpool_postgres::PoolError;
    let failure = match &error {
        PoolError::Timeout(_) => ConnectFailure::TimedOut,
        PoolError::Backend(e) => {
            // invalid_authorization_specification and invalid_password (class 28),
            // invalid_catalog_name: the database does not exist.
            let login = e.as_db_error().is_some_and(|db| {
                let code = db.code().code();
                code.starts_with("28") || code == "3D000"
            });
            match login {
                true => ConnectFailure::LoginRejected,
                false => match ConnectFailure::in_chain(e) {
                    Some(failure) => failure,
                    None => return Err(error),
                },
            }
        }
        _ => return Err(error),
    };
    let endpoint = endpoint.unwrap_or("the server of the pool given to the provider");
    Ok(ConnectError::new("PostgreSQL", endpoint, failure, error))
}

fn invalid(message: impl Into<String>) -> LockError {
    LockError::InvalidConfiguration(message.into())
}

/// The DER of every `CERTIFICATE` block in `pem`.
#[cfg(feature = "tls")]
fn pem_certificates(pem: &[u8]) -> Result<Vec<Vec<u8>>, LockError> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;

    let certificates = CertificateDer::pem_slice_iter(pem)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("root certificates: {e}")))?;
    if certificates.is_empty() {
        return Err(invalid(
            "root certificates: no PEM certificate (-----BEGIN CERTIFICATE-----) found",
        ));
    }
    Ok(certificates)
}

#[cfg(not(feature = "tls"))]
fn pem_certificates(_pem: &[u8]) -> Result<Vec<Vec<u8>>, LockError> {
    Err(invalid(
        "root certificates need TLS, and lock-provider-postgres was built without its `tls` \
         feature",
    ))
}

/// The parameters the driver does not know, taken out of the URL.
#[derive(Debug, Default, PartialEq, Eq)]
struct Options {
    sslmode: Option<String>,
    sslrootcert: Option<String>,
    statement_cache: Option<String>,
}

impl Options {
    /// Takes `key = value` if it is one of ours; `false` leaves it to the driver.
    fn take(&mut self, key: &str, value: String) -> bool {
        let slot = match key {
            "sslmode" => &mut self.sslmode,
            "sslrootcert" => &mut self.sslrootcert,
            "statement_cache" => &mut self.statement_cache,
            _ => return false,
        };
        *slot = Some(value);
        true
    }
}

/// Splits `url` into what the driver parses and [`Options`]. URLs have their query parameters
/// percent-decoded; key-value strings are split on whitespace (quoted values are left to the
/// driver, which rejects our keys).
fn split_options(url: &str) -> Result<(String, Options), LockError> {
    let mut options = Options::default();
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return Ok((url.to_owned(), options));
        };
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let decoded = percent_decode(value).ok_or_else(|| {
                invalid(format!("PostgreSQL connection URL: {key}: bad %-escape"))
            })?;
            if !options.take(key, decoded) {
                kept.push(pair);
            }
        }
        let driver = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        Ok((driver, options))
    } else {
        let mut kept = Vec::new();
        for token in url.split_whitespace() {
            match token.split_once('=') {
                Some((key, value)) if !value.starts_with('\'') => {
                    if !options.take(key, value.to_owned()) {
                        kept.push(token);
                    }
                }
                _ => kept.push(token),
            }
        }
        Ok((kept.join(" "), options))
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_parameters_are_taken_out_of_a_url() {
        let (driver, options) = split_options(
            "postgres://u@h/db?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2Fca.pem&statement_cache=false",
        )
        .unwrap();
        assert_eq!(driver, "postgres://u@h/db?application_name=x");
        assert_eq!(options.sslmode.as_deref(), Some("verify-full"));
        assert_eq!(options.sslrootcert.as_deref(), Some("/tmp/ca.pem"));
        assert_eq!(options.statement_cache.as_deref(), Some("false"));
        let (driver, _) = split_options("postgresql://u@h/db?sslmode=require").unwrap();
        assert_eq!(driver, "postgresql://u@h/db");
    }

    #[test]
    fn our_parameters_are_taken_out_of_a_key_value_string() {
        let (driver, options) =
            split_options("host=h user=u sslmode=verify-ca sslrootcert=/ca.pem dbname=db").unwrap();
        assert_eq!(driver, "host=h user=u dbname=db");
        assert_eq!(options.sslmode.as_deref(), Some("verify-ca"));
        assert_eq!(options.sslrootcert.as_deref(), Some("/ca.pem"));
    }

    #[test]
    fn every_mode_and_bad_values() {
        for mode in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
            assert_eq!(mode.parse::<SslMode>().unwrap().as_str(), mode);
        }
        let allow = "allow".parse::<SslMode>().unwrap_err().to_string();
        assert!(allow.contains("not supported"), "{allow}");
        let cache = ConnectionConfig::from_url("postgres://u@h/db?statement_cache=no")
            .unwrap_err()
            .to_string();
        assert!(cache.contains("statement_cache=\"no\""), "{cache}");
        let missing = ConnectionConfig::from_url("postgres://u@h/db?sslrootcert=/nonexistent.pem")
            .unwrap_err()
            .to_string();
        assert!(
            missing.contains("sslrootcert=/nonexistent.pem: cannot read"),
            "{missing}"
        );
    }

    #[test]
    fn no_sslmode_means_no_tls() {
        let config = ConnectionConfig::from_url("postgres://u@h/db").unwrap();
        assert_eq!(config.get_ssl_mode(), SslMode::Disable);
        assert_eq!(
            config.driver_config().get_ssl_mode(),
            tokio_postgres::config::SslMode::Disable
        );
    }
}
