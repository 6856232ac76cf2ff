//! Which lock table the URL names, and opening a provider on it.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use lock_core::{LockError, LockProvider};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::{self, Opts};
use lock_provider_postgres::PostgresLockProvider;
use lock_provider_postgres::tokio_postgres::{self, config::Host};
use lock_provider_sqlite::SqliteLockProvider;

use crate::Failure;

/// A parsed `--url`: checked before anything connects, so that a typing mistake is a usage
/// error (exit code 2) and never a connection attempt to somewhere unintended.
pub(crate) enum Target {
    Postgres {
        /// The URL as given, with the scheme lower-cased (the driver parses it again).
        url: String,
        // Boxed: it is several times the size of the other variants.
        config: Box<tokio_postgres::Config>,
    },
    MySql {
        /// The URL with a `mysql://` scheme, which is all the driver accepts.
        url: String,
        opts: Opts,
    },
    Sqlite {
        path: PathBuf,
    },
}

impl Target {
    /// Parses `postgres://`, `postgresql://`, `mysql://`, `mariadb://` and `sqlite://` URLs.
    ///
    /// Messages never repeat the URL: it may carry a password.
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        const EXPECTED: &str =
            "expected postgres://, postgresql://, mysql://, mariadb:// or sqlite://";
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(format!("--url is not a URL ({EXPECTED})"));
        };
        match scheme.to_ascii_lowercase().as_str() {
            scheme @ ("postgres" | "postgresql") => {
                let url = format!("{scheme}://{rest}");
                let config = url
                    .parse()
                    .map_err(|e| format!("--url is not a valid PostgreSQL URL: {e}"))?;
                Ok(Target::Postgres {
                    url,
                    config: Box::new(config),
                })
            }
            "mysql" | "mariadb" => {
                let url = format!("mysql://{rest}");
                let opts = Opts::from_url(&url)
                    .map_err(|e| format!("--url is not a valid MySQL/MariaDB URL: {e}"))?;
                Ok(Target::MySql { url, opts })
            }
            "sqlite" if rest.is_empty() => Err(
                "--url sqlite:// names no file (sqlite:///absolute/path.db or sqlite://relative.db)"
                    .to_owned(),
            ),
            "sqlite" => Ok(Target::Sqlite {
                path: PathBuf::from(rest),
            }),
            other => Err(format!("--url has the unsupported scheme `{other}://` ({EXPECTED})")),
        }
    }

    /// Connects and points a provider at `table` (already validated).
    pub(crate) async fn open(&self, table: &str) -> Result<Store, Failure> {
        let cannot_connect =
            |e: LockError| Failure::runtime(format!("cannot connect to {self}"), e);
        // `with_table` only fails on a name `validate_table_name` let through but the backend
        // refuses (e.g. a schema other than `main` in SQLite): still a usage error.
        let bad_table = |e: LockError| Failure::usage(format!("--table: {e}"));
        match self {
            Target::Postgres { url, .. } => {
                let provider = PostgresLockProvider::connect(url)
                    .await
                    .map_err(cannot_connect)?
                    .with_table(table)
                    .map_err(bad_table)?;
                Ok(Store::new(provider, None))
            }
            Target::MySql { url, .. } => {
                let provider = MySqlLockProvider::connect(url)
                    .await
                    .map_err(cannot_connect)?;
                let pool = provider.pool().clone();
                let provider = provider.with_table(table).map_err(bad_table)?;
                Ok(Store::new(provider, Some(pool)))
            }
            Target::Sqlite { path } => {
                // Opening a SQLite path creates the file: an inspection tool must not leave an
                // empty database behind a mistyped path.
                if !path.is_file() {
                    return Err(Failure::runtime_message(format!(
                        "{self} does not exist (lockctl never creates one; check the path in --url)"
                    )));
                }
                let provider = SqliteLockProvider::open(path)
                    .map_err(|e| Failure::runtime(format!("cannot open {self}"), e))?
                    .with_table(table)
                    .map_err(bad_table)?;
                Ok(Store::new(provider, None))
            }
        }
    }
}

/// Where the locks are, for messages: host and database, never user or password.
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Postgres { config, .. } => {
                let ports = config.get_ports();
                let servers: Vec<String> = config
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
                if let Some(db) = config.get_dbname() {
                    write!(f, " (database {db})")?;
                }
                Ok(())
            }
            Target::MySql { opts, .. } => {
                write!(
                    f,
                    "the MySQL/MariaDB server at {}:{}",
                    opts.ip_or_hostname(),
                    opts.tcp_port()
                )?;
                if let Some(db) = opts.db_name() {
                    write!(f, " (database {db})")?;
                }
                Ok(())
            }
            Target::Sqlite { path } => write!(f, "the SQLite database {}", path.display()),
        }
    }
}

/// An open provider, and what has to be closed before the process exits.
pub(crate) struct Store {
    pub(crate) provider: Arc<dyn LockProvider>,
    /// mysql_async wants its pool disconnected, not dropped, to close connections cleanly.
    mysql_pool: Option<mysql_async::Pool>,
}

impl Store {
    fn new(provider: impl LockProvider, mysql_pool: Option<mysql_async::Pool>) -> Self {
        Store {
            provider: Arc::new(provider),
            mysql_pool,
        }
    }

    pub(crate) async fn close(self) {
        drop(self.provider);
        if let Some(pool) = self.mysql_pool {
            // Nothing useful to do if the goodbye fails: the work is done already.
            let _ = pool.disconnect().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(url: &str) -> String {
        match Target::parse(url) {
            Ok(_) => panic!("{url} was accepted"),
            Err(e) => e,
        }
    }

    #[test]
    fn every_supported_scheme_parses() {
        for url in [
            "postgres://app:secret@db.internal:5433/app",
            "postgresql://app@localhost/app",
            "POSTGRES://app@localhost/app",
        ] {
            assert!(
                matches!(Target::parse(url), Ok(Target::Postgres { .. })),
                "{url}"
            );
        }
        for url in [
            "mysql://root@127.0.0.1:3306/test",
            "mariadb://root@localhost/test",
        ] {
            let Ok(Target::MySql { url: rewritten, .. }) = Target::parse(url) else {
                panic!("{url}")
            };
            assert!(rewritten.starts_with("mysql://"));
        }
        let Ok(Target::Sqlite { path }) = Target::parse("sqlite:///var/lib/app/locks.db") else {
            panic!()
        };
        assert_eq!(path, PathBuf::from("/var/lib/app/locks.db"));
        let Ok(Target::Sqlite { path }) = Target::parse("sqlite://locks.db") else {
            panic!()
        };
        assert_eq!(path, PathBuf::from("locks.db"));
    }

    #[test]
    fn bad_urls_are_explained_without_echoing_them() {
        assert!(error("http://secret@example.com/x").contains("unsupported scheme `http://`"));
        assert!(error("db.internal:5432").contains("not a URL"));
        assert!(error("sqlite://").contains("names no file"));
        let pg = error("postgres://app:secret@host:notaport/db");
        assert!(pg.contains("not a valid PostgreSQL URL"), "{pg}");
        let my = error("mysql://app:secret@host:notaport/db");
        assert!(my.contains("not a valid MySQL/MariaDB URL"), "{my}");
        for message in [pg, my, error("ftp://app:secret@host")] {
            assert!(!message.contains("secret"), "{message}");
        }
    }

    #[test]
    fn descriptions_name_the_server_but_not_the_user() {
        let target = Target::parse("postgres://app:secret@db.internal:5433/billing").unwrap();
        assert_eq!(
            target.to_string(),
            "the PostgreSQL server at db.internal:5433 (database billing)"
        );
        let target = Target::parse("mariadb://root:secret@10.0.0.7/test").unwrap();
        assert_eq!(
            target.to_string(),
            "the MySQL/MariaDB server at 10.0.0.7:3306 (database test)"
        );
    }
}
