//! Which database (or Redis) a service instance locks in, and how its lock provider is opened.

use std::path::PathBuf;
use std::sync::Arc;

use lock_cluster::ClusterProvider;
use lock_core::LockError;
use lock_providers::{LockDatabase, OpenError, OpenOptions, SchemaAction};

/// One of the stores the providers support, with where to find it.
///
/// ```
/// use fault_tests::Backend;
///
/// let backend = Backend::parse("postgres", "postgres://postgres@127.0.0.1:5432/test")?;
/// assert_eq!(backend.kind(), "postgres");
/// assert!(Backend::parse("oracle", "x").is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A PostgreSQL server, by URL.
    Postgres(String),
    /// A MySQL or MariaDB server, by URL.
    MySql(String),
    /// A SQLite database file shared by the processes of one host.
    Sqlite(PathBuf),
    /// A Redis server, by URL; the lock table's name is the key prefix. Its runs table is in
    /// the PostgreSQL test database (see [`RunsTable::open`](crate::RunsTable::open)).
    Redis(String),
    /// A PostgreSQL server, by URL, locked in through the sqlx provider (`sqlx+postgres://`).
    SqlxPostgres(String),
    /// A MySQL or MariaDB server, by URL, locked in through the sqlx provider (`sqlx+mysql://`).
    SqlxMySql(String),
    /// A SQLite database file, locked in through the sqlx provider (`sqlx+sqlite://`).
    SqlxSqlite(PathBuf),
}

impl Backend {
    /// `kind` is `postgres`, `mysql`, `sqlite`, `redis`, `sqlx-postgres`, `sqlx-mysql` or
    /// `sqlx-sqlite`; `location` a URL (the server's own, without `sqlx+`), or a file path for
    /// SQLite.
    ///
    /// ```
    /// let backend = fault_tests::Backend::parse("sqlite", "/tmp/locks.db")?;
    /// assert_eq!(backend.location(), "/tmp/locks.db");
    /// # Ok::<(), String>(())
    /// ```
    pub fn parse(kind: &str, location: &str) -> Result<Self, String> {
        match kind {
            "postgres" => Ok(Backend::Postgres(location.to_owned())),
            "mysql" => Ok(Backend::MySql(location.to_owned())),
            "sqlite" => Ok(Backend::Sqlite(PathBuf::from(location))),
            "redis" => Ok(Backend::Redis(location.to_owned())),
            "sqlx-postgres" => Ok(Backend::SqlxPostgres(location.to_owned())),
            "sqlx-mysql" => Ok(Backend::SqlxMySql(location.to_owned())),
            "sqlx-sqlite" => Ok(Backend::SqlxSqlite(PathBuf::from(location))),
            other => Err(format!(
                "unknown backend {other:?} (expected postgres, mysql, sqlite, redis, \
                 sqlx-postgres, sqlx-mysql or sqlx-sqlite)"
            )),
        }
    }

    /// `postgres`, `mysql`, `sqlite`, `redis`, `sqlx-postgres`, `sqlx-mysql` or `sqlx-sqlite`:
    /// the registry's [`LockDatabase::kind`] of [`url`](Self::url).
    ///
    /// ```
    /// let backend = fault_tests::Backend::MySql("mysql://root@127.0.0.1/test".into());
    /// assert_eq!(backend.kind(), "mysql");
    /// ```
    pub fn kind(&self) -> &'static str {
        match self {
            Backend::Postgres(_) => "postgres",
            Backend::MySql(_) => "mysql",
            Backend::Sqlite(_) => "sqlite",
            Backend::Redis(_) => "redis",
            Backend::SqlxPostgres(_) => "sqlx-postgres",
            Backend::SqlxMySql(_) => "sqlx-mysql",
            Backend::SqlxSqlite(_) => "sqlx-sqlite",
        }
    }

    /// The URL or file path, as given.
    ///
    /// ```
    /// let url = "postgres://postgres@127.0.0.1:5432/test";
    /// assert_eq!(fault_tests::Backend::Postgres(url.into()).location(), url);
    /// ```
    pub fn location(&self) -> String {
        match self {
            Backend::Postgres(url)
            | Backend::MySql(url)
            | Backend::Redis(url)
            | Backend::SqlxPostgres(url)
            | Backend::SqlxMySql(url) => url.clone(),
            Backend::Sqlite(path) | Backend::SqlxSqlite(path) => path.display().to_string(),
        }
    }

    /// The URL the `lock-providers` registry opens: the URL as given, `sqlite://<path>`, or
    /// the URL behind `sqlx+` for the sqlx provider.
    ///
    /// ```
    /// let backend = fault_tests::Backend::Sqlite("/tmp/locks.db".into());
    /// assert_eq!(backend.url(), "sqlite:///tmp/locks.db");
    /// let backend = fault_tests::Backend::SqlxMySql("mysql://root@127.0.0.1/test".into());
    /// assert_eq!(backend.url(), "sqlx+mysql://root@127.0.0.1/test");
    /// ```
    pub fn url(&self) -> String {
        match self {
            Backend::Postgres(url) | Backend::MySql(url) | Backend::Redis(url) => url.clone(),
            Backend::Sqlite(path) => format!("sqlite://{}", path.display()),
            Backend::SqlxPostgres(url) | Backend::SqlxMySql(url) => format!("sqlx+{url}"),
            Backend::SqlxSqlite(path) => format!("sqlx+sqlite://{}", path.display()),
        }
    }

    /// Opens the provider on `table` through the `lock-providers` registry, the way a service
    /// does at start: connect (which fails on bad credentials or an unknown database), then
    /// create or check the table as `schema` says.
    ///
    /// ```no_run
    /// use fault_tests::{Backend, SchemaAction};
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let backend = Backend::Postgres("postgres://postgres@127.0.0.1:5432/test".into());
    /// let provider = backend.lock_provider("shedlock", SchemaAction::Create).await?;
    /// println!("{}", provider.describe());
    /// # Ok(()) }
    /// ```
    pub async fn lock_provider(
        &self,
        table: &str,
        schema: SchemaAction,
    ) -> Result<Arc<dyn ClusterProvider>, LockError> {
        let database = LockDatabase::parse(&self.url()).map_err(|e| {
            LockError::InvalidConfiguration(format!("{} location {e}", self.kind()))
        })?;
        if database.kind() != self.kind() {
            return Err(LockError::InvalidConfiguration(format!(
                "the {} backend was given a {} URL",
                self.kind(),
                database.kind()
            )));
        }
        let options = OpenOptions::new().table(table).schema(schema);
        let opened = database
            .open(&options)
            .await
            .map_err(OpenError::into_lock_error)?;
        // A service keeps its provider to the end of the process.
        Ok(opened.into_provider())
    }
}
