//! Connections and statements: a pooled connection per operation, the table's shape cached
//! across operations, and one more attempt when a connection or a prepared statement turned
//! out to be stale.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use deadpool_postgres::{Object, Pool};
use futures_util::TryStreamExt;
use lock_core::LockError;
use lock_sql::ResolvedTable;
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

use crate::statements::Statements;
use crate::table::{self, Found, TableShape};

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

/// The pool, the table, and the statements for the table as last found; shared by clones of a
/// provider.
#[derive(Clone)]
pub(crate) struct Session {
    pub(crate) pool: Pool,
    pub(crate) table: Arc<ResolvedTable>,
    shape: Arc<ShapeCache>,
    /// Prepare each statement once per connection and keep it (`true`), or send it unnamed
    /// with its parameter types every time (`false`: nothing outlives the transaction, as
    /// PgBouncer's transaction pooling needs).
    pub(crate) statement_cache: bool,
    /// `host:port` of the server, when the provider built the pool (for connect errors).
    pub(crate) endpoint: Option<Arc<str>>,
}

/// The statements for the table as last found.
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

/// How a statement is planned by the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Prepared once per connection and kept (unless the statement cache is off).
    Cached,
    /// Sent unnamed, so the server plans each execution for the parameters it is given: the
    /// batch statements over arrays. A prepared statement switches to a generic plan after
    /// five executions when that one looks no costlier, and the generic plan of these
    /// statements guesses a few array elements: it joined a thousand names pairwise (nested
    /// loops over the statement's CTEs), 300 ms of the server's CPU per batch on the
    /// connections whose plan had switched (the `burst` benchmark's stalled seconds).
    /// Parsing and planning a batch costs about a millisecond, once per burst.
    EachExecution,
}

/// What a statement's reply is read as: its rows (`Vec<Row>`), or how many rows it changed
/// (`u64`). [`Session::run`] is generic over it, so each caller gets the type it asked for.
pub(crate) trait Reply: Sized {
    fn send<'a>(
        client: &'a tokio_postgres::Client,
        statement: &'a tokio_postgres::Statement,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Self, tokio_postgres::Error>> + Send + 'a;

    /// The statement sent unnamed with its parameter types, in one round trip (Parse, Bind,
    /// Execute, Sync), so no prepared statement is left on the server connection.
    fn send_unnamed<'a>(
        client: &'a tokio_postgres::Client,
        sql: &'a str,
        params: Vec<(&'a (dyn ToSql + Sync), Type)>,
    ) -> impl Future<Output = Result<Self, tokio_postgres::Error>> + Send + 'a;
}

impl Reply for Vec<Row> {
    fn send<'a>(
        client: &'a tokio_postgres::Client,
        statement: &'a tokio_postgres::Statement,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Self, tokio_postgres::Error>> + Send + 'a {
        client.query(statement, params)
    }

    async fn send_unnamed<'a>(
        client: &'a tokio_postgres::Client,
        sql: &'a str,
        params: Vec<(&'a (dyn ToSql + Sync), Type)>,
    ) -> Result<Self, tokio_postgres::Error> {
        client.query_typed(sql, &params).await
    }
}

impl Reply for u64 {
    fn send<'a>(
        client: &'a tokio_postgres::Client,
        statement: &'a tokio_postgres::Statement,
        params: &'a [&'a (dyn ToSql + Sync)],
    ) -> impl Future<Output = Result<Self, tokio_postgres::Error>> + Send + 'a {
        client.execute(statement, params)
    }

    async fn send_unnamed<'a>(
        client: &'a tokio_postgres::Client,
        sql: &'a str,
        params: Vec<(&'a (dyn ToSql + Sync), Type)>,
    ) -> Result<Self, tokio_postgres::Error> {
        let rows = client.query_typed_raw(sql, params).await?;
        let mut rows = std::pin::pin!(rows);
        // Drained to the end: the count arrives with CommandComplete.
        while rows.try_next().await?.is_some() {}
        Ok(rows.rows_affected().unwrap_or(0))
    }
}

impl Session {
    pub(crate) fn new(pool: Pool, table: ResolvedTable) -> Self {
        Session {
            pool,
            table: Arc::new(table),
            shape: Arc::default(),
            statement_cache: true,
            endpoint: None,
        }
    }

    /// `postgres table <schema.table>`, for errors and logs.
    pub(crate) fn describe(&self) -> String {
        format!("postgres table {}", self.table.display)
    }

    /// Forgets the table's shape, so that the next operation looks at the table again.
    pub(crate) fn forget_shape(&self) {
        self.shape.clear();
    }

    pub(crate) async fn client(
        &self,
        operation: &'static str,
        lock: &str,
    ) -> Result<Object, LockError> {
        self.pool.get().await.map_err(|e| {
            match crate::connection::unreachable(self.endpoint.as_deref(), e) {
                Ok(unreachable) => {
                    LockError::provider(operation, lock, self.describe(), unreachable)
                }
                Err(e) => LockError::provider(operation, lock, self.describe(), e),
            }
        })
    }

    /// Creates or migrates the table (see [`table::ensure`]).
    pub(crate) async fn ensure_table(&self) -> Result<(), LockError> {
        let mut client = self.client("schema", "").await?;
        table::ensure(&mut client, &self.table)
            .await
            .map_err(|e| self.db_error("schema", "", e))?;
        drop(client);
        self.shape.clear();
        Ok(())
    }

    /// The statements for the table's current shape, looking at the table if needed.
    pub(crate) async fn statements(&self) -> Result<Arc<Statements>, LockError> {
        let client = self.client("schema", "").await?;
        self.statements_for(&client)
            .await
            .map_err(|failure| match failure {
                Failure::Db(e) => self.db_error("schema", "", e),
                Failure::Lock(e) => e,
            })
    }

    /// The statements for the table's current shape, finding the shape on first use.
    async fn statements_for(&self, client: &Object) -> Result<Arc<Statements>, Failure> {
        if let Some(statements) = self.shape.get() {
            return Ok(statements);
        }
        let columns = match table::find(&***client, &self.table).await? {
            Found::Missing => return Err(Failure::Lock(self.table_missing(None))),
            Found::Present(columns) => columns,
        };
        let shape = table::shape_of(&self.table, &columns).map_err(Failure::Lock)?;
        if shape == TableShape::ShedLockOnly && !self.shape.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                table = %self.table.display,
                "lock table {} has only ShedLock's columns: locks are exclusive, but fencing \
                 tokens are 0 and once-per-slot is not enforced until the table is migrated; \
                 call ensure_schema() or run:\n{}",
                self.table.display,
                table::add_extension_columns(&self.table)
            );
        }
        let statements = Arc::new(Statements::new(&self.table, shape));
        self.shape.set(statements.clone());
        Ok(statements)
    }

    /// Runs one statement on a pooled connection, trying again when the connection turned out
    /// to be dead or the statement stale (see [`RETRIES`]); prepared once per connection unless
    /// the statement cache is off.
    pub(crate) async fn run<R: Reply>(
        &self,
        operation: &'static str,
        lock: &str,
        pick: fn(&Statements) -> &str,
        types: &[Type],
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<R, LockError> {
        self.run_planned(operation, lock, pick, types, params, Plan::Cached)
            .await
    }

    /// [`run`](Self::run), planned as `plan` says.
    pub(crate) async fn run_planned<R: Reply>(
        &self,
        operation: &'static str,
        lock: &str,
        pick: fn(&Statements) -> &str,
        types: &[Type],
        params: &[&(dyn ToSql + Sync)],
        plan: Plan,
    ) -> Result<R, LockError> {
        let prepared = plan == Plan::Cached && self.statement_cache;
        let mut retries = 0;
        loop {
            let client = self.client(operation, lock).await?;
            let attempt = async {
                let statements = self.statements_for(&client).await?;
                if !prepared {
                    let typed = params.iter().copied().zip(types.iter().cloned()).collect();
                    return Ok(R::send_unnamed(&client, pick(&statements), typed).await?);
                }
                // Prepared once per connection, then served from the connection's cache.
                let statement = client
                    .prepare_typed_cached(pick(&statements), types)
                    .await?;
                Ok::<_, Failure>(R::send(&client, &statement, params).await?)
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

    fn table_missing(&self, source: Option<tokio_postgres::Error>) -> LockError {
        LockError::TableMissing {
            table: self.table.display.clone(),
            ddl: table::create_table(&self.table),
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

    /// A row that could not be decoded.
    pub(crate) fn row_error(
        &self,
        operation: &'static str,
        lock: &str,
        e: tokio_postgres::Error,
    ) -> LockError {
        LockError::provider(operation, lock, self.describe(), e)
    }

    /// An answer no statement of ours can give.
    pub(crate) fn unexpected(&self, operation: &'static str, lock: &str, what: &str) -> LockError {
        LockError::provider(operation, lock, self.describe(), what.to_owned())
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
