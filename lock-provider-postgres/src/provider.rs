//! `PostgresLockProvider`: the `LockProvider` contract on a deadpool-postgres pool.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use lock_core::{
    AcquireOutcome, ColumnNames, Lease, LockError, LockProvider, LockRecord, LockRequest, Refusal,
    RefusalReason, validate_lock_name,
};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{NoTls, Row};

use crate::config::{LockTableConfig, ResolvedTable};
use crate::schema::{self, Found};
use crate::sql::{self, Shape, Statements};

/// How many times an operation is tried again after finding its connection dead or its cached
/// statement stale (see [`Stale`]).
///
/// Retrying after a dead connection is safe for every statement even when the lost attempt
/// might have executed: release and extend are idempotent for one lease, and an acquire that
/// did commit makes the retry see the lock held (by us), so the fire is skipped and the lease
/// runs out at `lock_at_most_for`, as if the holder had died; exclusion is never broken. A
/// stale statement failed before executing. Without the retry, the first fire after a database
/// restart, a killed backend or a recreated table would be skipped for nothing.
const RETRIES: usize = 2;

/// Leases longer than this are cut to it, so that `now + lease` stays a valid timestamp.
const MAX_LEASE: Duration = Duration::from_secs(1000 * 365 * 24 * 3600);

/// Locks in a PostgreSQL table shared with ShedLock, on a [`deadpool_postgres::Pool`].
///
/// - **Database time**: every `now` is the server's `timezone('utc', CURRENT_TIMESTAMP)`,
///   durations travel as intervals; a client whose clock is wrong can neither steal nor keep a
///   lock longer.
/// - **One round trip** per acquire, release and extend; statements are prepared once per
///   pooled connection. A losing acquire writes nothing; a row deleted by hand is recreated by
///   the next acquire.
/// - **Fencing and once-per-slot** through the `fence` and `last_fire` columns, which
///   [`ensure_schema`](Self::ensure_schema) adds to a ShedLock table. Without them the provider
///   still gives exclusion (fence 0, slots ignored) and logs a warning once.
///
/// ```no_run
/// use lock_provider_postgres::PostgresLockProvider;
///
/// # async fn run() -> Result<(), lock_core::LockError> {
/// let provider = PostgresLockProvider::connect("postgres://app@db.internal/app")
///     .await?
///     .with_table("ops.shedlock")?;
/// provider.ensure_schema().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresLockProvider {
    pool: Pool,
    config: LockTableConfig,
    table: Arc<ResolvedTable>,
    shape: Arc<ShapeCache>,
}

/// The statements for the table as last found, shared by clones of a provider.
#[derive(Default)]
struct ShapeCache {
    statements: Mutex<Option<Arc<Statements>>>,
    warned: AtomicBool,
}

impl ShapeCache {
    fn get(&self) -> Option<Arc<Statements>> {
        self.lock().clone()
    }

    fn set(&self, statements: Arc<Statements>) {
        *self.lock() = Some(statements);
    }

    fn clear(&self) {
        *self.lock() = None;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<Statements>>> {
        // Only ever holds a finished value; a panic elsewhere cannot leave it half-written.
        self.statements
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// What the lock table supports, as found by [`PostgresLockProvider::check_schema`].
///
/// ```no_run
/// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
/// use lock_provider_postgres::TableShape;
/// match provider.check_schema().await? {
///     TableShape::Full => {}
///     TableShape::ShedLockOnly => println!("run ensure_schema() to enable fencing"),
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableShape {
    /// All six columns: exclusion, fencing and once-per-slot.
    Full,
    /// Only ShedLock's four columns: exclusion only; leases carry fence 0 and slots are
    /// ignored until [`PostgresLockProvider::ensure_schema`] adds `fence` and `last_fire`.
    ShedLockOnly,
}

/// The exact SQL the provider runs on its table, for operators (to `EXPLAIN` it, or to grant
/// precisely what it needs) and for benchmarks that issue the same statements by hand.
///
/// Parameters: acquire `$1` name (text), `$2` lock_at_most_for in ms (int8), `$3` locked_by
/// (text), `$4` slot (timestamp, UTC, or NULL); release `$1` name, `$2` locked_by, `$3` fence
/// (int8), `$4` lock_at_least_for in ms; extend like release with `$4` lock_at_most_for in ms;
/// force unlock `$1` name; list none.
///
/// ```no_run
/// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
/// let statements = provider.statements().await?;
/// println!("{}\n{}", statements.acquire, statements.release);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatements {
    /// The shape of the table these statements were built for.
    pub shape: TableShape,
    /// Acquire: one row while the lock's row exists (`granted` fence or NULL, then the row as
    /// it was), none when it does not.
    pub acquire: String,
    /// Create the missing row (same parameters as `acquire`); returns the fence, or nothing
    /// when another instance created it first.
    pub create: String,
    /// Release, with asynchronous commit of its own transaction.
    pub release: String,
    /// Extend.
    pub extend: String,
    /// Every row, sorted by name.
    pub list: String,
    /// Force unlock, returning the row as it was.
    pub force_unlock: String,
}

/// A failure inside one attempt: the database's (maybe worth a retry) or already final.
enum Failure {
    Db(tokio_postgres::Error),
    Lock(LockError),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        Failure::Db(e)
    }
}

/// Rows or a row count, depending on the statement.
enum Reply {
    Rows(Vec<Row>),
    Count(u64),
}

impl PostgresLockProvider {
    /// A provider on `pool` using the table `shedlock` with ShedLock's column names.
    ///
    /// Nothing is sent to the database yet; the table is looked at on first use (or by
    /// [`check_schema`](Self::check_schema) / [`ensure_schema`](Self::ensure_schema)).
    ///
    /// ```no_run
    /// use lock_provider_postgres::{deadpool_postgres, PostgresLockProvider};
    ///
    /// let mut config = deadpool_postgres::Config::new();
    /// config.url = Some("postgres://app@localhost/app".into());
    /// let pool = config
    ///     .create_pool(Some(deadpool_postgres::Runtime::Tokio1), tokio_postgres::NoTls)
    ///     .unwrap();
    /// let provider = PostgresLockProvider::new(pool);
    /// ```
    pub fn new(pool: Pool) -> Self {
        Self::with_config(pool, LockTableConfig::default())
            .expect("the default lock table configuration is valid")
    }

    /// A provider on `pool` with the given table and columns, refused if any name is not a
    /// plain identifier.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// use lock_core::ColumnNames;
    /// use lock_provider_postgres::{LockTableConfig, PostgresLockProvider};
    ///
    /// let config = LockTableConfig {
    ///     table: "ops.job_locks".into(),
    ///     columns: ColumnNames { locked_by: "owner".into(), ..ColumnNames::default() },
    /// };
    /// let provider = PostgresLockProvider::with_config(pool(), config)?;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_config(pool: Pool, config: LockTableConfig) -> Result<Self, LockError> {
        let table = Arc::new(config.resolve()?);
        Ok(PostgresLockProvider {
            pool,
            config,
            table,
            shape: Arc::default(),
        })
    }

    /// Connects to `url` (`postgres://user:password@host:port/database?...`) with a new pool
    /// (no TLS, deadpool's default size, a 10 s connect timeout unless the URL sets one) and
    /// checks that the server answers, so that a wrong URL fails at start-up rather than at the
    /// first fire.
    ///
    /// The table is not looked at yet (a `.with_table(..)` may follow): call
    /// [`ensure_schema`](Self::ensure_schema) or [`check_schema`](Self::check_schema) at
    /// start-up; otherwise the first lock operation does it. An unreachable server is a
    /// [`LockError::Provider`] (operation `connect`) with the driver's error as source. For TLS
    /// or pool tuning, build the pool yourself and use [`new`](Self::new).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let provider =
    ///     lock_provider_postgres::PostgresLockProvider::connect("postgres://app@localhost/app").await?;
    /// provider.ensure_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        let mut pg: tokio_postgres::Config = url.parse().map_err(|e| {
            // The driver's message never repeats the URL, so no password ends up in logs.
            LockError::InvalidConfiguration(format!("PostgreSQL connection URL: {e}"))
        })?;
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(Duration::from_secs(10));
        }
        let manager = Manager::from_config(
            pg,
            NoTls,
            ManagerConfig {
                // A dead connection is dropped at checkout by `is_closed`; a stale one that is
                // not yet known dead is handled by the provider's retry, so no probe query per
                // checkout (which would double the round trips of every fire).
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .build()
            .map_err(|e| LockError::provider("connect", "", "postgres", e))?;
        let provider = Self::new(pool);
        // Fail fast, and as a connect error, when the server cannot be reached; the connection
        // stays in the pool for the first fire.
        drop(provider.client("connect", "").await?);
        Ok(provider)
    }

    /// The same provider on another table (`table` or `schema.table`), refused if the name is
    /// not a plain identifier.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// use lock_provider_postgres::PostgresLockProvider;
    ///
    /// let provider = PostgresLockProvider::new(pool()).with_table("ops.shedlock")?;
    /// assert!(PostgresLockProvider::new(pool()).with_table("locks; DROP TABLE users").is_err());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_table(self, table: impl Into<String>) -> Result<Self, LockError> {
        let config = LockTableConfig {
            table: table.into(),
            ..self.config
        };
        Self::with_config(self.pool, config)
    }

    /// The same provider with other column names, refused if a name is not a plain identifier
    /// or two are the same.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// use lock_core::ColumnNames;
    /// use lock_provider_postgres::PostgresLockProvider;
    ///
    /// let columns = ColumnNames { name: "lock_name".into(), ..ColumnNames::default() };
    /// let provider = PostgresLockProvider::new(pool()).with_columns(columns)?;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_columns(self, columns: ColumnNames) -> Result<Self, LockError> {
        let config = LockTableConfig {
            columns,
            ..self.config
        };
        Self::with_config(self.pool, config)
    }

    /// The pool the provider takes its connections from.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// # fn provider() -> lock_provider_postgres::PostgresLockProvider {
    /// #     lock_provider_postgres::PostgresLockProvider::new(pool())
    /// # }
    /// println!("{:?}", provider().pool().status());
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The table and column configuration.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// # fn provider() -> lock_provider_postgres::PostgresLockProvider {
    /// #     lock_provider_postgres::PostgresLockProvider::new(pool())
    /// # }
    /// assert_eq!(provider().config().table, "shedlock");
    /// ```
    pub fn config(&self) -> &LockTableConfig {
        &self.config
    }

    /// The `CREATE TABLE` statement for this provider's table and columns, for migrations run
    /// by other tools.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// # fn provider() -> lock_provider_postgres::PostgresLockProvider {
    /// #     lock_provider_postgres::PostgresLockProvider::new(pool())
    /// # }
    /// println!("{}", provider().create_table_ddl());
    /// ```
    pub fn create_table_ddl(&self) -> String {
        sql::create_table(&self.table)
    }

    /// Creates the lock table if it is missing, or adds `fence` and `last_fire` to a table
    /// made by ShedLock's DDL; does nothing to a table that already has every column. Safe to
    /// call from many instances at once.
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
    /// provider.ensure_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ensure_schema(&self) -> Result<(), LockError> {
        let mut client = self.client("schema", "").await?;
        schema::ensure(&mut client, &self.table)
            .await
            .map_err(|e| self.db_error("schema", "", e))?;
        drop(client);
        self.shape.clear();
        self.check_schema().await.map(|_| ())
    }

    /// Looks at the lock table (one query) and says what it supports. A table without the
    /// extension columns is logged once, at `warn`, with the statements that add them.
    ///
    /// Errors: [`LockError::TableMissing`] (with the DDL to run) when the table does not exist,
    /// [`LockError::InvalidConfiguration`] when a configured column is missing or has the wrong
    /// type, [`LockError::Provider`] when the database cannot be reached.
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
    /// use lock_provider_postgres::TableShape;
    /// if provider.check_schema().await? == TableShape::ShedLockOnly {
    ///     provider.ensure_schema().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check_schema(&self) -> Result<TableShape, LockError> {
        self.shape.clear();
        Ok(self.statements().await?.shape)
    }

    /// The statements the provider runs on its table as it is now (looks at the table if it
    /// has not yet).
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
    /// println!("EXPLAIN {}", provider.statements().await?.acquire);
    /// # Ok(()) }
    /// ```
    pub async fn statements(&self) -> Result<LockStatements, LockError> {
        let client = self.client("schema", "").await?;
        let s = self
            .statements_for(&client)
            .await
            .map_err(|failure| match failure {
                Failure::Db(e) => self.db_error("schema", "", e),
                Failure::Lock(e) => e,
            })?;
        Ok(LockStatements {
            shape: match s.shape {
                Shape::Full => TableShape::Full,
                Shape::ShedLockOnly => TableShape::ShedLockOnly,
            },
            acquire: s.acquire.clone(),
            create: s.create.clone(),
            release: s.release.clone(),
            extend: s.extend.clone(),
            list: s.list.clone(),
            force_unlock: s.force_unlock.clone(),
        })
    }

    async fn client(&self, operation: &'static str, lock: &str) -> Result<Object, LockError> {
        self.pool
            .get()
            .await
            .map_err(|e| LockError::provider(operation, lock, self.describe(), e))
    }

    /// The statements for the table's current shape, finding the shape on first use.
    async fn statements_for(&self, client: &Object) -> Result<Arc<Statements>, Failure> {
        if let Some(statements) = self.shape.get() {
            return Ok(statements);
        }
        let columns = match schema::find(&***client, &self.table).await? {
            Found::Missing => return Err(Failure::Lock(self.table_missing(None))),
            Found::Present(columns) => columns,
        };
        let shape = schema::shape_of(&self.table, &columns).map_err(Failure::Lock)?;
        if shape == Shape::ShedLockOnly && !self.shape.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                table = %self.table.display,
                "lock table {} has only ShedLock's columns: locks are exclusive, but fencing \
                 tokens are 0 and once-per-slot is not enforced until the table is migrated; \
                 call ensure_schema() or run:\n{}",
                self.table.display,
                sql::add_extension_columns(&self.table)
            );
        }
        let statements = Arc::new(Statements::new(&self.table, shape));
        self.shape.set(statements.clone());
        Ok(statements)
    }

    /// Runs one statement on a pooled connection, trying again when the connection turned out
    /// to be dead or the statement stale (see [`RETRIES`]).
    async fn run(
        &self,
        operation: &'static str,
        lock: &str,
        pick: fn(&Statements) -> &str,
        types: &[Type],
        params: &[&(dyn ToSql + Sync)],
        want_rows: bool,
    ) -> Result<Reply, LockError> {
        let mut retries = 0;
        loop {
            let client = self.client(operation, lock).await?;
            let attempt = async {
                let statements = self.statements_for(&client).await?;
                // Prepared once per connection, then served from the connection's cache.
                let statement = client
                    .prepare_typed_cached(pick(&statements), types)
                    .await?;
                let reply = if want_rows {
                    Reply::Rows(client.query(&statement, params).await?)
                } else {
                    Reply::Count(client.execute(&statement, params).await?)
                };
                Ok::<_, Failure>(reply)
            }
            .await;
            match attempt {
                Ok(done) => return Ok(done),
                Err(Failure::Db(e)) => match stale(&e) {
                    Some(why) if retries < RETRIES => {
                        retries += 1;
                        tracing::debug!(operation, lock, error = %e, "postgres {}: retrying", why.describe());
                        match why {
                            // Detach it so the pool cannot hand the same dead connection out
                            // again.
                            Stale::Connection => drop(Object::take(client)),
                            // Prepared against an older definition of the table: prepare again.
                            Stale::Statement => client.statement_cache.clear(),
                            // Look at the table again.
                            Stale::Shape => self.shape.clear(),
                        }
                    }
                    _ => return Err(self.db_error(operation, lock, e)),
                },
                Err(Failure::Lock(e)) => return Err(e),
            }
        }
    }

    async fn rows(
        &self,
        operation: &'static str,
        lock: &str,
        pick: fn(&Statements) -> &str,
        types: &[Type],
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, LockError> {
        match self.run(operation, lock, pick, types, params, true).await? {
            Reply::Rows(rows) => Ok(rows),
            Reply::Count(_) => unreachable!("rows were asked for"),
        }
    }

    async fn count(
        &self,
        operation: &'static str,
        lock: &str,
        pick: fn(&Statements) -> &str,
        types: &[Type],
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, LockError> {
        match self
            .run(operation, lock, pick, types, params, false)
            .await?
        {
            Reply::Count(n) => Ok(n),
            Reply::Rows(_) => unreachable!("a count was asked for"),
        }
    }

    fn table_missing(&self, source: Option<tokio_postgres::Error>) -> LockError {
        LockError::TableMissing {
            table: self.table.display.clone(),
            ddl: sql::create_table(&self.table),
            source: source.map(Into::into),
        }
    }

    fn db_error(&self, operation: &'static str, lock: &str, e: tokio_postgres::Error) -> LockError {
        match e.code() {
            Some(code) if *code == SqlState::UNDEFINED_TABLE => {
                // Dropped since we last looked: look again next time (it may come back with
                // another shape).
                self.shape.clear();
                self.table_missing(Some(e))
            }
            Some(code) if *code == SqlState::UNDEFINED_COLUMN => {
                self.shape.clear();
                LockError::provider(operation, lock, self.describe(), e)
            }
            _ => LockError::provider(operation, lock, self.describe(), e),
        }
    }

    fn row_error(
        &self,
        operation: &'static str,
        lock: &str,
        e: tokio_postgres::Error,
    ) -> LockError {
        LockError::provider(operation, lock, self.describe(), e)
    }

    fn record(&self, operation: &'static str, row: &Row) -> Result<LockRecord, LockError> {
        let name: String = row
            .try_get(0)
            .map_err(|e| self.row_error(operation, "", e))?;
        let parse = || -> Result<LockRecord, tokio_postgres::Error> {
            Ok(LockRecord {
                lock_until: utc(row.try_get(1)?),
                locked_at: utc(row.try_get(2)?),
                locked_by: row.try_get(3)?,
                fence: fence(row.try_get(4)?),
                last_fire: row.try_get::<_, Option<NaiveDateTime>>(5)?.map(utc),
                held: row.try_get(6)?,
                name: name.clone(),
            })
        };
        parse().map_err(|e| self.row_error(operation, &name, e))
    }
}

impl fmt::Debug for PostgresLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresLockProvider")
            .field("config", &self.config)
            .field("pool", &self.pool.status())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl LockProvider for PostgresLockProvider {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        validate_lock_name(&request.name)?;
        let name: &str = &request.name;
        let locked_by: &str = &request.locked_by;
        let at_most = millis(request.lock_at_most_for);
        let slot = request.slot.map(|s| s.instant().naive_utc());
        let params: [&(dyn ToSql + Sync); 4] = [&name, &at_most, &locked_by, &slot];
        let rows = self
            .rows("acquire", name, |s| &s.acquire, sql::ACQUIRE_TYPES, &params)
            .await?;
        let Some(row) = rows.first() else {
            // No row for this name: its first fire, or the row was deleted by hand.
            let rows = self
                .rows("acquire", name, |s| &s.create, sql::ACQUIRE_TYPES, &params)
                .await?;
            return match rows.first() {
                Some(row) => {
                    let new_fence: i64 = row
                        .try_get(0)
                        .map_err(|e| self.row_error("acquire", name, e))?;
                    Ok(AcquireOutcome::Acquired(Lease::granted(
                        request,
                        fence(new_fence),
                    )))
                }
                // Another instance created it between our two statements: it holds the lock.
                None => Ok(AcquireOutcome::Refused(Refusal::new(RefusalReason::Held))),
            };
        };
        let parse = || -> Result<AcquireOutcome, tokio_postgres::Error> {
            if let Some(new_fence) = row.try_get::<_, Option<i64>>(0)? {
                return Ok(AcquireOutcome::Acquired(Lease::granted(
                    request,
                    fence(new_fence),
                )));
            }
            let locked_by: Option<String> = row.try_get(1)?;
            let lock_until: Option<NaiveDateTime> = row.try_get(2)?;
            let last_fire: Option<NaiveDateTime> = row.try_get(3)?;
            let held: bool = row.try_get(4)?;
            let slot_run = matches!((last_fire, slot), (Some(last), Some(slot)) if last >= slot);
            let known = |reason| Refusal {
                reason,
                locked_by,
                lock_until: lock_until.map(utc),
                last_fire: last_fire.map(utc),
            };
            Ok(AcquireOutcome::Refused(if held {
                known(RefusalReason::Held)
            } else if slot_run {
                known(RefusalReason::SlotAlreadyRun)
            } else {
                // Free in our snapshot, yet not granted: another instance took it after our
                // snapshot was taken. What we read is stale, so report only the reason.
                Refusal::new(RefusalReason::Held)
            }))
        };
        parse().map_err(|e| self.row_error("acquire", name, e))
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        let (name, locked_by) = (lease.name(), lease.locked_by());
        let fence = db_fence(lease);
        let at_most = millis(lock_at_most_for);
        let params: [&(dyn ToSql + Sync); 4] = [&name, &locked_by, &fence, &at_most];
        let n = self
            .count("extend", name, |s| &s.extend, sql::EXTEND_TYPES, &params)
            .await?;
        Ok(n > 0)
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        let (name, locked_by) = (lease.name(), lease.locked_by());
        let fence = db_fence(lease);
        let at_least = millis(lock_at_least_for);
        let params: [&(dyn ToSql + Sync); 4] = [&name, &locked_by, &fence, &at_least];
        let n = self
            .count("release", name, |s| &s.release, sql::RELEASE_TYPES, &params)
            .await?;
        Ok(n > 0)
    }

    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        let rows = self.rows("list", "", |s| &s.list, &[], &[]).await?;
        rows.iter().map(|row| self.record("list", row)).collect()
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let rows = self
            .rows(
                "unlock",
                name,
                |s| &s.force_unlock,
                sql::UNLOCK_TYPES,
                &[&name],
            )
            .await?;
        rows.first()
            .map(|row| self.record("unlock", row))
            .transpose()
    }

    fn describe(&self) -> String {
        format!("postgres table {}", self.table.display)
    }
}

/// Why a statement failed in a way that another attempt can fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stale {
    /// The connection is dead: closed before or while the statement was sent (`is_closed`),
    /// or its backend terminated by an administrator (`pg_terminate_backend`, a restart).
    Connection,
    /// The table was recreated with other column types since the statement was prepared
    /// ("cached plan must not change result type").
    Statement,
    /// A column the statements use no longer exists.
    Shape,
}

impl Stale {
    fn describe(self) -> &'static str {
        match self {
            Stale::Connection => "connection lost",
            Stale::Statement => "statement prepared against an older table definition",
            Stale::Shape => "table columns changed",
        }
    }
}

fn stale(e: &tokio_postgres::Error) -> Option<Stale> {
    if e.is_closed() || e.code() == Some(&SqlState::ADMIN_SHUTDOWN) {
        return Some(Stale::Connection);
    }
    let db = e.as_db_error()?;
    if *db.code() == SqlState::FEATURE_NOT_SUPPORTED
        && db
            .message()
            .contains("cached plan must not change result type")
    {
        Some(Stale::Statement)
    } else if *db.code() == SqlState::UNDEFINED_COLUMN {
        Some(Stale::Shape)
    } else {
        None
    }
}

/// Whole milliseconds, rounded up (a lease is never shorter than asked), capped at
/// [`MAX_LEASE`].
fn millis(d: Duration) -> i64 {
    let d = d.min(MAX_LEASE);
    let ms = d.as_millis() + u128::from(!d.subsec_nanos().is_multiple_of(1_000_000));
    i64::try_from(ms).unwrap_or(i64::MAX)
}

/// A lease's fence as the BIGINT column holds it; a value that cannot be stored matches no row.
fn db_fence(lease: &Lease) -> i64 {
    i64::try_from(lease.fence()).unwrap_or(-1)
}

fn fence(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
}

fn utc(naive: NaiveDateTime) -> DateTime<Utc> {
    naive.and_utc()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_up_and_cap() {
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(millis(Duration::from_micros(1)), 1);
        assert_eq!(millis(Duration::from_micros(1001)), 2);
        assert_eq!(millis(Duration::ZERO), 0);
        assert_eq!(millis(Duration::MAX), MAX_LEASE.as_millis() as i64);
    }
}
