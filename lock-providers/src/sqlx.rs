//! `sqlx+postgres://`, `sqlx+postgresql://`, `sqlx+mysql://`, `sqlx+mariadb://` and
//! `sqlx+sqlite://`: [`SqlxLockProvider`], the same table and statements as the
//! driver-specific providers, on a sqlx pool. The URL after `sqlx+` is the one sqlx reads
//! (for SQLite, the one `sqlite://` reads: a file path).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use async_trait::async_trait;
use lock_provider_sqlx::SqlxLockProvider;
use lock_provider_sqlx::sqlx::mysql::MySqlConnectOptions;
use lock_provider_sqlx::sqlx::postgres::PgConnectOptions;
use lock_provider_sqlx::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions,
};

use crate::database::Database;
use crate::{OpenError, OpenOptions, OpenedProvider, UrlError};

/// A PostgreSQL or MySQL/MariaDB server reached through sqlx, by URL.
pub(crate) struct Sqlx {
    /// The URL as sqlx reads it (`sqlx+` removed).
    url: String,
    /// `sqlx-postgres`, `sqlx-mysql` or `sqlx-sqlite`.
    kind: &'static str,
    /// The SQLite file, for `sqlx+sqlite://`.
    file: Option<PathBuf>,
    /// Where it points, for `Display`: server, host, port, database.
    place: String,
}

pub(crate) fn parse(scheme: &str, rest: &str) -> Result<Box<dyn Database>, UrlError> {
    let inner = scheme.strip_prefix("sqlx+").unwrap_or(scheme);
    if inner == "sqlite" {
        if rest.is_empty() {
            return Err(UrlError::new(
                "sqlx+sqlite:// names no file (sqlx+sqlite:///absolute/path.db or \
                 sqlx+sqlite://relative.db)"
                    .to_owned(),
            ));
        }
        let file = PathBuf::from(rest);
        return Ok(Box::new(Sqlx {
            url: format!("sqlite://{rest}"),
            kind: "sqlx-sqlite",
            place: format!("the SQLite database {} through sqlx", file.display()),
            file: Some(file),
        }));
    }
    let kind = if matches!(inner, "postgres" | "postgresql") {
        "sqlx-postgres"
    } else {
        "sqlx-mysql"
    };
    let place = match inner {
        "postgres" | "postgresql" => {
            let url = format!("postgres://{rest}");
            let options = PgConnectOptions::from_str(&url).map_err(|e| {
                UrlError::new(format!("is not a valid PostgreSQL URL for sqlx: {e}"))
            })?;
            place(
                "PostgreSQL",
                options.get_host(),
                options.get_port(),
                options.get_database(),
            )
        }
        _ => {
            let url = format!("mysql://{rest}");
            let options = MySqlConnectOptions::from_str(&url).map_err(|e| {
                UrlError::new(format!("is not a valid MySQL/MariaDB URL for sqlx: {e}"))
            })?;
            place(
                "MySQL/MariaDB",
                options.get_host(),
                options.get_port(),
                options.get_database(),
            )
        }
    };
    Ok(Box::new(Sqlx {
        url: format!("{inner}://{rest}"),
        kind,
        place,
        file: None,
    }))
}

fn place(server: &str, host: &str, port: u16, database: Option<&str>) -> String {
    let mut place = format!("the {server} server at {host}:{port}");
    if let Some(database) = database {
        place.push_str(&format!(" (database {database})"));
    }
    place.push_str(" through sqlx");
    place
}

#[async_trait]
impl Database for Sqlx {
    fn kind(&self) -> &'static str {
        self.kind
    }

    async fn open(&self, options: &OpenOptions) -> Result<OpenedProvider, OpenError> {
        let provider = match &self.file {
            Some(file) => self.open_file(file, options).await?,
            None => {
                options
                    .connect(self, SqlxLockProvider::connect(&self.url))
                    .await?
            }
        };
        let provider = provider
            .with_table(options.table_name())
            .map_err(OpenError::Table)?;
        options.ensure_schema(provider.ensure_schema()).await?;
        let closing = provider.clone();
        Ok(OpenedProvider::new(provider).closing_with(async move { closing.close().await }))
    }
}

impl Sqlx {
    /// A pool on the SQLite file, created only if `options` allow it, in WAL mode as
    /// `lock-provider-sqlite` opens it.
    async fn open_file(
        &self,
        file: &PathBuf,
        options: &OpenOptions,
    ) -> Result<SqlxLockProvider, OpenError> {
        if !options.creates_missing() && !file.is_file() {
            return Err(OpenError::Missing {
                database: self.to_string(),
            });
        }
        let connect = SqliteConnectOptions::new()
            .filename(file)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let pool = SqlitePoolOptions::new()
            .connect_with(connect)
            .await
            .map_err(|e| {
                let source = lock_core::LockError::provider("open", "", self.to_string(), e);
                OpenError::unreachable(format!("cannot open {self}"), source)
            })?;
        Ok(SqlxLockProvider::sqlite(pool))
    }
}

/// Host, port and database: never the user or password.
impl fmt::Display for Sqlx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.place)
    }
}

/// Like `Display`: a derived `Debug` would print the URL, password included.
impl fmt::Debug for Sqlx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Sqlx").field(&self.place).finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::LockDatabase;

    #[test]
    fn sqlx_urls_name_the_server_and_not_the_password() {
        let database = LockDatabase::parse("sqlx+postgres://app:secret@db:5433/billing").unwrap();
        assert_eq!(database.kind(), "sqlx-postgres");
        assert_eq!(
            database.to_string(),
            "the PostgreSQL server at db:5433 (database billing) through sqlx"
        );
        let database = LockDatabase::parse("SQLX+MariaDB://root:pw@db/test").unwrap();
        assert_eq!(database.kind(), "sqlx-mysql");
        assert_eq!(
            database.to_string(),
            "the MySQL/MariaDB server at db:3306 (database test) through sqlx"
        );
        assert!(!format!("{database:?}").contains("pw"));
        let error = LockDatabase::parse("sqlx+postgres://db/x?sslmode=sometimes")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("not a valid PostgreSQL URL for sqlx"),
            "{error}"
        );
    }
}
