//! [`MySqlLockProvider`]: the [`LockProvider`] on a MySQL or MariaDB table.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_cluster::{Cluster, ClusterProvider};
use lock_core::batching::{acquire_each, batchable};
use lock_core::{
    AcquireOutcome, Lease, LockError, LockProvider, LockRecord, LockRequest, validate_lock_name,
};
use lock_sql::{ColumnNames, fence_from_sql};
use lock_sql::{ConnectError, ConnectFailure};
use mysql_async::prelude::Queryable;
use mysql_async::{Opts, OptsBuilder, Pool, TxOpts};

use crate::config::LockTableConfig;
use crate::operations::MySqlOperations;
use crate::session::{DEFAULT_CONNECT_TIMEOUT, Session, connect_timed_out, pool_options};
use crate::statements::{self as sql, RecordRow, Statements};
use crate::table::{Column, Table};

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
    config: LockTableConfig,
    pub(crate) session: Session,
    /// The operations tables next to the lock table (`operations.rs`).
    operations: Option<MySqlOperations>,
}

impl fmt::Debug for MySqlLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MySqlLockProvider")
            .field("table", &self.session.table.display())
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
    /// use lock_provider_mysql::ColumnNames;
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
        let operations = config
            .resolve(lock_sql::IdentifierStyle::MYSQL)
            .ok()
            .and_then(|resolved| MySqlOperations::new(pool.clone(), &resolved));
        Ok(MySqlLockProvider {
            session: Session::new(pool, table),
            config,
            operations,
        })
    }

    /// How long a new connection may take unless [`connect_with_timeout`](Self::connect_with_timeout)
    /// or [`with_connect_timeout`](Self::with_connect_timeout) says otherwise: 10 s, as
    /// PostgreSQL's provider.
    ///
    /// ```
    /// use lock_provider_mysql::MySqlLockProvider;
    /// assert_eq!(MySqlLockProvider::DEFAULT_CONNECT_TIMEOUT.as_secs(), 10);
    /// ```
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = DEFAULT_CONNECT_TIMEOUT;

    /// Connects to `url` (`mysql://user:password@host:port/database`, with mysql_async's URL
    /// parameters and the MySQL client's `ssl-mode` and `ssl-ca`: see
    /// [`opts_from_url`](Self::opts_from_url)) with a pool built by
    /// [`pool_options`](Self::pool_options), and checks that a connection can be opened, so that a wrong URL or an unreachable server fails here rather
    /// than at the first fire. A server that does not answer within
    /// [`DEFAULT_CONNECT_TIMEOUT`](Self::DEFAULT_CONNECT_TIMEOUT) is an error too (a
    /// black-holed host would otherwise hang for the system's TCP timeout, about two minutes);
    /// the same limit applies to every connection the pool opens later.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let provider = lock_provider_mysql::MySqlLockProvider::connect("mysql://root@127.0.0.1:3306/test").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        Self::connect_with_timeout(url, DEFAULT_CONNECT_TIMEOUT).await
    }

    /// [`connect`](Self::connect) with another connect timeout.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// use std::time::Duration;
    /// let provider = lock_provider_mysql::MySqlLockProvider::connect_with_timeout(
    ///     "mysql://root@127.0.0.1:3306/test",
    ///     Duration::from_secs(3),
    /// )
    /// .await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_with_timeout(url: &str, timeout: Duration) -> Result<Self, LockError> {
        let opts = Self::opts_from_url(url)?;
        let endpoint = format!("{}:{}", opts.ip_or_hostname(), opts.tcp_port());
        let server = format!("mysql server {endpoint}");
        let pool = Pool::new(Self::pool_options(opts));
        match tokio::time::timeout(timeout, pool.get_conn()).await {
            Ok(Ok(conn)) => drop(conn),
            Ok(Err(e)) => {
                return Err(match crate::session::unreachable(Some(&endpoint), e) {
                    Ok(unreachable) => LockError::provider("connect", "", server, unreachable),
                    Err(e) => LockError::provider("connect", "", server, e),
                });
            }
            Err(_) => {
                let timed_out = ConnectError::new(
                    "MySQL",
                    endpoint,
                    ConnectFailure::TimedOut,
                    connect_timed_out(timeout),
                );
                return Err(LockError::provider("connect", "", server, timed_out));
            }
        }
        let mut provider = Self::new(pool).with_connect_timeout(timeout);
        provider.session.endpoint = Some(endpoint);
        Ok(provider)
    }

    /// The driver's options for `url`, as [`connect`](Self::connect) reads it: mysql_async's
    /// URL parameters (its own TLS ones, `require_ssl`, `verify_ca`, `verify_identity`,
    /// `built_in_roots`, among them), plus
    /// - `ssl-mode=DISABLED|REQUIRED|VERIFY_CA|VERIFY_IDENTITY` (see [`SslMode`](crate::SslMode));
    /// - `ssl-ca=/path/to/ca.pem`: the root certificates to trust instead of the built-in ones,
    ///   read here so that a missing file fails now.
    ///
    /// For root certificates held in memory, build [`SslOpts`](mysql_async::SslOpts) yourself
    /// (`with_root_certs(vec![pem.into()])`) and the pool with [`new`](Self::new).
    ///
    /// ```
    /// use lock_provider_mysql::MySqlLockProvider;
    ///
    /// let opts = MySqlLockProvider::opts_from_url("mysql://app@db.internal/app?ssl-mode=REQUIRED")?;
    /// assert!(opts.ssl_opts().is_some());
    /// let plain = MySqlLockProvider::opts_from_url("mysql://app@db.internal/app")?;
    /// assert!(plain.ssl_opts().is_none());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn opts_from_url(url: &str) -> Result<Opts, LockError> {
        crate::connection::opts_from_url(url)
    }

    /// Limits how long taking a connection from the pool may take, opening a new one included
    /// (default [`DEFAULT_CONNECT_TIMEOUT`](Self::DEFAULT_CONNECT_TIMEOUT)). A lock operation
    /// that waits longer fails with a [`LockError::Provider`] whose source is a
    /// [`TimedOut`](std::io::ErrorKind::TimedOut) I/O error.
    ///
    /// ```
    /// # fn run(pool: lock_provider_mysql::mysql_async::Pool) {
    /// use std::time::Duration;
    /// let provider = lock_provider_mysql::MySqlLockProvider::new(pool)
    ///     .with_connect_timeout(Duration::from_secs(3));
    /// # }
    /// ```
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.session.connect_timeout = timeout;
        self
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
        pool_options(opts.into())
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
    /// use lock_provider_mysql::ColumnNames;
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
        let timeout = self.session.connect_timeout;
        Ok(Self::with_config(self.session.pool, config)?.with_connect_timeout(timeout))
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
        &self.session.pool
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
        self.session.table.create_ddl()
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
        self.session.ensure_table().await?;
        crate::operations::ensure(self.operations.as_ref(), &self.config).await
    }

    /// Runs the statement `change` picks on the row `name`, read first under the row's lock:
    /// the record returned is the row as it was before (force-unlock, reset-slot).
    async fn change_row(
        &self,
        operation: &'static str,
        name: &str,
        change: fn(&Statements) -> &str,
    ) -> Result<Option<LockRecord>, LockError> {
        let before: Option<RecordRow> = self
            .session
            .run(operation, name, |mut conn, statements| {
                Box::pin(async move {
                    let mut tx = conn.start_transaction(TxOpts::default()).await?;
                    let before: Option<RecordRow> = tx
                        .exec_first(statements.select_for_unlock(), (name,))
                        .await?
                        // By bytes: a case-insensitive collation also finds `u_live` for
                        // `U_LIVE `, which an operator's unlock must not end.
                        .filter(|row: &RecordRow| row.0 == name);
                    if before.is_some() {
                        tx.exec_drop(change(&statements), (name,)).await?;
                    }
                    tx.commit().await?;
                    Ok(before)
                })
            })
            .await?;
        Ok(before.map(record))
    }
}

#[async_trait]
impl LockProvider for MySqlLockProvider {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        validate_lock_name(&request.name)?;
        let (outcome, id, affected) = self
            .session
            .run("acquire", &request.name, |mut conn, statements| {
                Box::pin(async move {
                    let (text, params) = statements.acquire(request);
                    conn.exec_drop(text, sql::params(params)).await?;
                    let id = conn.last_insert_id().unwrap_or(0);
                    let affected = conn.affected_rows();
                    Ok((
                        statements.acquire_outcome(request, id, affected),
                        id,
                        affected,
                    ))
                })
            })
            .await?;
        outcome.ok_or_else(|| {
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

    /// One text query, one transaction: the rows locked in name order, each request decided by
    /// the acquire statement's own expression in one `SELECT`, the grants written by one
    /// `UPDATE` (see `lock_sql::sql::mysql::Statements::acquire_batch`).
    async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        // Names repeated, too many, or one: decided one by one, as the contract allows.
        if !batchable(requests, crate::batch::MAX_BATCH) {
            return acquire_each(self, requests).await;
        }
        self.acquire_batch(requests).await
    }

    async fn release_many(&self, leases: &[(Lease, Duration)]) -> Result<Vec<bool>, LockError> {
        match leases {
            [] => Ok(Vec::new()),
            [(lease, at_least)] => Ok(vec![self.release(lease, *at_least).await?]),
            _ => {
                let mut released = Vec::with_capacity(leases.len());
                for chunk in leases.chunks(crate::batch::MAX_BATCH) {
                    released.extend(self.release_batch(chunk).await?);
                }
                Ok(released)
            }
        }
    }

    fn max_batch(&self) -> usize {
        crate::batch::MAX_BATCH
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        self.session
            .run("extend", lease.name(), |mut conn, statements| {
                Box::pin(async move {
                    let (text, params) = statements.extend(lease, lock_at_most_for);
                    conn.exec_drop(text, sql::params(params)).await?;
                    Ok(conn.last_insert_id() == Some(1))
                })
            })
            .await
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        self.session
            .run("release", lease.name(), |mut conn, statements| {
                Box::pin(async move {
                    let (text, params) = statements.release(lease, lock_at_least_for);
                    conn.exec_drop(text, sql::params(params)).await?;
                    Ok(conn.last_insert_id() == Some(1))
                })
            })
            .await
    }

    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        let rows: Vec<RecordRow> = self
            .session
            .run("list", "", |mut conn, statements| {
                Box::pin(async move { conn.exec(statements.list(), ()).await })
            })
            .await?;
        // Sorted here, by bytes: the table's collation may order names differently.
        let mut records: Vec<LockRecord> = rows.into_iter().map(record).collect();
        records.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(records)
    }

    /// One lookup on the primary key, not the trait's whole-table default (read at each
    /// misfire check and after a lost acquire reply).
    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let owned = name.to_owned();
        let rows: Vec<RecordRow> = self
            .session
            .run("read", name, move |mut conn, statements| {
                let owned = owned.clone();
                Box::pin(async move { conn.exec(statements.read(), (owned,)).await })
            })
            .await?;
        // By bytes: a case-insensitive collation also matches names differing in case.
        Ok(rows.into_iter().map(record).find(|r| r.name == name))
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.change_row("unlock", name, Statements::unlock).await
    }

    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.change_row("reset slot", name, Statements::reset_slot)
            .await
    }

    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        let now: Option<chrono::NaiveDateTime> = self
            .session
            .run("now", "", |mut conn, _| {
                Box::pin(async move { conn.query_first(crate::statements::NOW_PRECISE).await })
            })
            .await?;
        now.map(utc).ok_or_else(|| {
            LockError::provider(
                "now",
                "",
                self.describe(),
                "SELECT UTC_TIMESTAMP(6) returned no row",
            )
        })
    }

    /// A table made by ShedLock's DDL compares names as its collation does.
    async fn names_sharing_a_row(
        &self,
        names: &[&str],
    ) -> Result<Vec<(String, String)>, LockError> {
        self.session.names_sharing_a_row(names).await
    }

    /// A table made by ShedLock's DDL has no `last_fire`: refused, with the `ALTER TABLE`.
    async fn check_once_per_slot(&self) -> Result<(), LockError> {
        if self.session.shape_now("check").await?.extended {
            return Ok(());
        }
        let table = &self.session.table;
        let alter = table
            .migration_ddl(&[Column::Fence, Column::LastFire])
            .unwrap_or_default();
        Err(lock_sql::sql::no_last_fire(&table.display(), &alter))
    }

    fn describe(&self) -> String {
        self.session.describe()
    }
}

impl ClusterProvider for MySqlLockProvider {
    fn cluster(&self) -> Option<&dyn Cluster> {
        self.operations.as_ref().map(|o| o as _)
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
