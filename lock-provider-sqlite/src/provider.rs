//! `SqliteLockProvider`: the `LockProvider` impl on the session's one connection.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;
use lock_cluster::{Cluster, ClusterProvider};
use lock_core::batching::{acquire_each, batchable};
use lock_core::{
    AcquireOutcome, Lease, LockError, LockProvider, LockRecord, LockRequest, Refusal,
    RefusalReason, validate_lock_name, validate_stored_lock_name,
};
use lock_sql::{ColumnNames, at_least_millis, fence_from_sql, fence_to_sql, lease_millis};
use rusqlite::{Connection, OptionalExtension, Row, params};

use crate::config::LockTableConfig;
use crate::operations::SqliteOperations;
use crate::session::{Session, in_immediate_transaction, relaxed_commit};
use crate::statements::{Statements, instant_text, read_refusal, slot_text};
use crate::table::Table;

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
    session: Session,
    config: LockTableConfig,
    statements: Arc<Statements>,
    /// The operations tables next to the lock table (`operations.rs`).
    operations: Option<SqliteOperations>,
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
        Self::on(Session::open(path.as_ref())?, LockTableConfig::default())
    }

    /// Opens the database named by a `sqlite://` URL, as [`open`](Self::open) does:
    /// `sqlite:///absolute/path.db` or `sqlite://relative/path.db` (what follows `sqlite://` is
    /// the path). Async like the other providers' `connect`; the opening runs on tokio's
    /// blocking pool, as it may wait for another process's lock.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let provider = lock_provider_sqlite::SqliteLockProvider::connect("sqlite:///var/lib/myapp/locks.db").await?;
    /// provider.ensure_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        let path = path_of_url(url)?.to_owned();
        tokio::task::spawn_blocking(move || Self::open(path))
            .await
            .map_err(|e| LockError::provider("open", "", "sqlite", e))?
    }

    /// A provider on an open connection, which it sets up as [`open`](Self::open) does (WAL
    /// mode, a 5 s busy timeout, `synchronous = FULL`) and then owns. The connection must be
    /// on a database file: an in-memory one cannot use WAL and is
    /// [`LockError::InvalidConfiguration`].
    ///
    /// ```no_run
    /// use lock_provider_sqlite::{SqliteLockProvider, rusqlite::Connection};
    ///
    /// let connection = Connection::open("locks.db").unwrap();
    /// let provider = SqliteLockProvider::new(connection)?;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn new(connection: Connection) -> Result<Self, LockError> {
        Self::with_config(connection, LockTableConfig::default())
    }

    /// A provider on an open connection with the given table and columns, refused if a name
    /// is not a plain identifier or the table's schema is not `main`.
    ///
    /// ```no_run
    /// use lock_provider_sqlite::ColumnNames;
    /// use lock_provider_sqlite::{LockTableConfig, SqliteLockProvider, rusqlite::Connection};
    ///
    /// let config = LockTableConfig::default()
    ///     .with_table("job_locks")
    ///     .with_columns(ColumnNames { locked_by: "owner".into(), ..ColumnNames::default() });
    /// let provider = SqliteLockProvider::with_config(Connection::open("locks.db").unwrap(), config)?;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_config(connection: Connection, config: LockTableConfig) -> Result<Self, LockError> {
        let table = Table::new(&config)?;
        let path = Path::new(connection.path().unwrap_or_default()).to_owned();
        let session = Session::new(connection, &path)?;
        Ok(Self::with_table_of(session, config, table))
    }

    fn on(session: Session, config: LockTableConfig) -> Result<Self, LockError> {
        let table = Table::new(&config)?;
        Ok(Self::with_table_of(session, config, table))
    }

    fn with_table_of(session: Session, config: LockTableConfig, table: Table) -> Self {
        let statements = Arc::new(Statements::new(table));
        let operations = SqliteOperations::new(
            session.clone(),
            statements.clone(),
            &statements.table.resolved,
        );
        SqliteLockProvider {
            session,
            config,
            statements,
            operations,
        }
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
    pub fn with_table(self, table: &str) -> Result<Self, LockError> {
        let config = self.config.clone().with_table(table);
        Self::on(self.session, config)
    }

    /// Uses other column names (an existing table with its own naming). Every name is
    /// validated; a bad one is [`LockError::InvalidConfiguration`].
    ///
    /// ```no_run
    /// use lock_provider_sqlite::ColumnNames;
    /// use lock_provider_sqlite::SqliteLockProvider;
    /// let columns = ColumnNames { locked_by: "owner".into(), ..ColumnNames::default() };
    /// let provider = SqliteLockProvider::open("locks.db")?.with_columns(columns)?;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_columns(self, columns: ColumnNames) -> Result<Self, LockError> {
        let config = self.config.clone().with_columns(columns);
        Self::on(self.session, config)
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
        self.session
            .set_busy_timeout(timeout)
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
                    crate::table::ensure(&sql.table, connection)
                })
            })
            .await?;
        outcome.map_err(|missing| {
            LockError::InvalidConfiguration(format!(
                "lock table {} exists but has no column(s) {missing:?}; check `with_columns`",
                self.table()
            ))
        })?;
        crate::operations::ensure(self.operations.as_ref(), &self.config).await
    }

    /// The statement that creates the lock table (what [`ensure_schema`](Self::ensure_schema)
    /// runs, and what a [`LockError::TableMissing`] shows).
    ///
    /// ```no_run
    /// let provider = lock_provider_sqlite::SqliteLockProvider::open("locks.db")?;
    /// assert!(provider.create_table_sql().starts_with("CREATE TABLE IF NOT EXISTS \"shedlock\""));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn create_table_sql(&self) -> String {
        self.statements.table.create_table.clone()
    }

    /// The table and column configuration.
    ///
    /// ```no_run
    /// let provider = lock_provider_sqlite::SqliteLockProvider::open("locks.db")?;
    /// assert_eq!(provider.config().table, "shedlock");
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn config(&self) -> &LockTableConfig {
        &self.config
    }

    /// The lock table's name as configured.
    ///
    /// ```no_run
    /// let provider = lock_provider_sqlite::SqliteLockProvider::open("locks.db")?;
    /// assert_eq!(provider.table(), "shedlock");
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn table(&self) -> &str {
        self.statements.table.display()
    }

    /// The database file.
    ///
    /// ```no_run
    /// let provider = lock_provider_sqlite::SqliteLockProvider::open("locks.db")?;
    /// assert!(provider.path().ends_with("locks.db"));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn path(&self) -> &Path {
        self.session.path()
    }

    fn backend(&self) -> String {
        self.session.backend(&self.statements)
    }

    /// Runs `work` with the connection on tokio's blocking pool (see [`Session::run`]).
    pub(crate) async fn run<T, F>(
        &self,
        operation: &'static str,
        lock: &str,
        work: F,
    ) -> Result<T, LockError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Statements) -> rusqlite::Result<T> + Send + 'static,
    {
        self.session
            .run(&self.statements, operation, lock, work)
            .await
    }

    /// Runs the statement `change` picks on the row `name`, read first under the write lock:
    /// the record returned is the row as it was before (force-unlock, reset-slot).
    async fn change_row(
        &self,
        operation: &'static str,
        name: &str,
        change: fn(&Statements) -> &String,
    ) -> Result<Option<LockRecord>, LockError> {
        // A row that exists may have a name today's rule refuses (ShedLock, an older version).
        validate_stored_lock_name(name)?;
        let owned = name.to_owned();
        self.run(operation, name, move |connection, sql| {
            in_immediate_transaction(connection, |connection| {
                let before = connection
                    .prepare_cached(&sql.select_one)?
                    .query_row([&owned], record)
                    .optional()?;
                if before.is_some() {
                    connection.prepare_cached(change(sql))?.execute([&owned])?;
                }
                Ok(before)
            })
        })
        .await
    }
}

/// The path in a `sqlite://` URL.
fn path_of_url(url: &str) -> Result<&str, LockError> {
    let path = url
        .split_once("://")
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("sqlite"))
        .map(|(_, path)| path)
        .ok_or_else(|| {
            LockError::InvalidConfiguration(
                "SQLite URL: expected sqlite:///absolute/path.db or sqlite://relative.db".into(),
            )
        })?;
    if path.is_empty() {
        return Err(LockError::InvalidConfiguration(
            "SQLite URL: sqlite:// names no file (sqlite:///absolute/path.db or \
             sqlite://relative.db)"
                .into(),
        ));
    }
    Ok(path)
}

fn record(row: &Row<'_>) -> rusqlite::Result<LockRecord> {
    Ok(LockRecord {
        name: row.get(0)?,
        lock_until: row.get(1)?,
        locked_at: row.get(2)?,
        locked_by: row.get(3)?,
        fence: fence_from_sql(row.get(4)?),
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
        let at_most = lease_millis(request.lock_at_most_for);
        let lead = lease_millis(request.max_slot_lead);
        let give_up_at = request.give_up_at.map(instant_text);
        // SQLite's clock is this host's: a slot too far ahead is refused without a statement
        // (the acquire statement refuses it too, by SQLite's own `now`).
        if request.slot.is_some() {
            let now = Utc::now();
            if request.slot_too_far_ahead(now) {
                return Ok(AcquireOutcome::Refused(Refusal::slot_in_future(now)));
            }
        }
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
                    .query_row(
                        params![owned.name, owned.locked_by, at_most, slot, lead, give_up_at],
                        |row| row.get(0),
                    )
                    .optional()?;
                if let Some(fence) = granted {
                    return Ok(AcquireOutcome::Acquired(Lease::granted(
                        &owned,
                        fence_from_sql(fence),
                    )));
                }
                // The statement ran past the sender's deadline (SQLite's clock is this host's).
                let now = Utc::now();
                if owned.too_late(now) {
                    return Ok(AcquireOutcome::Refused(Refusal::too_late(now)));
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

    /// One hop to the blocking pool and one write transaction for the whole batch.
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
            _ => self.release_batch(leases).await,
        }
    }

    fn max_batch(&self) -> usize {
        crate::batch::MAX_BATCH
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        let lease_owned = lease.clone();
        let at_most = lease_millis(lock_at_most_for);
        self.run("extend", lease.name(), move |connection, sql| {
            relaxed_commit(connection, |connection| {
                let changed = connection.prepare_cached(&sql.extend)?.execute(params![
                    lease_owned.name(),
                    lease_owned.locked_by(),
                    fence_to_sql(&lease_owned),
                    at_most
                ])?;
                Ok(changed == 1)
            })
        })
        .await
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        let lease_owned = lease.clone();
        let at_least = at_least_millis(lock_at_least_for);
        self.run("release", lease.name(), move |connection, sql| {
            relaxed_commit(connection, |connection| {
                let changed = connection.prepare_cached(&sql.release)?.execute(params![
                    lease_owned.name(),
                    lease_owned.locked_by(),
                    fence_to_sql(&lease_owned),
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

    /// One lookup on the primary key, not the trait's whole-table default (read at each
    /// misfire check and after a lost acquire reply).
    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let owned = name.to_owned();
        self.run("read", name, move |connection, sql| {
            connection
                .prepare_cached(&sql.select_one)?
                .query_row([&owned], record)
                .optional()
        })
        .await
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.change_row("unlock", name, |sql| &sql.force_unlock)
            .await
    }

    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.change_row("reset slot", name, |sql| &sql.reset_slot)
            .await
    }

    fn describe(&self) -> String {
        self.backend()
    }
}

impl ClusterProvider for SqliteLockProvider {
    fn cluster(&self) -> Option<&dyn Cluster> {
        self.operations.as_ref().map(|o| o as _)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_name_a_path() {
        assert_eq!(
            path_of_url("sqlite:///var/lib/locks.db").unwrap(),
            "/var/lib/locks.db"
        );
        assert_eq!(path_of_url("SQLite://locks.db").unwrap(), "locks.db");
        assert!(path_of_url("sqlite://").is_err());
        assert!(path_of_url("postgres://host/db").is_err());
        assert!(path_of_url("locks.db").is_err());
    }

    /// The kit's rounding rule: a sub-millisecond lease is one millisecond, not zero (SQLite
    /// used to truncate it to `lock_until = locked_at`, a lease over when taken).
    #[tokio::test]
    async fn a_sub_millisecond_lease_is_one_millisecond() {
        let dir = tempfile::tempdir().unwrap();
        let provider = SqliteLockProvider::open(dir.path().join("locks.db")).unwrap();
        provider.ensure_schema().await.unwrap();
        let request = LockRequest {
            name: "short".into(),
            locked_by: "me".into(),
            lock_at_most_for: Duration::from_micros(200),
            slot: None,
            max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
            give_up_at: None,
        };
        let outcome = provider.acquire(&request).await.unwrap();
        assert!(
            matches!(outcome, AcquireOutcome::Acquired(_)),
            "{outcome:?}"
        );
        let record = provider.force_unlock("short").await.unwrap().unwrap();
        assert_eq!(
            record.lock_until - record.locked_at,
            chrono::TimeDelta::milliseconds(1)
        );
    }
}
