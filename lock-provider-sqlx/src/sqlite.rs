//! The SQLite backend: the kit's SQLite statements ([`lock_sql::sql::sqlite`], the very
//! text `lock-provider-sqlite` runs) on a [`SqlitePool`].
//!
//! As in `lock-provider-sqlite`, a losing acquire is settled by a plain read (no write lock);
//! the write runs in `BEGIN IMMEDIATE`, so two processes cannot both take a free lock. The
//! pool's connections keep the settings their owner gave them: WAL mode (recommended, so that
//! readers and the writer of other processes never wait for each other), the busy timeout
//! (sqlx's default is 5 s) and `synchronous` (SQLite's default `FULL`, under which every
//! release and extend is durable too; `lock-provider-sqlite` lowers it to `NORMAL` for those two
//! on its own connection, which a provider must not do on a pool it shares).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use lock_core::{
    AcquireOutcome, Lease, LockError, LockRecord, LockRequest, Refusal, RefusalReason,
};
use lock_sql::sql::sqlite::{Statements, Table, instant_text, slot_text};
use lock_sql::{at_least_millis, fence_from_sql, fence_to_sql, lease_millis};
use sqlx::sqlite::{SqlitePool, SqliteRow};
use sqlx::{AssertSqlSafe, Row, SqliteConnection};

use crate::operations::{self, SqliteTables, SqlxOperations};

mod batch;

/// A SQLite table on a sqlx pool.
#[derive(Clone)]
pub(crate) struct SqliteBackend {
    pub(crate) pool: SqlitePool,
    statements: Arc<Statements>,
    /// Keep each statement prepared on its connection (sqlx's statement cache) or not.
    pub(crate) persistent: bool,
    /// The operations tables next to the lock table (`crate::operations`).
    pub(crate) operations: Option<Arc<SqlxOperations<SqliteTables>>>,
}

/// One row of `list` or `select_one`.
fn record(row: &SqliteRow) -> Result<LockRecord, sqlx::Error> {
    Ok(LockRecord {
        name: row.try_get_unchecked(0)?,
        lock_until: row.try_get_unchecked(1)?,
        locked_at: row.try_get_unchecked(2)?,
        locked_by: row.try_get_unchecked(3)?,
        fence: fence_from_sql(row.try_get_unchecked(4)?),
        last_fire: row.try_get_unchecked(5)?,
        held: row.try_get_unchecked::<i64, _>(6)? != 0,
    })
}

impl SqliteBackend {
    pub(crate) fn new(pool: SqlitePool, table: Table) -> Self {
        SqliteBackend {
            operations: operations::next_to(SqliteTables::new(pool.clone()), &table.resolved),
            pool,
            statements: Arc::new(Statements::new(table)),
            persistent: true,
        }
    }

    /// Turns the statement cache on or off, for the lock and the operations statements.
    pub(crate) fn set_statement_cache(&mut self, cache: bool) {
        self.persistent = cache;
        self.operations = operations::with_statement_cache(self.operations.take(), cache);
    }

    pub(crate) fn describe(&self) -> String {
        let file = self.pool.connect_options();
        format!(
            "sqlite table {} in {} (sqlx)",
            self.statements.table.display(),
            file.get_filename().display()
        )
    }

    pub(crate) fn create_table_sql(&self) -> String {
        self.statements.table.create_table.clone()
    }

    fn error(&self, operation: &'static str, lock: &str, e: sqlx::Error) -> LockError {
        let table = &self.statements.table;
        let message = match &e {
            sqlx::Error::Database(db) => db.message().to_owned(),
            _ => String::new(),
        };
        if message.starts_with("no such table") {
            return LockError::TableMissing {
                table: table.display().to_owned(),
                ddl: table.create_table.clone(),
                source: Some(Box::new(e)),
            };
        }
        if message.starts_with("no such column") || message.contains("has no column named") {
            let hint = format!(
                "lock table {} lacks a column; run `ensure_schema()` or:\n{}\n{}",
                table.display(),
                table.add_fence,
                table.add_last_fire
            );
            return LockError::provider(operation, lock, self.describe(), format!("{hint}: {e}"));
        }
        LockError::provider(operation, lock, self.describe(), e)
    }

    fn query(
        &self,
        text: &str,
    ) -> sqlx::query::Query<'static, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
        sqlx::query(AssertSqlSafe(text.to_owned())).persistent(self.persistent)
    }

    /// Creates the table if needed and adds the missing extension columns, in one write
    /// transaction (safe from many processes at once).
    pub(crate) async fn ensure_schema(&self) -> Result<(), LockError> {
        let table = &self.statements.table;
        let run = async {
            let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
            sqlx::raw_sql(AssertSqlSafe(table.create_table.clone()))
                .execute(&mut *tx)
                .await?;
            let present: Vec<String> = sqlx::query_scalar(lock_sql::sql::sqlite::TABLE_COLUMNS)
                .bind(&table.resolved.name)
                .bind(&table.schema)
                .fetch_all(&mut *tx)
                .await?;
            let missing = match table.migration(&present) {
                Ok(ddl) => {
                    for statement in ddl {
                        sqlx::raw_sql(AssertSqlSafe(statement.clone()))
                            .execute(&mut *tx)
                            .await?;
                    }
                    None
                }
                Err(missing) => Some(missing),
            };
            tx.commit().await?;
            Ok::<_, sqlx::Error>(missing)
        };
        match run.await.map_err(|e| self.error("schema", "", e))? {
            None => Ok(()),
            Some(missing) => Err(LockError::InvalidConfiguration(format!(
                "lock table {} has no column {} (configured as ShedLock's columns)",
                table.display(),
                missing.join(", ")
            ))),
        }
    }

    /// The row of `name` as a refusal: `Held` while `lock_until > now`, `SlotAlreadyRun` when
    /// `slot` is not after `last_fire`, `Unknown` when neither. `None` when there is no row.
    async fn refusal(
        &self,
        conn: &mut SqliteConnection,
        name: &str,
        slot: Option<&str>,
    ) -> Result<Option<Refusal>, sqlx::Error> {
        let Some(row) = self
            .query(&self.statements.refusal)
            .bind(name.to_owned())
            .bind(slot.map(str::to_owned))
            .fetch_optional(&mut *conn)
            .await?
        else {
            return Ok(None);
        };
        let reason = match row.try_get_unchecked::<i64, _>(3)? {
            1 => RefusalReason::Held,
            2 => RefusalReason::SlotAlreadyRun,
            _ => RefusalReason::Unknown,
        };
        Ok(Some(Refusal {
            reason,
            locked_by: row.try_get_unchecked(0)?,
            lock_until: row.try_get_unchecked::<Option<DateTime<Utc>>, _>(1)?,
            last_fire: row.try_get_unchecked(2)?,
            database_now: None,
        }))
    }

    pub(crate) async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        let name: &str = &request.name;
        let slot = request
            .slot
            .map(|slot| slot_text(slot.instant()))
            .transpose()?;
        // SQLite's clock is this host's: a slot too far ahead is refused without a statement
        // (the acquire statement refuses it too, by SQLite's own `now`).
        if request.slot.is_some() {
            let now = Utc::now();
            if request.slot_too_far_ahead(now) {
                return Ok(AcquireOutcome::Refused(Refusal::slot_in_future(now)));
            }
        }
        let run = async {
            let mut conn = self.pool.acquire().await?;
            // Most acquires lose: a plain read settles those without the write lock.
            let seen = self.refusal(&mut conn, name, slot.as_deref()).await?;
            if let Some(refusal) = seen.filter(|r| r.reason != RefusalReason::Unknown) {
                return Ok(AcquireOutcome::Refused(refusal));
            }
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let outcome = self.decide(&mut tx, request, slot.as_deref()).await?;
            tx.commit().await?;
            Ok::<_, sqlx::Error>(outcome)
        };
        run.await.map_err(|e| self.error("acquire", name, e))
    }

    /// Decides `request` (whose slot, as text, is `slot`) by the acquire statement, in a write
    /// transaction (`BEGIN IMMEDIATE`) the caller commits.
    async fn decide(
        &self,
        tx: &mut SqliteConnection,
        request: &LockRequest,
        slot: Option<&str>,
    ) -> Result<AcquireOutcome, sqlx::Error> {
        let name: &str = &request.name;
        let granted = self
            .query(&self.statements.acquire)
            .bind(name.to_owned())
            .bind(request.locked_by.to_string())
            .bind(lease_millis(request.lock_at_most_for))
            .bind(slot.map(str::to_owned))
            .bind(lease_millis(request.max_slot_lead))
            .bind(request.give_up_at.map(instant_text))
            .fetch_optional(&mut *tx)
            .await?;
        let now = Utc::now();
        Ok(match granted {
            Some(row) => AcquireOutcome::Acquired(Lease::granted(
                request,
                fence_from_sql(row.try_get_unchecked(0)?),
            )),
            // The statement ran past the sender's deadline (SQLite's clock is this host's).
            None if request.too_late(now) => AcquireOutcome::Refused(Refusal::too_late(now)),
            // Another process took it between the read and the write lock: read the winner in
            // this transaction, so the reason is exact.
            None => AcquireOutcome::Refused(
                self.refusal(tx, name, slot)
                    .await?
                    .unwrap_or_else(|| Refusal::new(RefusalReason::Unknown)),
            ),
        })
    }

    /// Release or extend: `?1` name, `?2` locked_by, `?3` fence, `?4` the duration (ms).
    async fn change_lease(
        &self,
        operation: &'static str,
        text: &str,
        lease: &Lease,
        millis: i64,
    ) -> Result<bool, LockError> {
        let done = self
            .query(text)
            .bind(lease.name().to_owned())
            .bind(lease.locked_by().to_owned())
            .bind(fence_to_sql(lease))
            .bind(millis)
            .execute(&self.pool)
            .await
            .map_err(|e| self.error(operation, lease.name(), e))?;
        Ok(done.rows_affected() == 1)
    }

    pub(crate) async fn release(
        &self,
        lease: &Lease,
        at_least: Duration,
    ) -> Result<bool, LockError> {
        self.change_lease(
            "release",
            &self.statements.release,
            lease,
            at_least_millis(at_least),
        )
        .await
    }

    pub(crate) async fn extend(&self, lease: &Lease, at_most: Duration) -> Result<bool, LockError> {
        self.change_lease(
            "extend",
            &self.statements.extend,
            lease,
            lease_millis(at_most),
        )
        .await
    }

    pub(crate) async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        let rows = self
            .query(&self.statements.list)
            .fetch_all(&self.pool)
            .await
            .map_err(|e| self.error("list", "", e))?;
        rows.iter()
            .map(record)
            .collect::<Result<_, _>>()
            .map_err(|e| self.error("list", "", e))
    }

    /// Runs the statement `change` picks on the row `name`, read first under the write lock:
    /// the record returned is the row as it was before (force-unlock, reset-slot).
    pub(crate) async fn change_row(
        &self,
        operation: &'static str,
        name: &str,
        change: fn(&Statements) -> &String,
    ) -> Result<Option<LockRecord>, LockError> {
        let run = async {
            let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
            let before = self
                .query(&self.statements.select_one)
                .bind(name.to_owned())
                .fetch_optional(&mut *tx)
                .await?;
            if before.is_some() {
                self.query(change(&self.statements))
                    .bind(name.to_owned())
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            before.as_ref().map(record).transpose()
        };
        run.await.map_err(|e| self.error(operation, name, e))
    }

    /// One row, by its primary key.
    pub(crate) async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let row = self
            .query(&self.statements.select_one)
            .bind(name.to_owned())
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| self.error("read", name, e))?;
        row.as_ref()
            .map(record)
            .transpose()
            .map_err(|e| self.error("read", name, e))
    }

    /// SQLite's clock is this host's, as for `lock-provider-sqlite`.
    pub(crate) async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        Ok(Utc::now())
    }
}
