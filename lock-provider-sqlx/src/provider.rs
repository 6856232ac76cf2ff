//! `SqlxLockProvider`: the `LockProvider` contract on the service's own sqlx pool.

use std::fmt;
use std::time::Duration;

use crate::TableShape;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_cluster::{Cluster, ClusterProvider};
use lock_core::batching::{acquire_each, batchable};
use lock_core::{
    AcquireOutcome, Lease, LockError, LockProvider, LockRecord, LockRequest, validate_lock_name,
};
#[cfg(feature = "postgres")]
use lock_sql::IdentifierStyle;
use lock_sql::{ColumnNames, LockTableConfig};

#[cfg(feature = "mysql")]
use crate::mysql::MySqlBackend;
#[cfg(feature = "postgres")]
use crate::postgres::PgBackend;
#[cfg(feature = "sqlite")]
use crate::sqlite::SqliteBackend;

/// Locks in the ShedLock-compatible table, on a sqlx pool the service already has: the same
/// table, statements and guarantees as `lock-provider-postgres` and `lock-provider-mysql`
/// (the SQL is the provider kit's, [`lock_sql::sql`]), without a second pool.
///
/// - **Database time**: every `now` is the server's; a client whose clock is wrong can
///   neither steal nor keep a lock longer.
/// - **One round trip** per acquire, release and extend (sqlx keeps each statement prepared
///   on its connection; see [`with_statement_cache`](Self::with_statement_cache) for
///   PgBouncer). A losing acquire writes nothing.
/// - **Batches**: [`acquire_many`](LockProvider::acquire_many) and
///   [`release_many`](LockProvider::release_many) run the driver-specific providers' batch
///   statements (up to 1,000 requests in a few statements, not one each), each request
///   decided as its own acquire would be.
/// - **Fencing and once-per-slot** through the `fence` and `last_fire` columns, which
///   [`ensure_schema`](Self::ensure_schema) adds to a ShedLock table.
/// - **Operations tables** (job registry, run history, pause, trigger requests) next to the
///   lock table, made by [`ensure_schema`](Self::ensure_schema) and returned by
///   [`ClusterProvider::cluster`](lock_cluster::ClusterProvider::cluster): the same tables and statements as the driver-specific
///   providers'.
///
/// A provider of this crate and one of `lock-provider-postgres` (or `-mysql`, `-sqlite`) on
/// the same table exclude each other and share one cluster view: they run the same statements.
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use lock_provider_sqlx::{SqlxLockProvider, sqlx::PgPool};
///
/// let pool = PgPool::connect("postgres://app@db.internal/app").await?; // the service's pool
/// let provider = SqlxLockProvider::postgres(pool.clone());
/// provider.ensure_schema().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SqlxLockProvider {
    config: LockTableConfig,
    backend: Backend,
}

/// The most requests one batch carries, as the driver-specific providers': a thousand names
/// (MySQL: a thousand statements of under a kilobyte, well within `max_allowed_packet`;
/// SQLite: one write transaction); on PostgreSQL [`MAX_PG_BATCH`].
const MAX_BATCH: usize = 1000;

/// PostgreSQL's batches, as `lock-provider-postgres`'s: 2,500 names in arrays, one plan (fewer,
/// larger statements cost the database less per row; its `MAX_BATCH` says what was measured).
#[cfg(feature = "postgres")]
const MAX_PG_BATCH: usize = 2500;

/// How long [`SqlxLockProvider::connect`] waits for the server, as the other providers do.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The URL schemes [`SqlxLockProvider::connect`] accepts with the backends compiled in.
const SCHEMES: &[&str] = &[
    #[cfg(feature = "postgres")]
    "postgres://",
    #[cfg(feature = "postgres")]
    "postgresql://",
    #[cfg(feature = "mysql")]
    "mysql://",
    #[cfg(feature = "mysql")]
    "mariadb://",
    #[cfg(feature = "sqlite")]
    "sqlite://",
];

#[derive(Clone)]
enum Backend {
    #[cfg(feature = "postgres")]
    Postgres(PgBackend),
    #[cfg(feature = "mysql")]
    MySql(MySqlBackend),
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteBackend),
}

/// Runs `$body` with `$b` bound to the backend, whichever it is.
macro_rules! on_backend {
    ($self:expr, $b:ident => $body:expr) => {
        match &$self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres($b) => $body,
            #[cfg(feature = "mysql")]
            Backend::MySql($b) => $body,
            #[cfg(feature = "sqlite")]
            Backend::Sqlite($b) => $body,
        }
    };
}

impl SqlxLockProvider {
    /// A provider on a PostgreSQL pool, using the table `shedlock` with ShedLock's column
    /// names. Nothing is sent yet: the table is looked at on first use (or by
    /// [`ensure_schema`](Self::ensure_schema) / [`check_schema`](Self::check_schema)).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_provider_sqlx::{SqlxLockProvider, sqlx::PgPool};
    ///
    /// let pool = PgPool::connect_lazy("postgres://app@localhost/app")?;
    /// let provider = SqlxLockProvider::postgres(pool);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "postgres")]
    pub fn postgres(pool: sqlx::PgPool) -> Self {
        Self::postgres_with_config(pool, LockTableConfig::default())
            .expect("the default lock table configuration is valid")
    }

    /// A provider on a PostgreSQL pool with the given table and columns, refused if a name is
    /// not a plain identifier.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_provider_sqlx::{LockTableConfig, SqlxLockProvider, sqlx::PgPool};
    ///
    /// let pool = PgPool::connect_lazy("postgres://app@localhost/app")?;
    /// let config = LockTableConfig::default().with_table("ops.job_locks");
    /// let provider = SqlxLockProvider::postgres_with_config(pool, config)?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "postgres")]
    pub fn postgres_with_config(
        pool: sqlx::PgPool,
        config: LockTableConfig,
    ) -> Result<Self, LockError> {
        let table = config.resolve(IdentifierStyle::POSTGRES)?;
        Ok(SqlxLockProvider {
            backend: Backend::Postgres(PgBackend::new(pool, table)),
            config,
        })
    }

    /// A provider on a MySQL or MariaDB pool, using the table `shedlock` with ShedLock's column
    /// names. The pool's connections must be in UTC if the table has ShedLock's `TIMESTAMP`
    /// columns: sqlx's default (`timezone` `+00:00`) is.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_provider_sqlx::{SqlxLockProvider, sqlx::MySqlPool};
    ///
    /// let pool = MySqlPool::connect_lazy("mysql://app@localhost/app")?;
    /// let provider = SqlxLockProvider::mysql(pool);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "mysql")]
    pub fn mysql(pool: sqlx::MySqlPool) -> Self {
        Self::mysql_with_config(pool, LockTableConfig::default())
            .expect("the default lock table configuration is valid")
    }

    /// A provider on a MySQL or MariaDB pool with the given table and columns, refused if a
    /// name is not a plain identifier.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_provider_sqlx::{LockTableConfig, SqlxLockProvider, sqlx::MySqlPool};
    ///
    /// let pool = MySqlPool::connect_lazy("mysql://app@localhost/app")?;
    /// let config = LockTableConfig::default().with_table("ops.job_locks");
    /// let provider = SqlxLockProvider::mysql_with_config(pool, config)?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "mysql")]
    pub fn mysql_with_config(
        pool: sqlx::MySqlPool,
        config: LockTableConfig,
    ) -> Result<Self, LockError> {
        let table = lock_sql::sql::mysql::Table::new(&config)?;
        let resolved = config.resolve(lock_sql::IdentifierStyle::MYSQL)?;
        Ok(SqlxLockProvider {
            backend: Backend::MySql(MySqlBackend::new(pool, table, &resolved)),
            config,
        })
    }

    /// Builds a pool of its own for `url` and checks that the server answers: `postgres://`
    /// (or `postgresql://`) for PostgreSQL, `mysql://` (or `mariadb://`) for MySQL and MariaDB,
    /// `sqlite://path` for an existing SQLite file (opened in WAL mode), with sqlx's URL
    /// parameters (`sslmode`, `ssl-mode`, ... with the `tls` feature). For
    /// tools such as `lockctl`; a service passes its own pool to [`postgres`](Self::postgres)
    /// or [`mysql`](Self::mysql) instead.
    ///
    /// An unreachable server is a [`LockError::Provider`] (operation `connect`) after at most
    /// 10 s; a URL of another scheme, or of a backend not compiled in, is
    /// [`LockError::InvalidConfiguration`].
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let provider = lock_provider_sqlx::SqlxLockProvider::connect("postgres://app@localhost/app").await?;
    /// provider.ensure_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        let scheme = url
            .split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase());
        let unreachable = |e: sqlx::Error| {
            let shown = url.split_once('@').map_or(url, |(_, host)| host);
            LockError::provider("connect", "", format!("sqlx pool for {shown}"), e)
        };
        match scheme.as_deref() {
            #[cfg(feature = "postgres")]
            Some("postgres" | "postgresql") => {
                let (url, cache) = take_statement_cache(url)?;
                let options: sqlx::postgres::PgConnectOptions = url
                    .parse()
                    .map_err(|e| LockError::InvalidConfiguration(format!("PostgreSQL URL: {e}")))?;
                // The provider reads no floats, and PgBouncer refuses this startup parameter
                // unless told to ignore it.
                let options = options.extra_float_digits(None);
                let pool = sqlx::postgres::PgPoolOptions::new()
                    .acquire_timeout(CONNECT_TIMEOUT)
                    .connect_with(options)
                    .await
                    .map_err(unreachable)?;
                Ok(Self::postgres(pool).with_statement_cache(cache))
            }
            #[cfg(feature = "mysql")]
            Some("mysql" | "mariadb") => {
                let url = url.replacen("mariadb://", "mysql://", 1);
                let pool = sqlx::mysql::MySqlPoolOptions::new()
                    .acquire_timeout(CONNECT_TIMEOUT)
                    .connect(&url)
                    .await
                    .map_err(unreachable)?;
                Ok(Self::mysql(pool))
            }
            #[cfg(feature = "sqlite")]
            Some("sqlite") => {
                // An existing file only (a tool must not leave an empty database behind a
                // mistyped path), in WAL mode like lock-provider-sqlite's connection.
                let options = std::str::FromStr::from_str(url)
                    .map(|o: sqlx::sqlite::SqliteConnectOptions| {
                        o.journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                    })
                    .map_err(|e| LockError::InvalidConfiguration(format!("SQLite URL: {e}")))?;
                let pool = sqlx::sqlite::SqlitePoolOptions::new()
                    .acquire_timeout(CONNECT_TIMEOUT)
                    .connect_with(options)
                    .await
                    .map_err(unreachable)?;
                Ok(Self::sqlite(pool))
            }
            _ => Err(LockError::InvalidConfiguration(format!(
                "sqlx lock provider: unsupported URL scheme in {:?}; expected {}",
                url.split_once("://").map_or(url, |(scheme, _)| scheme),
                SCHEMES.join(", ")
            ))),
        }
    }

    /// Closes the pool the provider runs on (waiting for connections in use to come back), as
    /// a tool that opened it with [`connect`](Self::connect) does at exit. A service's own
    /// pool is the service's to close.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let provider = lock_provider_sqlx::SqlxLockProvider::connect("mysql://app@localhost/app").await?;
    /// provider.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn close(&self) {
        on_backend!(self, b => b.pool.close().await)
    }

    /// A provider on a SQLite pool, using the table `shedlock` with ShedLock's column names.
    /// Build the pool with `journal_mode` WAL, so that the readers and the writer of the
    /// processes sharing the file never wait for each other.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_provider_sqlx::SqlxLockProvider;
    /// use lock_provider_sqlx::sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool};
    ///
    /// let options = SqliteConnectOptions::new()
    ///     .filename("/var/lib/app/app.db")
    ///     .create_if_missing(true)
    ///     .journal_mode(SqliteJournalMode::Wal);
    /// let provider = SqlxLockProvider::sqlite(SqlitePool::connect_with(options).await?);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "sqlite")]
    pub fn sqlite(pool: sqlx::SqlitePool) -> Self {
        Self::sqlite_with_config(pool, LockTableConfig::default())
            .expect("the default lock table configuration is valid")
    }

    /// A provider on a SQLite pool with the given table (`table` or `main.table`) and columns,
    /// refused if a name is not a plain identifier.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// use lock_provider_sqlx::{LockTableConfig, SqlxLockProvider, sqlx::SqlitePool};
    ///
    /// let pool = SqlitePool::connect("sqlite:///var/lib/app/app.db").await?;
    /// let config = LockTableConfig::default().with_table("job_locks");
    /// let provider = SqlxLockProvider::sqlite_with_config(pool, config)?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "sqlite")]
    pub fn sqlite_with_config(
        pool: sqlx::SqlitePool,
        config: LockTableConfig,
    ) -> Result<Self, LockError> {
        let table = lock_sql::sql::sqlite::Table::new(&config)?;
        Ok(SqlxLockProvider {
            backend: Backend::Sqlite(SqliteBackend::new(pool, table)),
            config,
        })
    }

    /// The same provider, on the same pool, with another table and columns.
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_sqlx::SqlxLockProvider) -> Result<(), lock_core::LockError> {
    /// use lock_provider_sqlx::LockTableConfig;
    /// let provider = provider.with_config(LockTableConfig::default().with_table("job_locks"))?;
    /// # Ok(()) }
    /// ```
    pub fn with_config(self, config: LockTableConfig) -> Result<Self, LockError> {
        let persistent = self.statement_cache();
        let provider = match self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres(b) => Self::postgres_with_config(b.pool, config)?,
            #[cfg(feature = "mysql")]
            Backend::MySql(b) => Self::mysql_with_config(b.pool, config)?,
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(b) => Self::sqlite_with_config(b.pool, config)?,
        };
        Ok(provider.with_statement_cache(persistent))
    }

    /// The same provider on another table (`table` or `schema.table`), refused if the name is
    /// not a plain identifier.
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_sqlx::SqlxLockProvider) -> Result<(), lock_core::LockError> {
    /// let provider = provider.with_table("ops.shedlock")?;
    /// # Ok(()) }
    /// ```
    pub fn with_table(self, table: &str) -> Result<Self, LockError> {
        let config = self.config.clone().with_table(table);
        self.with_config(config)
    }

    /// The same provider with other column names, refused if a name is not a plain identifier
    /// or two are the same.
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_sqlx::SqlxLockProvider) -> Result<(), lock_core::LockError> {
    /// use lock_provider_sqlx::ColumnNames;
    /// let columns = ColumnNames { locked_by: "owner".into(), ..ColumnNames::default() };
    /// let provider = provider.with_columns(columns)?;
    /// # Ok(()) }
    /// ```
    pub fn with_columns(self, columns: ColumnNames) -> Result<Self, LockError> {
        let config = self.config.clone().with_columns(columns);
        self.with_config(config)
    }

    /// The same provider with its statements kept prepared on each connection (`true`, the
    /// default: sqlx's statement cache) or not (`false`: sqlx's `persistent(false)`), for
    /// PostgreSQL behind PgBouncer in transaction mode, where a connection's prepared statements
    /// may belong to another client. sqlx sends an unprepared statement in two exchanges, which
    /// PgBouncer may route to two server connections, so each PostgreSQL statement then runs in
    /// a transaction of its own: two more round trips per operation. With PgBouncer 1.21 or
    /// later and `max_prepared_statements` set, keep the cache instead. A pool for PgBouncer
    /// must not send `extra_float_digits` (`PgConnectOptions::extra_float_digits(None)`) unless
    /// PgBouncer's `ignore_startup_parameters` names it. `tests/pgbouncer.rs` runs the whole
    /// conformance suite through PgBouncer this way.
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_sqlx::SqlxLockProvider) {
    /// let behind_pgbouncer = provider.with_statement_cache(false);
    /// # }
    /// ```
    pub fn with_statement_cache(mut self, cache: bool) -> Self {
        match &mut self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres(b) => b.set_statement_cache(cache),
            #[cfg(feature = "mysql")]
            Backend::MySql(b) => b.set_statement_cache(cache),
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(b) => b.set_statement_cache(cache),
        }
        self
    }

    fn statement_cache(&self) -> bool {
        on_backend!(self, b => b.persistent)
    }

    /// The table and column configuration.
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_sqlx::SqlxLockProvider) {
    /// assert_eq!(provider.config().table, "shedlock");
    /// # }
    /// ```
    pub fn config(&self) -> &LockTableConfig {
        &self.config
    }

    /// The `CREATE TABLE` statement for this provider's table, database and columns (the
    /// same as the driver-specific provider's), for migrations run by other tools.
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_sqlx::SqlxLockProvider) {
    /// println!("{}", provider.create_table_sql());
    /// # }
    /// ```
    pub fn create_table_sql(&self) -> String {
        on_backend!(self, b => b.create_table_sql())
    }

    /// Creates the lock table if it is missing, or adds `fence` and `last_fire` to a table
    /// made by ShedLock's DDL, then the operations tables next to it (`<table>_instances`,
    /// `<table>_runs`, `<table>_control`: registry, history, pause and trigger requests) if
    /// missing; safe from many instances at once, and against instances of the driver-specific
    /// providers starting at the same time.
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_sqlx::SqlxLockProvider) -> Result<(), lock_core::LockError> {
    /// use lock_cluster::ClusterProvider;
    /// provider.ensure_schema().await?;
    /// provider.cluster().expect("the sqlx provider keeps operations tables").check().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ensure_schema(&self) -> Result<(), LockError> {
        on_backend!(self, b => b.ensure_schema().await)?;
        on_backend!(self, b => crate::operations::ensure(b.operations.as_deref(), &self.config).await)
    }

    /// Looks at the lock table and says what it supports: [`TableShape::Full`], or
    /// [`TableShape::ShedLockOnly`] (exclusion only, until [`ensure_schema`](Self::ensure_schema)).
    /// Errors: [`LockError::TableMissing`] with the DDL to run, [`LockError::InvalidConfiguration`]
    /// naming each problem of a table that would misbehave and the `ALTER TABLE` that fixes it.
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_sqlx::SqlxLockProvider) -> Result<(), lock_core::LockError> {
    /// println!("{:?}", provider.check_schema().await?);
    /// # Ok(()) }
    /// ```
    pub async fn check_schema(&self) -> Result<TableShape, LockError> {
        match &self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres(b) => b.check_schema().await,
            #[cfg(feature = "mysql")]
            Backend::MySql(b) => Ok(if b.check_schema().await?.extended {
                TableShape::Full
            } else {
                TableShape::ShedLockOnly
            }),
            // As `lock-provider-sqlite`: the statements need every column, so a table either
            // works in full (the listing reads every column) or fails with what to run.
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(_) => {
                self.list_locks().await?;
                Ok(TableShape::Full)
            }
        }
    }
}

impl fmt::Debug for SqlxLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlxLockProvider")
            .field("config", &self.config)
            .field("backend", &self.describe())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl LockProvider for SqlxLockProvider {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        validate_lock_name(&request.name)?;
        on_backend!(self, b => b.acquire(request).await)
    }

    /// Decided by the driver-specific provider's batch statements: PostgreSQL's over arrays
    /// (a second for the rows another transaction held, a third for missing rows), MySQL's
    /// set-based statements in one text query and one transaction, SQLite's in one write
    /// transaction.
    async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        // Names repeated, too many, or one: decided one by one, as the contract allows.
        if !batchable(requests, self.max_batch()) {
            return acquire_each(self, requests).await;
        }
        for request in requests {
            validate_lock_name(&request.name)?;
        }
        on_backend!(self, b => b.acquire_many(requests).await)
    }

    /// On PostgreSQL, the first statement's outcomes are told before the second statement waits
    /// for the rows other transactions held; elsewhere every outcome when the batch returns.
    async fn acquire_many_each(
        &self,
        requests: &[LockRequest],
        decided: &(dyn Fn(usize, AcquireOutcome) + Send + Sync),
    ) -> Result<(), LockError> {
        #[cfg(feature = "postgres")]
        if let Backend::Postgres(b) = &self.backend
            && batchable(requests, MAX_PG_BATCH)
        {
            for request in requests {
                validate_lock_name(&request.name)?;
            }
            return b.acquire_batch(requests, decided).await;
        }
        for (at, outcome) in self.acquire_many(requests).await?.into_iter().enumerate() {
            decided(at, outcome);
        }
        Ok(())
    }

    async fn release_many(&self, leases: &[(Lease, Duration)]) -> Result<Vec<bool>, LockError> {
        match leases {
            [] => Ok(Vec::new()),
            [(lease, at_least)] => Ok(vec![self.release(lease, *at_least).await?]),
            _ => {
                let mut released = Vec::with_capacity(leases.len());
                for chunk in leases.chunks(self.max_batch()) {
                    released.extend(on_backend!(self, b => b.release_batch(chunk).await)?);
                }
                Ok(released)
            }
        }
    }

    fn max_batch(&self) -> usize {
        match &self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => MAX_PG_BATCH,
            #[allow(unreachable_patterns)] // Only PostgreSQL built.
            _ => MAX_BATCH,
        }
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        on_backend!(self, b => b.extend(lease, lock_at_most_for).await)
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        on_backend!(self, b => b.release(lease, lock_at_least_for).await)
    }

    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        on_backend!(self, b => b.list_locks().await)
    }

    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        match &self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres(b) => b.read_lock(name).await,
            #[cfg(feature = "mysql")]
            Backend::MySql(b) => b.read_lock(name).await,
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(b) => b.read_lock(name).await,
        }
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        match &self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres(b) => b.change_row("unlock", name, |s| &s.force_unlock).await,
            #[cfg(feature = "mysql")]
            Backend::MySql(b) => b.change_row("unlock", name, |s| s.unlock()).await,
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(b) => b.change_row("unlock", name, |s| &s.force_unlock).await,
        }
    }

    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        match &self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres(b) => b.change_row("reset slot", name, |s| &s.reset_slot).await,
            #[cfg(feature = "mysql")]
            Backend::MySql(b) => b.change_row("reset slot", name, |s| s.reset_slot()).await,
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(b) => b.change_row("reset slot", name, |s| &s.reset_slot).await,
        }
    }

    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        on_backend!(self, b => b.database_time().await)
    }

    /// A MySQL table made by ShedLock's DDL compares names as its collation does.
    async fn names_sharing_a_row(
        &self,
        names: &[&str],
    ) -> Result<Vec<(String, String)>, LockError> {
        match &self.backend {
            #[cfg(feature = "mysql")]
            Backend::MySql(b) => b.names_sharing_a_row(names).await,
            // PostgreSQL and SQLite compare the `text`/`VARCHAR` name byte for byte.
            #[allow(unreachable_patterns)] // with the mysql feature alone
            _ => {
                let _ = names;
                Ok(Vec::new())
            }
        }
    }

    /// A table made by ShedLock's DDL has no `last_fire`: refused, with the `ALTER TABLE`.
    /// (SQLite's statements need every column, so such a table fails its first statement.)
    async fn check_once_per_slot(&self) -> Result<(), LockError> {
        if self.check_schema().await? == TableShape::Full {
            return Ok(());
        }
        match &self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres(b) => Err(lock_sql::sql::no_last_fire(
                &b.table.display,
                &lock_sql::sql::postgres::add_extension_columns(&b.table),
            )),
            #[cfg(feature = "mysql")]
            Backend::MySql(b) => {
                use lock_sql::sql::mysql::Column;
                let alter = b.table.migration_ddl(&[Column::Fence, Column::LastFire]);
                let alter = alter.unwrap_or_default();
                Err(lock_sql::sql::no_last_fire(&b.table.display(), &alter))
            }
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(_) => Ok(()),
        }
    }

    fn describe(&self) -> String {
        on_backend!(self, b => b.describe())
    }
}

impl ClusterProvider for SqlxLockProvider {
    fn cluster(&self) -> Option<&dyn Cluster> {
        on_backend!(self, b => b.operations.as_deref().map(|o| o as &dyn Cluster))
    }
}

/// `url` without its `statement_cache` parameter, and the parameter's value (`true` without
/// it): the PostgreSQL provider's name for it, which sqlx itself does not know.
#[cfg(feature = "postgres")]
fn take_statement_cache(url: &str) -> Result<(String, bool), LockError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), true));
    };
    let mut cache = true;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        match pair.split_once('=') {
            Some(("statement_cache", value)) => {
                cache = value.parse().map_err(|_| {
                    LockError::InvalidConfiguration(format!(
                        "statement_cache={value:?} in the URL: expected true or false"
                    ))
                })?;
            }
            _ => kept.push(pair),
        }
    }
    Ok(if kept.is_empty() {
        (base.to_owned(), cache)
    } else {
        (format!("{base}?{}", kept.join("&")), cache)
    })
}

#[cfg(all(test, feature = "postgres"))]
mod tests {
    use super::take_statement_cache;

    #[test]
    fn statement_cache_is_read_and_taken_out_of_the_url() {
        let plain = "postgres://app@db/app";
        assert_eq!(
            take_statement_cache(plain).unwrap(),
            (plain.to_owned(), true)
        );
        assert_eq!(
            take_statement_cache("postgres://app@db:6432/app?statement_cache=false").unwrap(),
            ("postgres://app@db:6432/app".to_owned(), false)
        );
        assert_eq!(
            take_statement_cache("postgres://db/app?sslmode=require&statement_cache=false")
                .unwrap(),
            ("postgres://db/app?sslmode=require".to_owned(), false)
        );
        assert!(take_statement_cache("postgres://db/app?statement_cache=maybe").is_err());
    }
}
