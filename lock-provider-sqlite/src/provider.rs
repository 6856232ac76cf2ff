//! `SqliteLockProvider`: one connection, used off the async workers.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_core::{
    AcquireOutcome, ColumnNames, DEFAULT_TABLE, Lease, LockError, LockProvider, LockRecord,
    LockRequest, Refusal, RefusalReason, validate_lock_name,
};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::sql::{Statements, millis, slot_text};

/// How long a statement waits for another connection's write lock before failing with
/// `SQLITE_BUSY` (then the fire is skipped, like any provider error).
const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Room for every statement of [`Statements`] plus the transaction and pragma statements.
const STATEMENT_CACHE_CAPACITY: usize = 32;

/// A [`LockProvider`] on a SQLite database file, shared by every process on one host.
///
/// The provider owns one connection (WAL mode, a busy timeout, `synchronous = FULL`) behind a
/// mutex and runs every statement on tokio's blocking pool, so the async workers never wait
/// for SQLite's file locks or disk. Clones share that connection. Exclusion between processes
/// comes from SQLite's own write lock: a grant is one `INSERT ... ON CONFLICT DO UPDATE ...
/// WHERE lease free RETURNING fence` inside `BEGIN IMMEDIATE`, so two processes cannot both
/// win; an acquire that a plain read already shows to be refused takes no write lock at all.
/// All times come from SQLite's clock (`strftime('%Y-%m-%d %H:%M:%f','now')`, UTC). See the
/// crate documentation for the table, the statements and the limits (one host only).
///
/// ```no_run
/// use lock_core::{LockConfiguration, LockOutcome, LockingTaskExecutor};
/// use lock_provider_sqlite::SqliteLockProvider;
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), lock_core::LockError> {
/// let provider = SqliteLockProvider::open("/var/lib/myapp/locks.db")?;
/// provider.ensure_schema().await?;
/// let executor = LockingTaskExecutor::new(provider);
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// if let LockOutcome::Executed(()) = executor.execute_with_lock(&config, async { /* work */ }).await? {
///     println!("this process ran the report");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SqliteLockProvider {
    connection: Arc<Mutex<Connection>>,
    statements: Arc<Statements>,
    path: Arc<Path>,
}

impl SqliteLockProvider {
    /// Opens (creating if needed) the database file at `path` and switches it to WAL mode,
    /// with a 5 s busy timeout and the default table `shedlock`. Not async: it opens a local
    /// file, though switching to WAL may wait (up to the busy timeout) for another process's
    /// lock, so call it at startup. Call [`ensure_schema`](Self::ensure_schema) once to create
    /// the table.
    ///
    /// Fails with [`LockError::Provider`] when the file cannot be opened and with
    /// [`LockError::InvalidConfiguration`] when it cannot use WAL mode (`:memory:`, for
    /// instance: use `lock_core::InMemoryLockProvider` for a single process instead).
    ///
    /// ```no_run
    /// let provider = lock_provider_sqlite::SqliteLockProvider::open("locks.db")?;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LockError> {
        let path: Arc<Path> = Arc::from(path.as_ref());
        let statements = Statements::new(DEFAULT_TABLE, &ColumnNames::default())?;
        let fail = |e: rusqlite::Error| {
            LockError::provider("open", "", format!("sqlite database {}", path.display()), e)
        };
        let connection = Connection::open(&path).map_err(fail)?;
        // The busy timeout first: switching to WAL needs a lock another process may hold.
        connection
            .busy_timeout(DEFAULT_BUSY_TIMEOUT)
            .map_err(fail)?;
        let mode: String = connection
            .query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))
            .map_err(fail)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(LockError::InvalidConfiguration(format!(
                "sqlite database {}: cannot switch to WAL mode (journal_mode is {mode:?}); \
                 the lock provider needs a database file on a local disk",
                path.display()
            )));
        }
        // Double-quoted names must be identifiers only: by default SQLite reads a quoted name
        // that matches no column as a string literal, which would turn a missing column into
        // a silently wrong comparison instead of an error.
        for config in [
            DbConfig::SQLITE_DBCONFIG_DQS_DML,
            DbConfig::SQLITE_DBCONFIG_DQS_DDL,
        ] {
            connection.set_db_config(config, false).map_err(fail)?;
        }
        // A granted acquire is fsynced (a fence is never handed out twice, even after a power
        // loss); release and extend lower this for their own commit, see `relaxed_commit`.
        connection
            .pragma_update(None, "synchronous", "FULL")
            .map_err(fail)?;
        connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE_CAPACITY);
        tracing::debug!(path = %path.display(), "opened sqlite lock database (WAL)");
        Ok(SqliteLockProvider {
            connection: Arc::new(Mutex::new(connection)),
            statements: Arc::new(statements),
            path,
        })
    }

    /// Uses the lock table `table` (`name` or `main.name`) instead of `shedlock`. The name is
    /// validated as an identifier; anything else, and any schema but `main`, is
    /// [`LockError::InvalidConfiguration`].
    ///
    /// ```no_run
    /// use lock_provider_sqlite::SqliteLockProvider;
    /// let provider = SqliteLockProvider::open("locks.db")?.with_table("job_locks")?;
    /// assert!(SqliteLockProvider::open("locks.db")?.with_table("locks; DROP TABLE x").is_err());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_table(mut self, table: &str) -> Result<Self, LockError> {
        self.statements = Arc::new(Statements::new(table, &self.statements.columns)?);
        Ok(self)
    }

    /// Uses other column names (an existing table with its own naming). Every name is
    /// validated; a bad one is [`LockError::InvalidConfiguration`].
    ///
    /// ```no_run
    /// use lock_core::ColumnNames;
    /// use lock_provider_sqlite::SqliteLockProvider;
    /// let columns = ColumnNames { locked_by: "owner".into(), ..ColumnNames::default() };
    /// let provider = SqliteLockProvider::open("locks.db")?.with_columns(columns)?;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_columns(mut self, columns: ColumnNames) -> Result<Self, LockError> {
        self.statements = Arc::new(Statements::new(&self.statements.table, &columns)?);
        Ok(self)
    }

    /// How long a statement waits for another process's write lock before it fails (default
    /// 5 s). Applies to every clone of this provider (they share the connection).
    ///
    /// ```no_run
    /// use lock_provider_sqlite::SqliteLockProvider;
    /// use std::time::Duration;
    /// let provider = SqliteLockProvider::open("locks.db")?.with_busy_timeout(Duration::from_secs(1))?;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_busy_timeout(self, timeout: Duration) -> Result<Self, LockError> {
        lock_connection(&self.connection)
            .busy_timeout(timeout)
            .map_err(|e| LockError::provider("open", "", self.backend(), e))?;
        Ok(self)
    }

    /// Creates the lock table if it does not exist, and adds this library's `fence` and
    /// `last_fire` columns to an existing ShedLock table that lacks them. Safe to run from
    /// several processes at once (one transaction holding the write lock).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let provider = lock_provider_sqlite::SqliteLockProvider::open("locks.db")?;
    /// provider.ensure_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ensure_schema(&self) -> Result<(), LockError> {
        let outcome = self
            .run("schema", "", |connection, sql| {
                in_immediate_transaction(connection, |connection| {
                    connection.execute_batch(&sql.create_table)?;
                    let present = table_columns(connection, sql)?;
                    let has = |column: &str| present.iter().any(|c| c.eq_ignore_ascii_case(column));
                    let columns = &sql.columns;
                    let missing: Vec<String> = [
                        &columns.name,
                        &columns.lock_until,
                        &columns.locked_at,
                        &columns.locked_by,
                    ]
                    .into_iter()
                    .filter(|c| !has(c))
                    .cloned()
                    .collect();
                    if !missing.is_empty() {
                        return Ok(Err(missing));
                    }
                    if !has(&columns.fence) {
                        connection.execute_batch(&sql.add_fence)?;
                    }
                    if !has(&columns.last_fire) {
                        connection.execute_batch(&sql.add_last_fire)?;
                    }
                    Ok(Ok(()))
                })
            })
            .await?;
        outcome.map_err(|missing| {
            LockError::InvalidConfiguration(format!(
                "lock table {} exists but has no column(s) {missing:?}; check `with_columns`",
                self.statements.table
            ))
        })
    }

    /// The statement that creates the lock table (what [`ensure_schema`](Self::ensure_schema)
    /// runs, and what a [`LockError::TableMissing`] shows).
    ///
    /// ```no_run
    /// let provider = lock_provider_sqlite::SqliteLockProvider::open("locks.db")?;
    /// assert!(provider.ddl().starts_with("CREATE TABLE IF NOT EXISTS \"shedlock\""));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn ddl(&self) -> &str {
        &self.statements.create_table
    }

    /// The lock table's name as configured.
    ///
    /// ```no_run
    /// let provider = lock_provider_sqlite::SqliteLockProvider::open("locks.db")?;
    /// assert_eq!(provider.table(), "shedlock");
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn table(&self) -> &str {
        &self.statements.table
    }

    /// The database file.
    ///
    /// ```no_run
    /// let provider = lock_provider_sqlite::SqliteLockProvider::open("locks.db")?;
    /// assert!(provider.path().ends_with("locks.db"));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn backend(&self) -> String {
        format!(
            "sqlite table {} in {}",
            self.statements.table,
            self.path.display()
        )
    }

    /// Runs `work` with the connection on tokio's blocking pool and maps its errors.
    async fn run<T, F>(&self, operation: &'static str, lock: &str, work: F) -> Result<T, LockError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Statements) -> rusqlite::Result<T> + Send + 'static,
    {
        let connection = Arc::clone(&self.connection);
        let statements = Arc::clone(&self.statements);
        let joined = tokio::task::spawn_blocking(move || {
            let connection = lock_connection(&connection);
            work(&connection, &statements)
        })
        .await;
        match joined {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.map_error(operation, lock, error)),
            Err(join) => Err(LockError::provider(operation, lock, self.backend(), join)),
        }
    }

    fn map_error(&self, operation: &'static str, lock: &str, error: rusqlite::Error) -> LockError {
        let message = match &error {
            rusqlite::Error::SqliteFailure(_, Some(message)) => message.as_str(),
            // A prepare error with its position in the SQL (SQLite 3.38+).
            rusqlite::Error::SqlInputError { msg, .. } => msg.as_str(),
            _ => "",
        };
        if message.starts_with("no such table") {
            return LockError::TableMissing {
                table: self.statements.table.clone(),
                ddl: self.statements.create_table.clone(),
                source: Some(Box::new(error)),
            };
        }
        if message.starts_with("no such column") || message.contains("has no column named") {
            let hint = format!(
                "lock table {} lacks a column; run `ensure_schema()` or:\n{}\n{}",
                self.statements.table, self.statements.add_fence, self.statements.add_last_fire
            );
            return LockError::provider(
                operation,
                lock,
                self.backend(),
                ColumnMissing {
                    hint,
                    source: error,
                },
            );
        }
        LockError::provider(operation, lock, self.backend(), error)
    }
}

/// A statement referred to a column the lock table does not have.
#[derive(Debug, thiserror::Error)]
#[error("{hint}")]
struct ColumnMissing {
    hint: String,
    #[source]
    source: rusqlite::Error,
}

/// Locks the shared connection. A panic while it was held may have left a transaction open:
/// roll it back, so the connection is usable (and holds no write lock) afterwards.
fn lock_connection(connection: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    match connection.lock() {
        Ok(guard) => guard,
        Err(poisoned) => {
            connection.clear_poison();
            let guard = poisoned.into_inner();
            tracing::warn!("sqlite lock connection recovered after a panic while it was in use");
            if !guard.is_autocommit() {
                // Nothing better to do if this fails: the next BEGIN will report the state.
                let _ = guard.execute_batch("ROLLBACK");
            }
            guard
        }
    }
}

/// Runs `work` between `BEGIN IMMEDIATE` and `COMMIT`, rolling back on error. IMMEDIATE takes
/// the write lock up front, through the busy handler, so the transaction can never fail later
/// with `SQLITE_BUSY_SNAPSHOT` (a read lock that cannot be upgraded).
fn in_immediate_transaction<T>(
    connection: &Connection,
    work: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    connection.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let result = work(connection).and_then(|value| {
        connection
            .prepare_cached("COMMIT")?
            .execute([])
            .map(|_| value)
    });
    if result.is_err() && !connection.is_autocommit() {
        // The error being returned says what went wrong; a failing ROLLBACK adds nothing.
        let _ = connection.execute_batch("ROLLBACK");
    }
    result
}

/// Runs one write with `synchronous = NORMAL`: committed to the WAL without an fsync. Used for
/// release and extend, whose loss in a power failure is harmless: the holder on this host died
/// too, and a lost release only delays the next holder until `lock_until`.
fn relaxed_commit<T>(
    connection: &Connection,
    work: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    connection
        .prepare_cached("PRAGMA synchronous = NORMAL")?
        .execute([])?;
    let result = work(connection);
    let restored = connection
        .prepare_cached("PRAGMA synchronous = FULL")
        .and_then(|mut statement| statement.execute([]));
    let value = result?;
    restored?;
    Ok(value)
}

fn table_columns(connection: &Connection, sql: &Statements) -> rusqlite::Result<Vec<String>> {
    let mut statement = connection.prepare_cached(sql.table_columns)?;
    let rows = statement.query_map(params![sql.bare_table, sql.schema], |row| row.get(0))?;
    rows.collect()
}

/// The row of `name` as a refusal: `Held` while `lock_until > now`, `SlotAlreadyRun` when
/// `slot` is not after `last_fire`, `Unknown` when neither (the lease looks free). `None` when
/// there is no row.
fn read_refusal(
    connection: &Connection,
    sql: &Statements,
    name: &str,
    slot: Option<&str>,
) -> rusqlite::Result<Option<Refusal>> {
    connection
        .prepare_cached(&sql.refusal)?
        .query_row(params![name, slot], |row| {
            let reason = match row.get::<_, i64>(3)? {
                1 => RefusalReason::Held,
                2 => RefusalReason::SlotAlreadyRun,
                _ => RefusalReason::Unknown,
            };
            Ok(Refusal {
                reason,
                locked_by: row.get(0)?,
                lock_until: row.get::<_, Option<DateTime<Utc>>>(1)?,
                last_fire: row.get(2)?,
            })
        })
        .optional()
}

fn fence_of(stored: i64) -> u64 {
    // The column is ours and only ever incremented from 0; a negative value written by hand
    // reads as 0 rather than failing every acquire.
    u64::try_from(stored).unwrap_or(0)
}

fn record(row: &Row<'_>) -> rusqlite::Result<LockRecord> {
    Ok(LockRecord {
        name: row.get(0)?,
        lock_until: row.get(1)?,
        locked_at: row.get(2)?,
        locked_by: row.get(3)?,
        fence: fence_of(row.get(4)?),
        last_fire: row.get(5)?,
        held: row.get(6)?,
    })
}

#[async_trait]
impl LockProvider for SqliteLockProvider {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        validate_lock_name(&request.name)?;
        let slot = request
            .slot
            .map(|slot| slot_text(slot.instant()))
            .transpose()?;
        let at_most = millis(request.lock_at_most_for);
        let owned = request.clone();
        self.run("acquire", &request.name, move |connection, sql| {
            // Most acquires lose (N instances, one winner). A plain read settles those without
            // the write lock: refusing on what a consistent snapshot shows is as correct as
            // refusing a moment later, and in WAL mode a reader neither waits for nor blocks
            // another process's writer.
            let seen = read_refusal(connection, sql, &owned.name, slot.as_deref())?;
            if let Some(refusal) = seen.filter(|r| r.reason != RefusalReason::Unknown) {
                return Ok(AcquireOutcome::Refused(refusal));
            }
            in_immediate_transaction(connection, |connection| {
                let granted: Option<i64> = connection
                    .prepare_cached(&sql.acquire)?
                    .query_row(params![owned.name, owned.locked_by, at_most, slot], |row| {
                        row.get(0)
                    })
                    .optional()?;
                if let Some(fence) = granted {
                    return Ok(AcquireOutcome::Acquired(Lease::granted(
                        &owned,
                        fence_of(fence),
                    )));
                }
                // Another process took it between the read and the write lock: read the
                // winner in this transaction, so the reason is exact.
                let refusal = read_refusal(connection, sql, &owned.name, slot.as_deref())?;
                Ok(AcquireOutcome::Refused(
                    refusal.unwrap_or_else(|| Refusal::new(RefusalReason::Unknown)),
                ))
            })
        })
        .await
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        let lease_owned = lease.clone();
        let at_most = millis(lock_at_most_for);
        self.run("extend", lease.name(), move |connection, sql| {
            relaxed_commit(connection, |connection| {
                let changed = connection.prepare_cached(&sql.extend)?.execute(params![
                    lease_owned.name(),
                    lease_owned.locked_by(),
                    fence_param(&lease_owned),
                    at_most
                ])?;
                Ok(changed == 1)
            })
        })
        .await
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        let lease_owned = lease.clone();
        let at_least = millis(lock_at_least_for);
        self.run("release", lease.name(), move |connection, sql| {
            relaxed_commit(connection, |connection| {
                let changed = connection.prepare_cached(&sql.release)?.execute(params![
                    lease_owned.name(),
                    lease_owned.locked_by(),
                    fence_param(&lease_owned),
                    at_least
                ])?;
                Ok(changed == 1)
            })
        })
        .await
    }

    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.run("list", "", |connection, sql| {
            let mut statement = connection.prepare_cached(&sql.list)?;
            let rows = statement.query_map([], record)?;
            rows.collect()
        })
        .await
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        validate_lock_name(name)?;
        let owned = name.to_owned();
        self.run("unlock", name, move |connection, sql| {
            in_immediate_transaction(connection, |connection| {
                let before = connection
                    .prepare_cached(&sql.select_one)?
                    .query_row([&owned], record)
                    .optional()?;
                if before.is_some() {
                    connection
                        .prepare_cached(&sql.force_unlock)?
                        .execute([&owned])?;
                }
                Ok(before)
            })
        })
        .await
    }

    fn describe(&self) -> String {
        self.backend()
    }
}

/// The fence as bound to SQL. Fences are handed out by this table from 1 upwards, so they
/// fit an `i64`; a lease from elsewhere with a larger one can never match a row.
fn fence_param(lease: &Lease) -> i64 {
    i64::try_from(lease.fence()).unwrap_or(-1)
}
