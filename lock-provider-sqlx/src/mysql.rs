//! The MySQL and MariaDB backend: the kit's MySQL statements ([`lock_sql::sql::mysql`], the
//! very text and parameter order `lock-provider-mysql` runs) on a [`MySqlPool`].
//!
//! sqlx sets every MySQL connection's session time zone to `+00:00` unless the pool was built
//! with another `timezone`; a ShedLock table with `TIMESTAMP` columns needs exactly that, so the
//! zone of the pool's connections is checked once, when such a table is first inspected.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};
use lock_core::{AcquireOutcome, Lease, LockError, LockRecord, LockRequest};
use lock_sql::sql::SqlValue;
use lock_sql::sql::mysql::{COLUMNS_QUERY, ColumnInfo, NOW_PRECISE, Shape, Statements, Table};
use lock_sql::{ResolvedTable, fence_from_sql};
use sqlx::mysql::{MySqlArguments, MySqlPool, MySqlRow};
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, MySql, Row};

use crate::operations::{self, MySqlTables, SqlxOperations};

mod batch;

/// How many times an operation is tried again on a fresh connection after its connection
/// turned out dead; safe for every statement (see `lock-provider-mysql`'s session module).
const RETRIES: usize = 2;
/// `ER_NO_SUCH_TABLE`.
const NO_SUCH_TABLE: &str = "1146";
/// `ER_BAD_FIELD_ERROR`: a column was renamed or dropped after the table was inspected.
const BAD_FIELD: &str = "1054";
/// `ER_DUP_FIELDNAME`: another instance added the column first.
const DUPLICATE_COLUMN: &str = "1060";
/// How often a table with ShedLock's four columns only is inspected again, so that a
/// migration run by another instance is picked up (as `lock-provider-mysql` does).
const RECHECK_SHEDLOCK_TABLE: Duration = Duration::from_secs(60);

/// A MySQL or MariaDB table on a sqlx pool.
#[derive(Clone)]
pub(crate) struct MySqlBackend {
    pub(crate) pool: MySqlPool,
    pub(crate) table: Arc<Table>,
    cache: Arc<Cache>,
    /// Keep each statement prepared on its connection (sqlx's statement cache) or not.
    pub(crate) persistent: bool,
    /// The operations tables next to the lock table (`crate::operations`).
    pub(crate) operations: Option<Arc<SqlxOperations<MySqlTables>>>,
}

#[derive(Default)]
struct Cache {
    statements: Mutex<Option<Arc<Statements>>>,
    warned_shedlock_only: AtomicBool,
    warned_collation: AtomicBool,
}

impl Cache {
    fn get(&self) -> Option<Arc<Statements>> {
        self.statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, statements: Option<Arc<Statements>>) {
        *self
            .statements
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = statements;
    }
}

/// One operation, attempted again as a whole after a lost connection.
enum Op<'a> {
    Acquire(&'a LockRequest),
    Extend(&'a Lease, Duration),
    Release(&'a Lease, Duration),
    List,
    /// The row of this name (and any a case-insensitive collation finds equal).
    Read(&'a str),
    /// Force unlock or reset slot of the named row, read first under the row's lock.
    Change(&'a str, fn(&Statements) -> &str),
    Now,
}

/// What an operation's statements answered.
enum Reply {
    Acquired(Option<AcquireOutcome>, u64, u64),
    Done { last_insert_id: u64, affected: u64 },
    Rows(Vec<MySqlRow>),
    Now(NaiveDateTime),
}

fn utc(naive: NaiveDateTime) -> DateTime<Utc> {
    naive.and_utc()
}

fn code(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
            .map(|db| db.number().to_string()),
        _ => None,
    }
}

/// The connection died under the statement: another attempt gets a fresh one.
fn connection_lost(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Io(_) | sqlx::Error::Protocol(_))
        || matches!(code(e).as_deref(), Some("1053" | "1927" | "4031"))
}

/// The kit's parameters bound in order.
fn bind_all<'q>(
    mut query: Query<'q, MySql, MySqlArguments>,
    values: Vec<SqlValue>,
) -> Query<'q, MySql, MySqlArguments> {
    for value in values {
        query = match value {
            SqlValue::Text(text) => query.bind(text),
            SqlValue::Int(int) => query.bind(int),
            SqlValue::Timestamp(at) => query.bind(at),
        };
    }
    query
}

/// One row of `list` or `select_for_unlock`. The name column is `VARBINARY` in this library's
/// DDL, which sqlx will not decode as a `String` with its type check: the columns are ours,
/// so they are decoded unchecked, as mysql_async does.
fn record(row: &MySqlRow) -> Result<LockRecord, sqlx::Error> {
    Ok(LockRecord {
        name: row.try_get_unchecked::<String, _>(0)?,
        lock_until: utc(row.try_get_unchecked(1)?),
        locked_at: utc(row.try_get_unchecked(2)?),
        locked_by: row.try_get_unchecked::<String, _>(3)?,
        fence: fence_from_sql(row.try_get_unchecked(4)?),
        last_fire: row
            .try_get_unchecked::<Option<NaiveDateTime>, _>(5)?
            .map(utc),
        held: row.try_get_unchecked::<i64, _>(6)? != 0,
    })
}

impl MySqlBackend {
    /// `resolved`: the lock table's names, which the operations tables' derive from.
    pub(crate) fn new(pool: MySqlPool, table: Table, resolved: &ResolvedTable) -> Self {
        MySqlBackend {
            operations: operations::next_to(MySqlTables::new(pool.clone()), resolved),
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
        format!("mysql table {} (sqlx)", self.table.display())
    }

    pub(crate) fn create_table_sql(&self) -> String {
        self.table.create_ddl()
    }

    fn error(&self, operation: &'static str, lock: &str, e: sqlx::Error) -> LockError {
        match code(&e).as_deref() {
            Some(NO_SUCH_TABLE) => {
                self.cache.set(None);
                return self.table_missing(Some(e));
            }
            Some(BAD_FIELD) => self.cache.set(None),
            _ => {}
        }
        let options = self.pool.connect_options();
        let endpoint = crate::unreachable::Endpoint {
            database: "MySQL",
            host: options.get_host().to_owned(),
            port: options.get_port(),
            socket: options.get_socket().is_some(),
        };
        // ER_DBACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR, ER_BAD_DB_ERROR.
        let login = |db: &dyn sqlx::error::DatabaseError| {
            db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|db| matches!(db.number(), 1044 | 1045 | 1049))
        };
        match crate::unreachable::classify(&endpoint, self.pool.size(), login, e) {
            Ok(unreachable) => LockError::provider(operation, lock, self.describe(), unreachable),
            Err(e) => LockError::provider(operation, lock, self.describe(), e),
        }
    }

    fn table_missing(&self, source: Option<sqlx::Error>) -> LockError {
        LockError::TableMissing {
            table: self.table.display(),
            ddl: format!("{};", self.table.create_ddl()),
            source: source.map(Into::into),
        }
    }

    /// The table's columns and their types, by the kit's catalog query; none when it does
    /// not exist.
    async fn columns(
        &self,
        conn: &mut sqlx::MySqlConnection,
    ) -> Result<Vec<ColumnInfo>, sqlx::Error> {
        let rows = sqlx::query(COLUMNS_QUERY)
            .bind(self.table.schema())
            .bind(self.table.name())
            .fetch_all(&mut *conn)
            .await?;
        // information_schema's column types differ between MySQL and MariaDB versions
        // (`varchar`, `longtext`, binary strings): decoded unchecked.
        rows.iter()
            .map(|row| {
                Ok(ColumnInfo {
                    name: row.try_get_unchecked(0)?,
                    data_type: row.try_get_unchecked(1)?,
                    precision: row.try_get_unchecked(2)?,
                    collation: row.try_get_unchecked(3)?,
                    key: row.try_get_unchecked(4)?,
                    extra: row.try_get_unchecked(5)?,
                })
            })
            .collect()
    }

    /// Creates the table, or adds the extension columns a ShedLock table lacks; safe from
    /// every instance at once (`IF NOT EXISTS`, and a column added first elsewhere is fine).
    pub(crate) async fn ensure_schema(&self) -> Result<(), LockError> {
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| self.error("schema", "", e))?;
        sqlx::raw_sql(AssertSqlSafe(self.table.create_ddl()))
            .execute(&mut *conn)
            .await
            .map_err(|e| self.error("schema", "", e))?;
        let columns = self
            .columns(&mut conn)
            .await
            .map_err(|e| self.error("schema", "", e))?;
        let missing = self.table.missing_extension_columns(&columns);
        if let Some(alter) = self.table.migration_ddl(&missing) {
            tracing::info!(table = %self.table.display(), "adding the fence and last_fire columns: {alter}");
            match sqlx::raw_sql(AssertSqlSafe(alter))
                .execute(&mut *conn)
                .await
            {
                Ok(_) => {}
                Err(e) if code(&e).as_deref() == Some(DUPLICATE_COLUMN) => {}
                Err(e) => return Err(self.error("schema", "", e)),
            }
        }
        drop(conn);
        self.cache.set(None);
        self.statements("schema", "").await.map(drop)
    }

    /// The pairs of `names` the table's `name` column keeps in one row (none when it compares
    /// bytes, as a table `ensure_schema` made does), warning once with the fix when it does not.
    pub(crate) async fn names_sharing_a_row(
        &self,
        names: &[&str],
    ) -> Result<Vec<(String, String)>, LockError> {
        let found = async {
            let mut conn = self.pool.acquire().await?;
            let rows = self.columns(&mut conn).await?;
            let Some(query) = self
                .table
                .name_collation(&rows)
                .and_then(lock_sql::sql::mysql::names_sharing_a_row_query)
            else {
                return Ok(None);
            };
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = sqlx::query_as(AssertSqlSafe(query))
                .bind(lock_sql::sql::mysql::json_names(names))
                .fetch_all(&mut *conn)
                .await?;
            Ok(Some((self.table.name_collation_warning(&rows), pairs)))
        };
        let Some((warning, pairs)) = found.await.map_err(|e| self.error("check", "", e))? else {
            return Ok(Vec::new());
        };
        if let Some(warning) = warning
            && !self.cache.warned_collation.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(table = %self.table.display(), "{warning}");
        }
        let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
        Ok(pairs.into_iter().map(|(a, b)| (text(a), text(b))).collect())
    }

    /// The shape of the table as it is now (inspects it again).
    pub(crate) async fn check_schema(&self) -> Result<Shape, LockError> {
        self.cache.set(None);
        Ok(self.statements("schema", "").await?.shape())
    }

    /// The statements for the table as last inspected (again after a while for a ShedLock
    /// table, which another instance may migrate).
    async fn statements(
        &self,
        operation: &'static str,
        lock: &str,
    ) -> Result<Arc<Statements>, LockError> {
        if let Some(statements) = self.cache.get()
            && (statements.shape().extended
                || statements.prepared_at().elapsed() < RECHECK_SHEDLOCK_TABLE)
        {
            return Ok(statements);
        }
        let mut conn = self
            .pool
            .acquire()
            .await
            .map_err(|e| self.error(operation, lock, e))?;
        let rows = self
            .columns(&mut conn)
            .await
            .map_err(|e| self.error(operation, lock, e))?;
        let Some(shape) = self.table.layout_from(&rows)? else {
            if self.table.schema().is_none() {
                let database: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(|e| self.error(operation, lock, e))?;
                if database.is_none() {
                    return Err(LockError::InvalidConfiguration(format!(
                        "no database selected for lock table {}: name one in the pool's URL \
                         (mysql://host/database) or qualify the table (`database.{}`)",
                        self.table.name(),
                        self.table.name()
                    )));
                }
            }
            return Err(self.table_missing(None));
        };
        if let Some(warning) = self.table.name_collation_warning(&rows)
            && !self.cache.warned_collation.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(table = %self.table.display(), "{warning}");
        }
        if shape.zone_sensitive {
            // TIMESTAMP columns convert through the session zone: the pool's connections must
            // be in UTC, as sqlx makes them unless told otherwise.
            let zone: String = sqlx::query_scalar("SELECT @@session.time_zone")
                .fetch_one(&mut *conn)
                .await
                .map_err(|e| self.error(operation, lock, e))?;
            if !matches!(
                zone.to_ascii_lowercase().as_str(),
                "+00:00" | "+0:00" | "utc"
            ) {
                return Err(LockError::InvalidConfiguration(format!(
                    "lock table {} has TIMESTAMP columns, which convert through the session time \
                     zone, and the pool's connections are in {zone}: build the pool with \
                     MySqlConnectOptions::timezone(Some(\"+00:00\".into())) (sqlx's default), \
                     or run ensure_schema() on a new table (DATETIME(3) columns)",
                    self.table.display()
                )));
            }
        }
        if !shape.extended
            && !self
                .cache
                .warned_shedlock_only
                .swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                table = %self.table.display(),
                "the lock table has only ShedLock's four columns: leases exclude each other, but \
                 fences are 0, a stale holder is told apart by locked_by only, and a slot may run \
                 twice; run ensure_schema() to add the fence and last_fire columns"
            );
        }
        let statements = Arc::new(Statements::new(&self.table, shape));
        self.cache.set(Some(statements.clone()));
        Ok(statements)
    }

    /// Runs `op` with the current statements, again on a fresh connection when the
    /// connection died (see [`RETRIES`]).
    async fn run(
        &self,
        operation: &'static str,
        lock: &str,
        op: Op<'_>,
    ) -> Result<Reply, LockError> {
        let mut retries = 0;
        loop {
            let statements = self.statements(operation, lock).await?;
            match self.attempt(&statements, &op).await {
                Ok(done) => return Ok(done),
                Err(e) if connection_lost(&e) && retries < RETRIES => {
                    retries += 1;
                    tracing::debug!(operation, lock, error = %e, "mysql (sqlx): connection lost, retrying");
                }
                Err(e) => return Err(self.error(operation, lock, e)),
            }
        }
    }

    /// One attempt of `op`.
    async fn attempt(&self, statements: &Statements, op: &Op<'_>) -> Result<Reply, sqlx::Error> {
        let (text, values) = match *op {
            Op::Acquire(request) => {
                let (text, values) = statements.acquire(request);
                let done = self.query(text, values).execute(&self.pool).await?;
                let (id, affected) = (done.last_insert_id(), done.rows_affected());
                // Decoded with the statements that ran: the cached ones may change meanwhile.
                let outcome = statements.acquire_outcome(request, id, affected);
                return Ok(Reply::Acquired(outcome, id, affected));
            }
            Op::Extend(lease, at_most) => statements.extend(lease, at_most),
            Op::Release(lease, at_least) => statements.release(lease, at_least),
            Op::List => {
                let rows = self
                    .query(statements.list(), Vec::new())
                    .fetch_all(&self.pool)
                    .await?;
                return Ok(Reply::Rows(rows));
            }
            Op::Read(name) => {
                let rows = self
                    .query(statements.read(), vec![SqlValue::Text(name.to_owned())])
                    .fetch_all(&self.pool)
                    .await?;
                return Ok(Reply::Rows(rows));
            }
            Op::Change(lock, change) => {
                let name = || vec![SqlValue::Text(lock.to_owned())];
                let mut tx = self.pool.begin().await?;
                let before = self
                    .query(statements.select_for_unlock(), name())
                    .fetch_optional(&mut *tx)
                    .await?
                    // By bytes: a case-insensitive collation also finds `u_live` for `U_LIVE `,
                    // which an operator's unlock must not end.
                    .filter(|row| record(row).is_ok_and(|found| found.name == lock));
                if before.is_some() {
                    self.query(change(statements), name())
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                return Ok(Reply::Rows(before.into_iter().collect()));
            }
            Op::Now => {
                let now = sqlx::query_scalar(NOW_PRECISE)
                    .persistent(self.persistent)
                    .fetch_one(&self.pool)
                    .await?;
                return Ok(Reply::Now(now));
            }
        };
        let done = self.query(text, values).execute(&self.pool).await?;
        Ok(Reply::Done {
            last_insert_id: done.last_insert_id(),
            affected: done.rows_affected(),
        })
    }

    fn query(&self, text: &str, values: Vec<SqlValue>) -> Query<'static, MySql, MySqlArguments> {
        bind_all(sqlx::query(AssertSqlSafe(text.to_owned())), values).persistent(self.persistent)
    }

    /// The OK packet's `last_insert_id` and affected rows of a statement `op` executes.
    async fn done(
        &self,
        operation: &'static str,
        lock: &str,
        op: Op<'_>,
    ) -> Result<(u64, u64), LockError> {
        match self.run(operation, lock, op).await? {
            Reply::Done {
                last_insert_id,
                affected,
            } => Ok((last_insert_id, affected)),
            _ => unreachable!("an executed statement answers with an OK packet"),
        }
    }

    pub(crate) async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        let Reply::Acquired(outcome, id, affected) = self
            .run("acquire", &request.name, Op::Acquire(request))
            .await?
        else {
            unreachable!("an acquire answers with its outcome")
        };
        outcome.ok_or_else(|| {
            LockError::provider(
                "acquire",
                &*request.name,
                self.describe(),
                format!(
                    "unexpected answer to the acquire statement (last_insert_id {id}, affected \
                     rows {affected}); the lock was not taken"
                ),
            )
        })
    }

    pub(crate) async fn extend(&self, lease: &Lease, at_most: Duration) -> Result<bool, LockError> {
        let (id, _) = self
            .done("extend", lease.name(), Op::Extend(lease, at_most))
            .await?;
        Ok(id == 1)
    }

    pub(crate) async fn release(
        &self,
        lease: &Lease,
        at_least: Duration,
    ) -> Result<bool, LockError> {
        let (id, _) = self
            .done("release", lease.name(), Op::Release(lease, at_least))
            .await?;
        Ok(id == 1)
    }

    pub(crate) async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let Reply::Rows(rows) = self.run("read", name, Op::Read(name)).await? else {
            unreachable!("read answers with rows")
        };
        for row in &rows {
            let record =
                record(row).map_err(|e| LockError::provider("read", name, self.describe(), e))?;
            // By bytes: a case-insensitive collation also matches names differing in case.
            if record.name == name {
                return Ok(Some(record));
            }
        }
        Ok(None)
    }

    pub(crate) async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        let Reply::Rows(rows) = self.run("list", "", Op::List).await? else {
            unreachable!("list answers with rows")
        };
        let mut records = rows
            .iter()
            .map(record)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| LockError::provider("list", "", self.describe(), e))?;
        // Sorted here, by bytes: the table's collation may order names differently.
        records.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(records)
    }

    /// Runs the statement `change` picks on the row `name`, read first under the row's lock:
    /// the record returned is the row as it was before (force-unlock, reset-slot).
    pub(crate) async fn change_row(
        &self,
        operation: &'static str,
        name: &str,
        change: fn(&Statements) -> &str,
    ) -> Result<Option<LockRecord>, LockError> {
        let Reply::Rows(before) = self.run(operation, name, Op::Change(name, change)).await? else {
            unreachable!("a change answers with the row as it was")
        };
        before
            .first()
            .map(record)
            .transpose()
            .map_err(|e| LockError::provider(operation, name, self.describe(), e))
    }

    pub(crate) async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        let Reply::Now(now) = self.run("now", "", Op::Now).await? else {
            unreachable!("now answers with a time")
        };
        Ok(utc(now))
    }
}
