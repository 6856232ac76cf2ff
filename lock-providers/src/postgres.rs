//! `postgres://` and `postgresql://`: [`PostgresLockProvider`].

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use lock_provider_postgres::{ConnectionConfig, PostgresLockProvider};
use tokio_postgres::config::Host;

use lock_core::LockError;

use crate::database::Database;
use crate::deadline::TimedOut;
use crate::{OpenError, OpenOptions, OpenedProvider, UrlError};

/// A PostgreSQL server, by URL.
pub(crate) struct Postgres {
    /// The URL read as the provider reads it (TLS, statement cache and all), so that `open`
    /// connects exactly as `PostgresLockProvider::connect(url)` would. Boxed: it is large, and
    /// the registry keeps it behind a pointer anyway.
    config: Box<ConnectionConfig>,
}

pub(crate) fn parse(scheme: &str, rest: &str) -> Result<Box<dyn Database>, UrlError> {
    let url = format!("{scheme}://{rest}");
    // The provider's message never repeats the URL.
    let config = ConnectionConfig::from_url(&url)
        .map_err(|e| UrlError::new(format!("is not a valid PostgreSQL URL: {e}")))?;
    Ok(Box::new(Postgres {
        config: Box::new(config),
    }))
}

#[async_trait]
impl Database for Postgres {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    async fn open(&self, options: &OpenOptions) -> Result<OpenedProvider, OpenError> {
        let connecting = async {
            PostgresLockProvider::connect_with((*self.config).clone())
                .await
                .map_err(|e| self.timed_out_as_such(e))
        };
        let provider = options
            .connect(self, connecting)
            .await?
            .with_table(options.table_name())
            .map_err(OpenError::Table)?;
        options.ensure_schema(provider.ensure_schema()).await?;
        Ok(OpenedProvider::new(provider))
    }
}

impl Postgres {
    /// The pool's create timeout (the URL's `connect_timeout`, which may be shorter than
    /// [`OpenOptions::connect_timeout`]) said as the registry says its own.
    fn timed_out_as_such(&self, error: LockError) -> LockError {
        use lock_provider_postgres::deadpool_postgres::{PoolError, TimeoutType};
        let LockError::Provider { source, .. } = &error else {
            return error;
        };
        match source.downcast_ref::<PoolError>() {
            Some(PoolError::Timeout(TimeoutType::Create)) => {
                let driver = self.config.driver_config();
                let hosts = driver.get_hosts().len().max(1) as u32;
                let after = driver
                    .get_connect_timeout()
                    .map_or(Duration::ZERO, |t| *t * hosts);
                LockError::provider("connect", "", self.to_string(), TimedOut::connecting(after))
            }
            _ => error,
        }
    }
}

/// Host(s) and database: never the user or password.
impl fmt::Display for Postgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let driver = self.config.driver_config();
        let ports = driver.get_ports();
        let servers: Vec<String> = driver
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, host)| {
                // libpq's rule: one port for all hosts, or one per host.
                let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
                match host {
                    Host::Tcp(name) => format!("{name}:{port}"),
                    Host::Unix(dir) => format!("{}/.s.PGSQL.{port}", dir.display()),
                }
            })
            .collect();
        let servers = if servers.is_empty() {
            "(no host in the URL)".to_owned()
        } else {
            servers.join(",")
        };
        write!(f, "the PostgreSQL server at {servers}")?;
        if let Some(db) = driver.get_dbname() {
            write!(f, " (database {db})")?;
        }
        Ok(())
    }
}

/// Like `Display`: a derived `Debug` would print the URL, password included.
impl fmt::Debug for Postgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Postgres").field(&self.to_string()).finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::LockDatabase;

    #[test]
    fn several_hosts_and_unix_sockets_are_described() {
        let described = |url: &str| LockDatabase::parse(url).unwrap().to_string();
        assert_eq!(
            described("postgresql://app@a:5433,b/app"),
            "the PostgreSQL server at a:5433,b:5432 (database app)"
        );
        assert_eq!(
            described("postgres://app@%2Fvar%2Frun%2Fpostgresql/app"),
            "the PostgreSQL server at /var/run/postgresql/.s.PGSQL.5432 (database app)"
        );
        let debug = format!(
            "{:?}",
            LockDatabase::parse("postgres://app:secret@h/db").unwrap()
        );
        assert!(!debug.contains("secret"), "{debug}");
    }

    #[test]
    fn the_providers_own_parameters_pass_through() {
        // TLS modes the driver alone rejects, and the statement cache switch for PgBouncer.
        let url = "postgres://app@db:6432/app?sslmode=verify-full&statement_cache=false";
        assert_eq!(
            LockDatabase::parse(url).unwrap().to_string(),
            "the PostgreSQL server at db:6432 (database app)"
        );
        let err = LockDatabase::parse("postgres://app@db/app?sslrootcert=/nonexistent.pem")
            .unwrap_err()
            .to_string();
        assert!(err.contains("sslrootcert=/nonexistent.pem"), "{err}");
    }
}
