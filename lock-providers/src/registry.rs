//! The providers by URL scheme, and the parsed URL: [`LockDatabase`].

use std::fmt;

use lock_core::LockError;

use crate::database::{Database, UrlError};
use crate::{OpenError, OpenOptions, OpenedProvider, mysql, postgres, redis, sqlite, sqlx};

/// Every provider `open` knows: its URL schemes and how to parse the rest of its URLs.
///
/// The one place a new provider registers (see the crate's README); the list of accepted
/// schemes in error messages is built from it.
const PROVIDERS: &[Registration] = &[
    Registration {
        schemes: &["postgres", "postgresql"],
        parse: postgres::parse,
    },
    Registration {
        schemes: &["mysql", "mariadb"],
        parse: mysql::parse,
    },
    Registration {
        schemes: &["sqlite"],
        parse: sqlite::parse,
    },
    Registration {
        schemes: &["redis", "rediss"],
        parse: redis::parse,
    },
    Registration {
        schemes: &[
            "sqlx+postgres",
            "sqlx+postgresql",
            "sqlx+mysql",
            "sqlx+mariadb",
            "sqlx+sqlite",
        ],
        parse: sqlx::parse,
    },
];

/// One provider's entry in [`PROVIDERS`].
struct Registration {
    /// Lower-case URL schemes, without `://`.
    schemes: &'static [&'static str],
    /// Checks `rest` (what follows `scheme://`) without connecting.
    parse: Parse,
}

/// A provider module's `parse(scheme, rest)`.
type Parse = fn(scheme: &str, rest: &str) -> Result<Box<dyn Database>, UrlError>;

/// A lock database named by a URL, checked but not yet connected to.
///
/// Displays as where the locks are (server `host:port` and database, or the SQLite file),
/// never with the user or password, so it fits error messages and logs.
///
/// ```
/// use lock_providers::LockDatabase;
///
/// let database = LockDatabase::parse("postgres://app:secret@db.internal:5433/billing")?;
/// assert_eq!(database.kind(), "postgres");
/// assert_eq!(
///     database.to_string(),
///     "the PostgreSQL server at db.internal:5433 (database billing)"
/// );
/// # Ok::<(), lock_providers::UrlError>(())
/// ```
#[derive(Debug)]
pub struct LockDatabase {
    database: Box<dyn Database>,
}

impl LockDatabase {
    /// Parses a URL whose scheme names a registered provider: `postgres://`, `postgresql://`,
    /// `mysql://`, `mariadb://`, `sqlite://` (`sqlite:///absolute/path.db` or
    /// `sqlite://relative.db`), `redis://` or `rediss://`, or an SQL one behind `sqlx+`
    /// (`sqlx+postgres://...`: the same table through the sqlx provider). The scheme is
    /// case-insensitive.
    ///
    /// Nothing connects: a typing mistake is an error here, never a connection attempt to
    /// somewhere unintended. The error never repeats the URL, which may carry a password.
    ///
    /// ```
    /// use lock_providers::LockDatabase;
    ///
    /// assert_eq!(LockDatabase::parse("mariadb://root@localhost/test")?.kind(), "mysql");
    /// let error = LockDatabase::parse("http://app:secret@example.com/x").unwrap_err();
    /// assert!(error.to_string().contains("unsupported scheme `http://`"));
    /// assert!(!error.to_string().contains("secret"));
    /// # Ok::<(), lock_providers::UrlError>(())
    /// ```
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(UrlError::new(format!("is not a URL ({})", expected())));
        };
        let scheme = scheme.to_ascii_lowercase();
        let registration = PROVIDERS
            .iter()
            .find(|r| r.schemes.contains(&scheme.as_str()))
            .ok_or_else(|| {
                UrlError::new(format!(
                    "has the unsupported scheme `{scheme}://` ({})",
                    expected()
                ))
            })?;
        let database = (registration.parse)(&scheme, rest)?;
        Ok(LockDatabase { database })
    }

    /// The provider's short name: `postgres`, `mysql` (also for `mariadb://`), `sqlite` or
    /// `redis`.
    ///
    /// ```
    /// let database = lock_providers::LockDatabase::parse("sqlite:///var/lib/app/locks.db")?;
    /// assert_eq!(database.kind(), "sqlite");
    /// # Ok::<(), lock_providers::UrlError>(())
    /// ```
    pub fn kind(&self) -> &'static str {
        self.database.kind()
    }

    /// Checks the name of the lock table (for Redis: the key prefix) as this provider
    /// accepts it, without connecting: the check [`open`](Self::open) makes once connected,
    /// moved ahead so that a typing mistake never connects.
    ///
    /// ```
    /// use lock_providers::LockDatabase;
    ///
    /// let postgres = LockDatabase::parse("postgres://app@db.internal/app")?;
    /// assert!(postgres.check_table("ops.shedlock").is_ok());
    /// assert!(postgres.check_table("billing:locks").is_err());
    /// // On Redis the "table" is the key prefix: `:` is welcome, a space is not.
    /// let redis = LockDatabase::parse("redis://cache.internal:6379/0")?;
    /// assert!(redis.check_table("billing:locks").is_ok());
    /// assert!(redis.check_table("billing locks").is_err());
    /// # Ok::<(), lock_providers::UrlError>(())
    /// ```
    pub fn check_table(&self, table: &str) -> Result<(), LockError> {
        self.database.check_table(table)
    }

    /// Connects and opens the provider as `options` say.
    ///
    /// ```no_run
    /// use lock_providers::{LockDatabase, OpenOptions, SchemaAction};
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let database = LockDatabase::parse("mysql://root@127.0.0.1:3306/test")?;
    /// let opened = database
    ///     .open(&OpenOptions::new().table("app_locks").schema(SchemaAction::Create))
    ///     .await?;
    /// println!("{}", opened.provider().describe());
    /// opened.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn open(&self, options: &OpenOptions) -> Result<OpenedProvider, OpenError> {
        let mut opened = self.database.open(options).await?;
        if let Some(limit) = options.get_operation_timeout() {
            opened = opened.with_deadline(limit, self.to_string());
        }
        options.check_schema(opened.provider().as_ref()).await?;
        Ok(opened)
    }
}

/// Where the locks are: server and database, or file; never user or password.
impl fmt::Display for LockDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.database, f)
    }
}

/// `expected postgres://, postgresql://, mysql://, mariadb://, sqlite://, redis://, ...
/// or sqlx+sqlite://`, from [`PROVIDERS`].
fn expected() -> String {
    let schemes: Vec<String> = PROVIDERS
        .iter()
        .flat_map(|r| r.schemes)
        .map(|scheme| format!("{scheme}://"))
        .collect();
    match schemes.split_last() {
        Some((last, [])) => format!("expected {last}"),
        Some((last, rest)) => format!("expected {} or {last}", rest.join(", ")),
        None => "no provider is registered".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(url: &str) -> String {
        match LockDatabase::parse(url) {
            Ok(database) => panic!("{url} was accepted as {database}"),
            Err(e) => e.to_string(),
        }
    }

    fn kind(url: &str) -> &'static str {
        LockDatabase::parse(url)
            .unwrap_or_else(|e| panic!("{url}: {e}"))
            .kind()
    }

    #[test]
    fn every_supported_scheme_parses() {
        for url in [
            "postgres://app:secret@db.internal:5433/app",
            "postgresql://app@localhost/app",
            "POSTGRES://app@localhost/app",
        ] {
            assert_eq!(kind(url), "postgres", "{url}");
        }
        for url in [
            "mysql://root@127.0.0.1:3306/test",
            "mariadb://root@localhost/test",
        ] {
            assert_eq!(kind(url), "mysql", "{url}");
        }
        for url in ["sqlite:///var/lib/app/locks.db", "sqlite://locks.db"] {
            assert_eq!(kind(url), "sqlite", "{url}");
        }
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
    fn the_accepted_schemes_are_listed_from_the_registry() {
        assert_eq!(
            expected(),
            "expected postgres://, postgresql://, mysql://, mariadb://, sqlite://, redis://, \
             rediss://, sqlx+postgres://, sqlx+postgresql://, sqlx+mysql://, sqlx+mariadb:// or \
             sqlx+sqlite://"
        );
        assert_eq!(
            error("ftp://host"),
            "has the unsupported scheme `ftp://` (expected postgres://, postgresql://, \
             mysql://, mariadb://, sqlite://, redis://, rediss://, sqlx+postgres://, \
             sqlx+postgresql://, sqlx+mysql://, sqlx+mariadb:// or sqlx+sqlite://)"
        );
    }

    #[test]
    fn descriptions_name_the_server_but_not_the_user() {
        let described = |url: &str| LockDatabase::parse(url).unwrap().to_string();
        assert_eq!(
            described("postgres://app:secret@db.internal:5433/billing"),
            "the PostgreSQL server at db.internal:5433 (database billing)"
        );
        assert_eq!(
            described("mariadb://root:secret@10.0.0.7/test"),
            "the MySQL/MariaDB server at 10.0.0.7:3306 (database test)"
        );
        assert_eq!(
            described("sqlite:///var/lib/app/locks.db"),
            "the SQLite database /var/lib/app/locks.db"
        );
    }
}
