//! The PostgreSQL backend: the kit's PostgreSQL statements ([`lock_sql::sql::postgres`],
//! the very text `lock-provider-postgres` runs) on a [`PgPool`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use lock_core::{
    AcquireOutcome, Lease, LockError, LockRecord, LockRequest, Refusal, RefusalReason,
};
use lock_sql::sql::SqlValue;
use lock_sql::sql::postgres::{self as sql, LockStatements, TableShape};
use lock_sql::{ResolvedTable, at_least_millis, fence_from_sql, fence_to_sql, lease_millis};
use sqlx::postgres::{PgArguments, PgPool, PgRow};
use sqlx::{AssertSqlSafe, Postgres as Pg, Row};

use crate::operations::{self, PgTables, SqlxOperations};

mod batch;

/// How many times an operation is tried again after its connection turned out dead, its
/// prepared statement stale, or the table's columns changed. Safe for every statement, as in
/// `lock-provider-postgres`: release and extend are idempotent for one lease, and an acquire
/// that did commit makes the retry see the lock held, so the fire is skipped.
const RETRIES: usize = 2;

/// A PostgreSQL table on a sqlx pool.
#[derive(Clone)]
pub(crate) struct PgBackend {
    pub(crate) pool: PgPool,
    pub(crate) table: Arc<ResolvedTable>,
    cache: Arc<ShapeCache>,
    /// Prepare each statement once per connection and keep it (sqlx's statement cache), or
    /// prepare and close it each time (`persistent(false)`, for PgBouncer in transaction mode).
    pub(crate) persistent: bool,
    /// The operations tables next to the lock table (`crate::operations`).
    pub(crate) operations: Option<Arc<SqlxOperations<PgTables>>>,
}

#[derive(Default)]
struct ShapeCache {
    statements: Mutex<Option<Arc<LockStatements>>>,
    warned: AtomicBool,
}

impl ShapeCache {
    fn get(&self) -> Option<Arc<LockStatements>> {
        self.statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, statements: Option<Arc<LockStatements>>) {
        // Replaced whole: a poisoned lock still holds a consistent value.
        *self
            .statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = statements;
    }
}

/// How the server plans a statement.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// Prepared once per connection and kept (sqlx's statement cache), unless the cache is off.
    Cached,
    /// Sent unnamed (`persistent(false)`), so the server plans each execution for the
    /// parameters it is given: the batch statements over arrays. A prepared statement switches
    /// to a generic plan after five executions, and the generic plan of these statements
    /// guesses a few array elements (`lock-provider-postgres` measured 300 ms of the server's
    /// CPU per batch of a thousand names on it); parsing and planning costs about a
    /// millisecond per batch.
    EachExecution,
}

/// A statement with the parameters still to bind.
type PgQuery = sqlx::query::Query<'static, Pg, PgArguments>;

/// What a statement answered.
enum Reply {
    Rows(Vec<PgRow>),
    Changed(u64),
}

/// Why an attempt failed.
enum Failure {
    Db(sqlx::Error),
    Lock(LockError),
}

impl From<sqlx::Error> for Failure {
    fn from(e: sqlx::Error) -> Self {
        Failure::Db(e)
    }
}

/// Why another attempt can succeed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stale {
    Connection,
    Statement,
    Shape,
}

fn stale(e: &sqlx::Error) -> Option<Stale> {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::Protocol(_) => Some(Stale::Connection),
        sqlx::Error::Database(db) => match db.code().as_deref() {
            // admin_shutdown: the backend was terminated (pg_terminate_backend, a restart).
            Some("57P01") => Some(Stale::Connection),
            // "cached plan must not change result type": prepared against an older table.
            Some("0A000") if db.message().contains("cached plan") => Some(Stale::Statement),
            // undefined_column: the table changed under the statements.
            Some("42703") => Some(Stale::Shape),
            _ => None,
        },
        _ => None,
    }
}

fn utc(naive: NaiveDateTime) -> DateTime<Utc> {
    naive.and_utc()
}

impl PgBackend {
    pub(crate) fn new(pool: PgPool, table: ResolvedTable) -> Self {
        PgBackend {
            operations: operations::next_to(PgTables::new(pool.clone()), &table),
            pool,
            table: Arc::new(table),
            cache: Arc::default(),
            persistent: true,
        }
    }

    /// Turns the statement cache on or off, for the lock and the operations statements.
    pub(crate) fn set_statement_cache(&mut self, cache: bool) {
        self.persistent = cache;
        self.operations = operations::with_statement_cache(self.operations.take(), cache);
    }

    pub(crate) fn describe(&self) -> String {
        format!("postgres table {} (sqlx)", self.table.display)
    }

    pub(crate) fn create_table_sql(&self) -> String {
        sql::create_table(&self.table)
    }

    fn error(&self, operation: &'static str, lock: &str, e: sqlx::Error) -> LockError {
        if let sqlx::Error::Database(db) = &e {
            match db.code().as_deref() {
                // undefined_table: dropped since we last looked.
                Some("42P01") => {
                    self.cache.set(None);
                    return self.table_missing(Some(e));
                }
                Some("42703") => self.cache.set(None),
                _ => {}
            }
        }
        let options = self.pool.connect_options();
        let endpoint = crate::unreachable::Endpoint {
            database: "PostgreSQL",
            host: options.get_host().to_owned(),
            port: options.get_port(),
            socket: options.get_socket().is_some(),
        };
        // invalid_authorization_specification, invalid_password, invalid_catalog_name.
        let login = |db: &dyn sqlx::error::DatabaseError| {
            matches!(db.code().as_deref(), Some("28000" | "28P01" | "3D000"))
        };
        match crate::unreachable::classify(&endpoint, self.pool.size(), login, e) {
            Ok(unreachable) => LockError::provider(operation, lock, self.describe(), unreachable),
            Err(e) => LockError::provider(operation, lock, self.describe(), e),
        }
    }

    fn table_missing(&self, source: Option<sqlx::Error>) -> LockError {
        LockError::TableMissing {
            table: self.table.display.clone(),
            ddl: sql::create_table(&self.table),
            source: source.map(Into::into),
        }
    }

    /// The table's columns (`None` when it does not exist), by the kit's catalog query.
    async fn columns<'e, E>(
        &self,
        executor: E,
    ) -> Result<Option<Vec<(String, String)>>, sqlx::Error>
    where
        E: sqlx::Executor<'e, Database = Pg>,
    {
        let rows = sqlx::query(sql::COLUMNS_QUERY)
            .bind(self.table.qualified.as_str())
            .persistent(false)
            .fetch_all(executor)
            .await?;
        let present = match rows.first() {
            Some(row) => row.try_get::<bool, _>(0)?,
            None => false,
        };
        if !present {
            return Ok(None);
        }
        let mut columns = Vec::with_capacity(rows.len());
        for row in &rows {
            if let Some(name) = row.try_get::<Option<String>, _>(1)? {
                columns.push((name, row.try_get::<String, _>(2)?));
            }
        }
        Ok(Some(columns))
    }

    /// Creates or migrates the table in one transaction under the same advisory lock as
    /// `lock-provider-postgres`, so instances of both serialize their start-up DDL.
    pub(crate) async fn ensure_schema(&self) -> Result<(), LockError> {
        let run = async {
            let mut tx = self.pool.begin().await?;
            let key = sql::ensure_schema_lock_key(&self.table);
            sqlx::query(sql::ENSURE_SCHEMA_LOCK)
                .bind(key)
                .persistent(false)
                .execute(&mut *tx)
                .await?;
            let columns = self.columns(&mut *tx).await?;
            if let Some(ddl) = sql::schema_change(&self.table, columns.as_deref()) {
                // Several statements: the simple protocol (no parameters, no prepare).
                sqlx::raw_sql(AssertSqlSafe(ddl)).execute(&mut *tx).await?;
            }
            tx.commit().await
        };
        run.await.map_err(|e| self.error("schema", "", e))?;
        self.cache.set(None);
        self.check_schema().await.map(|_| ())
    }

    pub(crate) async fn check_schema(&self) -> Result<TableShape, LockError> {
        self.cache.set(None);
        Ok(self.statements().await?.shape)
    }

    /// The statements for the table's current shape, looking at the table on first use.
    pub(crate) async fn statements(&self) -> Result<Arc<LockStatements>, LockError> {
        if let Some(statements) = self.cache.get() {
            return Ok(statements);
        }
        // In a transaction for PgBouncer (see `run`); a read-only one costs nothing to end.
        let inspect = async {
            let mut tx = self.pool.begin().await?;
            let columns = self.columns(&mut *tx).await?;
            tx.commit().await?;
            Ok(columns)
        };
        let columns = inspect
            .await
            .map_err(|e| self.error("schema", "", e))?
            .ok_or_else(|| self.table_missing(None))?;
        let shape = sql::shape_of(&self.table, &columns)?;
        if shape == TableShape::ShedLockOnly && !self.cache.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                table = %self.table.display,
                "lock table {} has only ShedLock's columns: locks are exclusive, but fencing \
                 tokens are 0 and once-per-slot is not enforced until the table is migrated; \
                 call ensure_schema() or run:\n{}",
                self.table.display,
                sql::add_extension_columns(&self.table)
            );
        }
        let statements = Arc::new(LockStatements::new(&self.table, shape));
        self.cache.set(Some(statements.clone()));
        Ok(statements)
    }

    /// Runs the statement `pick` chooses with `params` (`$1`, `$2`, ... in order), trying
    /// again when the connection died, the statement went stale or the table changed (see
    /// [`RETRIES`]). Rows are fetched unless `execute`, which returns the rows changed.
    async fn run(
        &self,
        operation: &'static str,
        lock: &str,
        pick: fn(&LockStatements) -> &String,
        params: &[SqlValue],
        execute: bool,
    ) -> Result<Reply, LockError> {
        let bind = |mut query: PgQuery| {
            for value in params {
                query = match value {
                    SqlValue::Text(text) => query.bind(text.clone()),
                    SqlValue::Int(int) => query.bind(*int),
                    SqlValue::Timestamp(at) => query.bind(*at),
                };
            }
            query
        };
        self.run_planned(operation, lock, pick, &bind, execute, Plan::Cached)
            .await
    }

    /// [`run`](Self::run) with the parameters `bind` adds (again at each attempt), planned as
    /// `plan` says.
    async fn run_planned(
        &self,
        operation: &'static str,
        lock: &str,
        pick: fn(&LockStatements) -> &String,
        bind: &(dyn Fn(PgQuery) -> PgQuery + Send + Sync),
        execute: bool,
        plan: Plan,
    ) -> Result<Reply, LockError> {
        let mut retries = 0;
        let mut persistent = self.persistent && plan == Plan::Cached;
        loop {
            let attempt = async {
                let statements = self.statements().await.map_err(Failure::Lock)?;
                let query = bind(
                    sqlx::query(AssertSqlSafe(pick(&statements).clone())).persistent(persistent),
                );
                if self.persistent {
                    // sqlx holds one pooled connection for the whole query, so an unnamed
                    // statement's two exchanges reach one server connection (PgBouncer may
                    // split them: below).
                    return Ok::<_, Failure>(if execute {
                        Reply::Changed(query.execute(&self.pool).await?.rows_affected())
                    } else {
                        Reply::Rows(query.fetch_all(&self.pool).await?)
                    });
                }
                // sqlx sends an unprepared statement in two exchanges (Parse and Describe, then
                // Bind and Execute), and PgBouncer in transaction mode may move a client
                // between server connections at any exchange outside a transaction: the
                // transaction keeps both on one server connection.
                let mut tx = self.pool.begin().await?;
                let reply = if execute {
                    Reply::Changed(query.execute(&mut *tx).await?.rows_affected())
                } else {
                    Reply::Rows(query.fetch_all(&mut *tx).await?)
                };
                tx.commit().await?;
                Ok(reply)
            }
            .await;
            match attempt {
                Ok(done) => return Ok(done),
                Err(Failure::Lock(e)) => return Err(e),
                Err(Failure::Db(e)) => match stale(&e) {
                    Some(why) if retries < RETRIES => {
                        retries += 1;
                        tracing::debug!(operation, lock, error = %e, "postgres (sqlx): retrying");
                        match why {
                            // sqlx closes a connection whose I/O failed; the next one is new.
                            Stale::Connection => {}
                            // The connection keeps its stale plan: prepare afresh.
                            Stale::Statement => persistent = false,
                            Stale::Shape => self.cache.set(None),
                        }
                    }
                    _ => return Err(self.error(operation, lock, e)),
                },
            }
        }
    }

    async fn rows(
        &self,
        operation: &'static str,
        lock: &str,
        pick: fn(&LockStatements) -> &String,
        params: &[SqlValue],
    ) -> Result<Vec<PgRow>, LockError> {
        match self.run(operation, lock, pick, params, false).await? {
            Reply::Rows(rows) => Ok(rows),
            Reply::Changed(_) => unreachable!("rows were asked for"),
        }
    }

    pub(crate) async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        let name: &str = &request.name;
        let slot = request.slot.map(|s| s.instant().naive_utc());
        // $1 name, $2 lock_at_most_for (ms), $3 locked_by, $4 slot, $5 max slot lead (ms), $6
        // give up at.
        let params = [
            SqlValue::Text(name.to_owned()),
            SqlValue::Int(lease_millis(request.lock_at_most_for)),
            SqlValue::Text(request.locked_by.to_string()),
            SqlValue::Timestamp(slot),
            SqlValue::Int(lease_millis(request.max_slot_lead)),
            SqlValue::Timestamp(request.give_up_at.map(|at| at.naive_utc())),
        ];
        let rows = self.rows("acquire", name, |s| &s.acquire, &params).await?;
        let Some(row) = rows.first() else {
            // No row for this name: its first fire, or the row was deleted by hand.
            let rows = self.rows("acquire", name, |s| &s.create, &params).await?;
            let row = rows.first().ok_or_else(|| {
                LockError::provider(
                    "acquire",
                    name,
                    self.describe(),
                    "the create statement returned no row",
                )
            })?;
            let parse = || -> Result<(Option<i64>, NaiveDateTime, bool), sqlx::Error> {
                Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
            };
            let (granted, db_now, too_late) =
                parse().map_err(|e| self.error("acquire", name, e))?;
            return Ok(match granted {
                Some(fence) => {
                    AcquireOutcome::Acquired(Lease::granted(request, fence_from_sql(fence)))
                }
                None if too_late => AcquireOutcome::Refused(Refusal::too_late(utc(db_now))),
                None if request.slot_too_far_ahead(utc(db_now)) => {
                    AcquireOutcome::Refused(Refusal::slot_in_future(utc(db_now)))
                }
                // Another instance created it between our two statements: it holds the lock.
                None => AcquireOutcome::Refused(Refusal::new(RefusalReason::Held)),
            });
        };
        let parse = || -> Result<(AcquireOutcome, DateTime<Utc>), sqlx::Error> {
            let db_now = utc(row.try_get::<NaiveDateTime, _>(5)?);
            if let Some(fence) = row.try_get::<Option<i64>, _>(0)? {
                let lease = Lease::granted(request, fence_from_sql(fence));
                return Ok((AcquireOutcome::Acquired(lease), db_now));
            }
            let locked_by: Option<String> = row.try_get(1)?;
            let lock_until: Option<NaiveDateTime> = row.try_get(2)?;
            let last_fire: Option<NaiveDateTime> = row.try_get(3)?;
            let held: bool = row.try_get(4)?;
            let too_late: bool = row.try_get(6)?;
            let refusal = lock_sql::sql::postgres::refusal(
                request, locked_by, lock_until, last_fire, held, db_now, too_late,
            );
            Ok((AcquireOutcome::Refused(refusal), db_now))
        };
        let (outcome, db_now) = parse().map_err(|e| self.error("acquire", name, e))?;
        // Refused, yet the row the statement read was free with its slot not run: it lost a
        // race, and the row read again tells who won (`refusal_as_committed`). A read that
        // fails keeps the refusal it was.
        Ok(match outcome {
            AcquireOutcome::Refused(refusal) if refusal.database_now.is_none() => {
                AcquireOutcome::Refused(match self.read_lock(name).await {
                    Ok(Some(row)) => {
                        lock_sql::sql::postgres::refusal_as_committed(request, row, db_now)
                    }
                    _ => refusal,
                })
            }
            outcome => outcome,
        })
    }

    /// Release or extend of an owned lease: true when the row was the lease's.
    async fn change_lease(
        &self,
        operation: &'static str,
        pick: fn(&LockStatements) -> &String,
        lease: &Lease,
        millis: i64,
    ) -> Result<bool, LockError> {
        // $1 name, $2 locked_by, $3 fence, $4 the duration in ms: the same for both.
        let params = [
            SqlValue::Text(lease.name().to_owned()),
            SqlValue::Text(lease.locked_by().to_owned()),
            SqlValue::Int(fence_to_sql(lease)),
            SqlValue::Int(millis),
        ];
        match self
            .run(operation, lease.name(), pick, &params, true)
            .await?
        {
            Reply::Changed(n) => Ok(n > 0),
            Reply::Rows(_) => unreachable!("a count was asked for"),
        }
    }

    pub(crate) async fn release(
        &self,
        lease: &Lease,
        at_least: Duration,
    ) -> Result<bool, LockError> {
        self.change_lease("release", |s| &s.release, lease, at_least_millis(at_least))
            .await
    }

    pub(crate) async fn extend(&self, lease: &Lease, at_most: Duration) -> Result<bool, LockError> {
        self.change_lease("extend", |s| &s.extend, lease, lease_millis(at_most))
            .await
    }

    fn record(&self, operation: &'static str, row: &PgRow) -> Result<LockRecord, LockError> {
        let name: String = row.try_get(0).map_err(|e| self.error(operation, "", e))?;
        let parse = || -> Result<LockRecord, sqlx::Error> {
            Ok(LockRecord {
                lock_until: utc(row.try_get(1)?),
                locked_at: utc(row.try_get(2)?),
                locked_by: row.try_get(3)?,
                fence: fence_from_sql(row.try_get(4)?),
                last_fire: row.try_get::<Option<NaiveDateTime>, _>(5)?.map(utc),
                held: row.try_get(6)?,
                name: name.clone(),
            })
        };
        parse().map_err(|e| self.error(operation, &name, e))
    }

    pub(crate) async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        let rows = self.rows("list", "", |s| &s.list, &[]).await?;
        rows.iter().map(|row| self.record("list", row)).collect()
    }

    /// One row, by its primary key.
    pub(crate) async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.change_row("read", name, |s| &s.read).await
    }

    /// Force unlock or reset slot: one statement returning the row as it was.
    pub(crate) async fn change_row(
        &self,
        operation: &'static str,
        name: &str,
        pick: fn(&LockStatements) -> &String,
    ) -> Result<Option<LockRecord>, LockError> {
        let rows = self
            .rows(operation, name, pick, &[SqlValue::Text(name.to_owned())])
            .await?;
        rows.first()
            .map(|row| self.record(operation, row))
            .transpose()
    }

    pub(crate) async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        let rows = self.rows("now", "", |s| &s.now, &[]).await?;
        let row = rows.first().ok_or_else(|| {
            LockError::provider("now", "", self.describe(), "SELECT returned no row")
        })?;
        let now: NaiveDateTime = row.try_get(0).map_err(|e| self.error("now", "", e))?;
        Ok(utc(now))
    }
}
