//! [`MySqlLockProvider`]: the [`LockProvider`] on a MySQL or MariaDB table.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_core::kit::{ColumnNames, fence_from_sql};
use lock_core::{
    AcquireOutcome, Lease, LockError, LockProvider, LockRecord, LockRequest, validate_lock_name,
};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Pool, TxOpts};

use crate::config::LockTableConfig;
use crate::session::{self, Readiness};
use crate::statements::{RecordRow, Statements};
use crate::table::{COLUMNS_QUERY, Shape, Table};

/// `ER_NO_SUCH_TABLE`.
const NO_SUCH_TABLE: u16 = 1146;
/// `ER_BAD_FIELD_ERROR`: a column was renamed or dropped after the table was inspected.
const BAD_FIELD: u16 = 1054;
/// `ER_DUP_FIELDNAME`: another instance added the column first.
const DUPLICATE_COLUMN: u16 = 1060;
/// How often a table found with ShedLock's four columns only is inspected again, so that a
/// migration run by another instance (`ensure_schema` at its startup) is picked up here too.
const RECHECK_SHEDLOCK_TABLE: Duration = Duration::from_secs(60);

/// A [`LockProvider`] that keeps leases in a MySQL (8.0+) or MariaDB (10.6+) table, with every
/// time taken from the database server's clock.
///
/// The table is ShedLock's (`name`, `lock_until`, `locked_at`, `locked_by`) plus `fence` and
/// `last_fire`; a table made by ShedLock's own DDL works as it is (without fencing and
/// once-per-slot until [`ensure_schema`](Self::ensure_schema) adds the two columns). A
/// steady-state fire costs two round trips, one to acquire and one to release, and a losing
/// acquire writes nothing.
///
/// ```no_run
/// use lock_core::{LockConfiguration, LockOutcome, LockingTaskExecutor};
/// use lock_provider_mysql::MySqlLockProvider;
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), lock_core::LockError> {
/// let provider = MySqlLockProvider::connect("mysql://app:secret@db.internal/app").await?;
/// provider.ensure_schema().await?;
/// let executor = LockingTaskExecutor::new(provider);
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// if let LockOutcome::Executed(()) = executor.execute_with_lock(&config, async { /* work */ }).await? {
///     println!("this instance ran the report");
/// }
/// # Ok(()) }
/// ```
pub struct MySqlLockProvider {
    pool: Pool,
    config: LockTableConfig,
    table: Table,
    /// The statements for the table as last inspected; `None` until the first use, and again
    /// after the table went missing or `ensure_schema` changed it.
    statements: Mutex<Option<Arc<Statements>>>,
    /// Whether the pool's options pin the session time zone; every connection of a pool has
    /// the pool's options, so the first one tells.
    pool_pins_utc: OnceLock<bool>,
    warned_shedlock_only: AtomicBool,
    warned_zone_per_use: AtomicBool,
}

impl fmt::Debug for MySqlLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlLockProvider")
            .field("table", &self.table.display())
            .field("columns", &self.config.columns)
            .finish_non_exhaustive()
    }
}

impl MySqlLockProvider {
    /// A provider on `pool`, using the table `shedlock` in the connection's database.
    ///
    /// The pool is best built with [`pool_options`](Self::pool_options), as
    /// [`connect`](Self::connect) does. Any pool works: on connections whose options do not pin
    /// the session time zone to UTC, the provider sets it at each use when the table has
    /// `TIMESTAMP` columns (one more round trip).
    ///
    /// ```no_run
    /// use lock_provider_mysql::{MySqlLockProvider, mysql_async};
    ///
    /// # fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let opts = mysql_async::Opts::from_url("mysql://app@db.internal/app")?;
    /// let pool = mysql_async::Pool::new(MySqlLockProvider::pool_options(opts));
    /// let provider = MySqlLockProvider::new(pool);
    /// # Ok(()) }
    /// ```
    pub fn new(pool: Pool) -> Self {
        Self::with_config(pool, LockTableConfig::default())
            .expect("the default table and column names are valid identifiers")
    }

    /// A provider on `pool` with the given table and columns, refused if any name is not a
    /// plain identifier.
    ///
    /// ```
    /// # fn run(pool: lock_provider_mysql::mysql_async::Pool) -> Result<(), lock_core::LockError> {
    /// use lock_core::ColumnNames;
    /// use lock_provider_mysql::{LockTableConfig, MySqlLockProvider};
    ///
    /// let config = LockTableConfig::default()
    ///     .with_table("ops.job_locks")
    ///     .with_columns(ColumnNames { locked_by: "owner".into(), ..ColumnNames::default() });
    /// let provider = MySqlLockProvider::with_config(pool, config)?;
    /// # Ok(()) }
    /// ```
    pub fn with_config(pool: Pool, config: LockTableConfig) -> Result<Self, LockError> {
        let table = Table::new(&config)?;
        Ok(MySqlLockProvider {
            pool,
            config,
            table,
            statements: Mutex::new(None),
            pool_pins_utc: OnceLock::new(),
            warned_shedlock_only: AtomicBool::new(false),
            warned_zone_per_use: AtomicBool::new(false),
        })
    }

    /// Connects to `url` (`mysql://user:password@host:port/database`, with mysql_async's URL
    /// parameters) with a pool built by [`pool_options`](Self::pool_options), and checks that a
    /// connection can be opened, so that a wrong URL or an unreachable server fails here rather
    /// than at the first fire.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let provider = lock_provider_mysql::MySqlLockProvider::connect("mysql://root@127.0.0.1:3306/test").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        let opts = Opts::from_url(url)
            .map_err(|e| LockError::InvalidConfiguration(format!("MySQL connection URL: {e}")))?;
        let server = format!("mysql server {}:{}", opts.ip_or_hostname(), opts.tcp_port());
        let pool = Pool::new(Self::pool_options(opts));
        let conn = pool
            .get_conn()
            .await
            .map_err(|e| LockError::provider("connect", "", server, e))?;
        drop(conn);
        Ok(Self::new(pool))
    }

    /// The connection options the provider wants, added to `opts`: the session time zone pinned
    /// to UTC by a `setup` statement (kept after the ones `opts` has), and pooled connections
    /// not reset on return, so that prepared statements are prepared once per connection.
    ///
    /// ```
    /// use lock_provider_mysql::{MySqlLockProvider, mysql_async::Opts};
    ///
    /// let opts = Opts::from_url("mysql://app@db.internal/app").unwrap();
    /// let opts = Opts::from(MySqlLockProvider::pool_options(opts));
    /// assert_eq!(opts.setup(), ["SET time_zone = '+00:00'"]);
    /// assert!(!opts.pool_opts().reset_connection());
    /// ```
    pub fn pool_options(opts: impl Into<Opts>) -> OptsBuilder {
        session::pool_options(opts.into())
    }

    /// Uses `table` (`name` or `database.name`) instead of `shedlock`. The name is checked
    /// here: only ASCII letters, digits and `_` are accepted, so it can never carry SQL.
    ///
    /// ```
    /// # fn run(pool: lock_provider_mysql::mysql_async::Pool) -> Result<(), lock_core::LockError> {
    /// use lock_provider_mysql::MySqlLockProvider;
    /// let provider = MySqlLockProvider::new(pool.clone()).with_table("ops.job_locks")?;
    /// assert!(MySqlLockProvider::new(pool).with_table("locks; DROP TABLE users").is_err());
    /// # Ok(()) }
    /// ```
    pub fn with_table(self, table: &str) -> Result<Self, LockError> {
        let config = self.config.clone().with_table(table);
        self.with(config)
    }

    /// Uses other column names, for a table whose columns were renamed. Checked like
    /// [`with_table`](Self::with_table).
    ///
    /// ```
    /// # fn run(pool: lock_provider_mysql::mysql_async::Pool) -> Result<(), lock_core::LockError> {
    /// use lock_core::ColumnNames;
    /// use lock_provider_mysql::MySqlLockProvider;
    /// let columns = ColumnNames { locked_by: "owner".into(), ..ColumnNames::default() };
    /// let provider = MySqlLockProvider::new(pool).with_columns(columns)?;
    /// # Ok(()) }
    /// ```
    pub fn with_columns(self, columns: ColumnNames) -> Result<Self, LockError> {
        let config = self.config.clone().with_columns(columns);
        self.with(config)
    }

    fn with(self, config: LockTableConfig) -> Result<Self, LockError> {
        Ok(MySqlLockProvider {
            table: Table::new(&config)?,
            config,
            statements: Mutex::new(None),
            ..self
        })
    }

    /// The pool the provider uses, e.g. to close it at shutdown with
    /// [`Pool::disconnect`](mysql_async::Pool::disconnect).
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_mysql::MySqlLockProvider) -> Result<(), lock_provider_mysql::mysql_async::Error> {
    /// provider.pool().clone().disconnect().await?;
    /// # Ok(()) }
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The table and column configuration.
    ///
    /// ```
    /// # fn run(pool: lock_provider_mysql::mysql_async::Pool) {
    /// let provider = lock_provider_mysql::MySqlLockProvider::new(pool);
    /// assert_eq!(provider.config().table, "shedlock");
    /// # }
    /// ```
    pub fn config(&self) -> &LockTableConfig {
        &self.config
    }

    /// The statement that creates the lock table, as [`ensure_schema`](Self::ensure_schema)
    /// runs it, for migration tools.
    ///
    /// ```
    /// # fn run(pool: lock_provider_mysql::mysql_async::Pool) {
    /// let ddl = lock_provider_mysql::MySqlLockProvider::new(pool).create_table_sql();
    /// assert!(ddl.starts_with("CREATE TABLE IF NOT EXISTS `shedlock`"));
    /// # }
    /// ```
    pub fn create_table_sql(&self) -> String {
        self.table.create_ddl()
    }

    /// Creates the lock table if it does not exist, or adds `fence` and `last_fire` to a table
    /// made by ShedLock's DDL. Safe to run from every instance at startup, concurrently.
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_mysql::MySqlLockProvider) -> Result<(), lock_core::LockError> {
    /// provider.ensure_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ensure_schema(&self) -> Result<(), LockError> {
        let mut conn = self.conn("schema", "").await?;
        conn.query_drop(self.table.create_ddl())
            .await
            .map_err(|e| self.error("schema", "", e))?;
        let columns = self.columns(&mut conn).await?;
        let missing = self.table.missing_extension_columns(&columns);
        if let Some(alter) = self.table.migration_ddl(&missing) {
            match conn.query_drop(alter).await {
                Ok(()) => tracing::info!(
                    table = %self.table.display(),
                    "added the fence and last_fire columns to the lock table"
                ),
                // Another instance migrated the table at the same moment.
                Err(mysql_async::Error::Server(e)) if e.code == DUPLICATE_COLUMN => {}
                Err(e) => return Err(self.error("schema", "", e)),
            }
        }
        *self.cached() = None;
        self.statements(&mut conn, "schema", "").await.map(drop)
    }

    /// A connection from the pool, with the statements for the table as it is now.
    async fn session(
        &self,
        operation: &'static str,
        lock: &str,
    ) -> Result<(Conn, Arc<Statements>), LockError> {
        let mut conn = self.conn(operation, lock).await?;
        let statements = self.statements(&mut conn, operation, lock).await?;
        let pins_utc = *self
            .pool_pins_utc
            .get_or_init(|| session::pins_utc(conn.opts()));
        let readiness = session::ready(&mut conn, pins_utc, statements.shape().zone_sensitive)
            .await
            .map_err(|e| self.error(operation, lock, e))?;
        if readiness == Readiness::ZoneSetNow
            && !self.warned_zone_per_use.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                table = %self.table.display(),
                "the lock table has TIMESTAMP columns and the pool does not pin the session time \
                 zone, so each use sets it (one more round trip); build the pool with \
                 MySqlLockProvider::pool_options, or make the time columns DATETIME(3)"
            );
        }
        Ok((conn, statements))
    }

    async fn conn(&self, operation: &'static str, lock: &str) -> Result<Conn, LockError> {
        self.pool
            .get_conn()
            .await
            .map_err(|e| self.error(operation, lock, e))
    }

    fn cached(&self) -> std::sync::MutexGuard<'_, Option<Arc<Statements>>> {
        // The guarded value is replaced whole, so a poisoned lock still holds a consistent one.
        self.statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    async fn statements(
        &self,
        conn: &mut Conn,
        operation: &'static str,
        lock: &str,
    ) -> Result<Arc<Statements>, LockError> {
        if let Some(statements) = self.cached().clone()
            && (statements.shape().extended
                || statements.prepared_at().elapsed() < RECHECK_SHEDLOCK_TABLE)
        {
            return Ok(statements);
        }
        let shape = match self.inspect(conn).await {
            Ok(Some(shape)) => shape,
            Ok(None) => return Err(self.table_missing(None)),
            Err(LockError::Provider { source, .. }) => {
                return Err(LockError::Provider {
                    operation,
                    lock: lock.to_owned(),
                    backend: self.describe(),
                    source,
                });
            }
            Err(other) => return Err(other),
        };
        if !shape.extended && !self.warned_shedlock_only.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                table = %self.table.display(),
                "the lock table has only ShedLock's four columns: leases exclude each other, but \
                 fences are 0, a stale holder is told apart by locked_by only, and a slot may run \
                 twice; run ensure_schema() to add the fence and last_fire columns"
            );
        }
        let statements = Arc::new(Statements::new(&self.table, shape));
        *self.cached() = Some(statements.clone());
        Ok(statements)
    }

    /// The table's columns and their types; none when it does not exist.
    async fn columns(&self, conn: &mut Conn) -> Result<Vec<(String, String)>, LockError> {
        conn.exec(COLUMNS_QUERY, (self.table.schema(), self.table.name()))
            .await
            .map_err(|e| self.error("schema", "", e))
    }

    /// What the table holds, or `None` when it does not exist.
    async fn inspect(&self, conn: &mut Conn) -> Result<Option<Shape>, LockError> {
        let rows = self.columns(conn).await?;
        let shape = self.table.layout_from(&rows)?;
        if shape.is_none() && self.table.schema().is_none() {
            let database: Option<Option<String>> = conn
                .query_first("SELECT DATABASE()")
                .await
                .map_err(|e| self.error("schema", "", e))?;
            if database.flatten().is_none() {
                return Err(LockError::InvalidConfiguration(format!(
                    "no database selected for lock table {}: name one in the connection URL \
                     (mysql://host/database) or qualify the table (`database.{}`)",
                    self.table.name(),
                    self.table.name()
                )));
            }
        }
        Ok(shape)
    }

    fn table_missing(&self, source: Option<mysql_async::Error>) -> LockError {
        *self.cached() = None;
        LockError::TableMissing {
            table: self.table.display(),
            ddl: format!("{};", self.table.create_ddl()),
            source: source.map(Into::into),
        }
    }

    /// Wraps a driver error with the operation, lock and table it concerns.
    fn error(&self, operation: &'static str, lock: &str, error: mysql_async::Error) -> LockError {
        if let mysql_async::Error::Server(server) = &error {
            match server.code {
                NO_SUCH_TABLE => return self.table_missing(Some(error)),
                // Inspect the table again at the next use, to report what is wrong with it.
                BAD_FIELD => *self.cached() = None,
                _ => {}
            }
        }
        LockError::provider(operation, lock, self.describe(), error)
    }
}

#[async_trait]
impl LockProvider for MySqlLockProvider {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        validate_lock_name(&request.name)?;
        let (mut conn, statements) = self.session("acquire", &request.name).await?;
        let (sql, params) = statements.acquire(request);
        conn.exec_drop(sql, params)
            .await
            .map_err(|e| self.error("acquire", &request.name, e))?;
        let (id, affected) = (conn.last_insert_id().unwrap_or(0), conn.affected_rows());
        statements
            .acquire_outcome(request, id, affected)
            .ok_or_else(|| {
                LockError::provider(
                    "acquire",
                    &*request.name,
                    self.describe(),
                    format!(
                        "unexpected answer to the acquire statement (last_insert_id {id}, \
                         affected rows {affected}); the lock was not taken"
                    ),
                )
            })
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        let (mut conn, statements) = self.session("extend", lease.name()).await?;
        let (sql, params) = statements.extend(lease, lock_at_most_for);
        conn.exec_drop(sql, params)
            .await
            .map_err(|e| self.error("extend", lease.name(), e))?;
        Ok(conn.last_insert_id() == Some(1))
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        let (mut conn, statements) = self.session("release", lease.name()).await?;
        let (sql, params) = statements.release(lease, lock_at_least_for);
        conn.exec_drop(sql, params)
            .await
            .map_err(|e| self.error("release", lease.name(), e))?;
        Ok(conn.last_insert_id() == Some(1))
    }

    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        let (mut conn, statements) = self.session("list", "").await?;
        let rows: Vec<RecordRow> = conn
            .exec(statements.list(), ())
            .await
            .map_err(|e| self.error("list", "", e))?;
        // Sorted here, by bytes: the table's collation may order names differently.
        let mut records: Vec<LockRecord> = rows.into_iter().map(record).collect();
        records.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(records)
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let (mut conn, statements) = self.session("unlock", name).await?;
        let wrap = |e| self.error("unlock", name, e);
        // The row is read under its lock, so the record returned is the one that was ended.
        let mut tx = conn
            .start_transaction(TxOpts::default())
            .await
            .map_err(wrap)?;
        let before: Option<RecordRow> = tx
            .exec_first(statements.select_for_unlock(), (name,))
            .await
            .map_err(wrap)?;
        if before.is_some() {
            tx.exec_drop(statements.unlock(), (name,))
                .await
                .map_err(wrap)?;
        }
        tx.commit().await.map_err(wrap)?;
        Ok(before.map(record))
    }

    fn describe(&self) -> String {
        format!("mysql table {}", self.table.display())
    }
}

fn record(row: RecordRow) -> LockRecord {
    let (name, lock_until, locked_at, locked_by, fence, last_fire, held) = row;
    LockRecord {
        name,
        lock_until: utc(lock_until),
        locked_at: utc(locked_at),
        locked_by,
        fence: fence_from_sql(fence),
        last_fire: last_fire.map(utc),
        held,
    }
}

fn utc(naive: chrono::NaiveDateTime) -> DateTime<Utc> {
    naive.and_utc()
}
