//! Which database a service instance locks in, and how its lock provider is opened.

use std::path::PathBuf;
use std::sync::Arc;

use lock_core::{LockError, LockProvider};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_postgres::PostgresLockProvider;
use lock_provider_sqlite::SqliteLockProvider;

/// One of the three databases the providers support, with where to find it.
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
}

/// What a service does about the lock table at start.
///
/// ```
/// assert_ne!(fault_tests::SchemaAction::Create, fault_tests::SchemaAction::Check);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaAction {
    /// `ensure_schema()`: create the table or add the extension columns.
    Create,
    /// Only look at it (a service without DDL rights): a missing table is an error at start.
    Check,
}

impl Backend {
    /// `kind` is `postgres`, `mysql` or `sqlite`; `location` a URL, or a file path for SQLite.
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
            other => Err(format!(
                "unknown backend {other:?} (expected postgres, mysql or sqlite)"
            )),
        }
    }

    /// `postgres`, `mysql` or `sqlite`.
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
            Backend::Postgres(url) | Backend::MySql(url) => url.clone(),
            Backend::Sqlite(path) => path.display().to_string(),
        }
    }

    /// Opens the provider on `table`, the way a service does at start: connect (which fails on
    /// bad credentials or an unknown database), then create or check the table.
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
    ) -> Result<Arc<dyn LockProvider>, LockError> {
        let provider: Arc<dyn LockProvider> = match self {
            Backend::Postgres(url) => {
                let provider = PostgresLockProvider::connect(url)
                    .await?
                    .with_table(table)?;
                if schema == SchemaAction::Create {
                    provider.ensure_schema().await?;
                }
                Arc::new(provider)
            }
            Backend::MySql(url) => {
                let provider = MySqlLockProvider::connect(url).await?.with_table(table)?;
                if schema == SchemaAction::Create {
                    provider.ensure_schema().await?;
                }
                Arc::new(provider)
            }
            Backend::Sqlite(path) => {
                let provider = SqliteLockProvider::open(path)?.with_table(table)?;
                if schema == SchemaAction::Create {
                    provider.ensure_schema().await?;
                }
                Arc::new(provider)
            }
        };
        if schema == SchemaAction::Check {
            // Reading the table is the one check every provider has; a missing table is
            // `LockError::TableMissing` with the DDL to run.
            provider.list_locks().await?;
        }
        Ok(provider)
    }
}
