//! Connections and statements: what every connection the provider uses must be like and how
//! it gets that way, and the statements for the table as last inspected.
//!
//! - **Session time zone `+00:00`.** `UTC_TIMESTAMP()` does not depend on it, and neither do
//!   `DATETIME` columns, but a ShedLock table's `TIMESTAMP(3)` columns convert every value through
//!   the session zone: in a zone with daylight saving time some UTC wall times cannot be stored
//!   at all (ShedLock issue 1876) and read-back times would be local. Pinned by a `setup`
//!   statement, which mysql_async runs on every new connection and again after every reset.
//! - **No reset when a connection returns to the pool.** mysql_async resets pooled connections
//!   by default (`COM_RESET_CONNECTION`), which also drops their prepared statements, so each
//!   use would prepare its statement again: one more round trip per operation. The provider
//!   leaves nothing in a session that a reset would need to clear.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use lock_core::LockError;
use lock_sql::{ConnectError, ConnectFailure};
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Opts, OptsBuilder, Pool};

use crate::statements::Statements;
use crate::table::{COLUMNS_QUERY, ColumnInfo, ColumnRow, Shape, Table, column_info};
use lock_sql::sql::mysql::{json_names, names_sharing_a_row_query};

/// The statement that pins the session time zone to UTC.
pub(crate) const UTC_SESSION: &str = "SET time_zone = '+00:00'";

/// See [`crate::MySqlLockProvider::pool_options`].
pub(crate) fn pool_options(opts: Opts) -> OptsBuilder {
    let mut setup: Vec<String> = opts.setup().to_vec();
    setup.push(UTC_SESSION.to_owned());
    let pool_opts = opts.pool_opts().clone().with_reset_connection(false);
    OptsBuilder::from_opts(opts)
        .setup(setup)
        .pool_opts(pool_opts)
}

/// How a borrowed connection was made ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Readiness {
    /// Nothing to do: the pool's own options pin the zone, or the table does not care.
    Ready,
    /// The pool does not pin the zone and the table has `TIMESTAMP` columns, so the zone was set
    /// on this connection now, at the cost of a round trip.
    ZoneSetNow,
}

/// Makes a connection just taken from the pool fit for the provider's statements.
/// `pool_pins_utc` is [`pins_utc`] of the pool's options, worked out once per pool.
pub(crate) async fn ready(
    conn: &mut Conn,
    pool_pins_utc: bool,
    zone_sensitive: bool,
) -> Result<Readiness, mysql_async::Error> {
    if pool_pins_utc || !zone_sensitive {
        // Keep prepared statements across uses (see the module docs).
        conn.reset_connection(false);
        return Ok(Readiness::Ready);
    }
    // A pool the provider does not configure: set the zone for this use, and leave the pool's
    // reset policy alone so that, if it resets, the owner's session settings come back.
    conn.query_drop(UTC_SESSION).await?;
    Ok(Readiness::ZoneSetNow)
}

/// Whether a pool's options already pin the session zone to UTC.
pub(crate) fn pins_utc(opts: &Opts) -> bool {
    opts.init()
        .iter()
        .chain(opts.setup())
        .any(|statement| sets_utc(statement))
}

fn sets_utc(statement: &str) -> bool {
    let compact: String = statement
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect::<String>()
        .to_ascii_lowercase();
    ["'+00:00'", "\"+00:00\"", "'+0:00'", "'utc'", "\"utc\""]
        .iter()
        .any(|zone| compact.contains(&format!("time_zone={zone}")))
}

/// `ER_NO_SUCH_TABLE`.
const NO_SUCH_TABLE: u16 = 1146;
/// `ER_BAD_FIELD_ERROR`: a column was renamed or dropped after the table was inspected.
const BAD_FIELD: u16 = 1054;
/// `ER_DUP_FIELDNAME`: another instance added the column first.
const DUPLICATE_COLUMN: u16 = 1060;
/// How many times an operation is tried again on a fresh connection after its connection
/// turned out dead when the statement was sent (see [`connection_lost`]).
///
/// The pool drops a connection whose close it has seen, but a connection that died without a
/// FIN reaching the client (a failover, a NAT or proxy timeout, a host that lost its state) is
/// handed out as alive and fails only at its next statement. Trying again is safe for every
/// statement even when the lost attempt might have executed: release and extend are idempotent
/// for one lease, a repeated force-unlock reads the row it already ended, and an acquire that
/// did commit makes the retry see the lock held (by us), so the fire is skipped and the lease
/// runs out at `lock_at_most_for`, as if the holder had died; exclusion is never broken.
/// PostgreSQL's provider does the same.
const RETRIES: usize = 2;
/// `ER_SERVER_SHUTDOWN`: the server is going down and ended the session.
const SERVER_SHUTDOWN: u16 = 1053;
/// MariaDB's `ER_CONNECTION_KILLED`, sent to a session ended by `KILL`.
const CONNECTION_KILLED: u16 = 1927;
/// MySQL's `ER_CLIENT_INTERACTION_TIMEOUT`: the session outlived `wait_timeout`.
const INTERACTION_TIMEOUT: u16 = 4031;
/// How often a table found with ShedLock's four columns only is inspected again, so that a
/// migration run by another instance (`ensure_schema` at its startup) is picked up here too.
const RECHECK_SHEDLOCK_TABLE: Duration = Duration::from_secs(60);

/// How long a new connection may take by default: PostgreSQL's provider waits as long.
pub(crate) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// One attempt of an operation, on a connection it owns (see [`Session::run`]).
pub(crate) type Attempt<'a, T> =
    Pin<Box<dyn Future<Output = Result<T, mysql_async::Error>> + Send + 'a>>;

/// The pool, the table, and the statements for the table as last inspected.
pub(crate) struct Session {
    pub(crate) pool: Pool,
    pub(crate) table: Table,
    /// How long taking a connection from the pool may take (opening one included):
    /// mysql_async has no connect timeout, and a black-holed host would hang each attempt for
    /// the system's TCP timeout (about two minutes on Linux).
    pub(crate) connect_timeout: Duration,
    /// `host:port` of the server, when the provider built the pool (for connect errors).
    pub(crate) endpoint: Option<String>,
    /// The statements for the table as last inspected; `None` until the first use, and again
    /// after the table went missing or `ensure_schema` changed it.
    statements: Mutex<Option<Arc<Statements>>>,
    /// Whether the pool's options pin the session time zone; every connection of a pool has
    /// the pool's options, so the first one tells.
    pool_pins_utc: OnceLock<bool>,
    warned_shedlock_only: AtomicBool,
    warned_zone_per_use: AtomicBool,
    warned_collation: AtomicBool,
}

impl Session {
    pub(crate) fn new(pool: Pool, table: Table) -> Self {
        Session {
            pool,
            table,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            endpoint: None,
            statements: Mutex::new(None),
            pool_pins_utc: OnceLock::new(),
            warned_shedlock_only: AtomicBool::new(false),
            warned_zone_per_use: AtomicBool::new(false),
            warned_collation: AtomicBool::new(false),
        }
    }

    /// `mysql table <schema.table>`, for errors and logs.
    pub(crate) fn describe(&self) -> String {
        format!("mysql table {}", self.table.display())
    }

    /// Creates or migrates the table (see
    /// [`MySqlLockProvider::ensure_schema`](crate::MySqlLockProvider::ensure_schema)), then
    /// inspects it again.
    pub(crate) async fn ensure_table(&self) -> Result<(), LockError> {
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

    /// The table's shape as it is now (inspected again, not the cached one): a table another
    /// instance has just migrated is seen as migrated.
    pub(crate) async fn shape_now(&self, operation: &'static str) -> Result<Shape, LockError> {
        let mut conn = self.conn(operation, "").await?;
        *self.cached() = None;
        Ok(self.statements(&mut conn, operation, "").await?.shape())
    }

    /// The pairs of `names` the table's `name` column keeps in one row (none when it compares
    /// bytes, as a table `ensure_schema` made does), warning once with the fix when it does not.
    pub(crate) async fn names_sharing_a_row(
        &self,
        names: &[&str],
    ) -> Result<Vec<(String, String)>, LockError> {
        let mut conn = self.conn("check", "").await?;
        let rows = self.columns(&mut conn).await?;
        let Some(query) = self
            .table
            .name_collation(&rows)
            .and_then(names_sharing_a_row_query)
        else {
            return Ok(Vec::new());
        };
        if let Some(warning) = self.table.name_collation_warning(&rows)
            && !self.warned_collation.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(table = %self.table.display(), "{warning}");
        }
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = conn
            .exec(query, (json_names(names),))
            .await
            .map_err(|e| self.error("check", "", e))?;
        let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
        Ok(pairs.into_iter().map(|(a, b)| (text(a), text(b))).collect())
    }

    /// A connection from the pool, with the statements for the table as it is now.
    pub(crate) async fn ready(
        &self,
        operation: &'static str,
        lock: &str,
    ) -> Result<(Conn, Arc<Statements>), LockError> {
        let mut conn = self.conn(operation, lock).await?;
        let statements = self.statements(&mut conn, operation, lock).await?;
        let pins_utc = *self.pool_pins_utc.get_or_init(|| pins_utc(conn.opts()));
        let readiness = ready(&mut conn, pins_utc, statements.shape().zone_sensitive)
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

    /// Runs `attempt` on a connection from the pool made ready for the table, again on a fresh
    /// connection when this one turned out dead (see [`RETRIES`]).
    pub(crate) async fn run<'a, T>(
        &self,
        operation: &'static str,
        lock: &str,
        attempt: impl Fn(Conn, Arc<Statements>) -> Attempt<'a, T>,
    ) -> Result<T, LockError> {
        let mut retries = 0;
        loop {
            // Making the connection ready may be what finds it dead (the time zone set on a
            // pool the provider did not build, the table inspected again).
            let (conn, statements) = match self.ready(operation, lock).await {
                Ok(ready) => ready,
                Err(e) if retries < RETRIES && provider_error_lost_connection(&e) => {
                    retries += 1;
                    log_retry(operation, lock, &e);
                    continue;
                }
                Err(e) => return Err(e),
            };
            match attempt(conn, statements).await {
                Ok(value) => return Ok(value),
                Err(e) if retries < RETRIES && connection_lost(&e) => {
                    retries += 1;
                    log_retry(operation, lock, &e);
                    // The attempt dropped its connection, which mysql_async does not return
                    // to the pool after an I/O error.
                }
                Err(e) => return Err(self.error(operation, lock, e)),
            }
        }
    }

    /// A connection from the pool, within the connect timeout.
    pub(crate) async fn conn(
        &self,
        operation: &'static str,
        lock: &str,
    ) -> Result<Conn, LockError> {
        let endpoint = self.endpoint.as_deref();
        match tokio::time::timeout(self.connect_timeout, self.pool.get_conn()).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(match unreachable(endpoint, e) {
                Ok(unreachable) => {
                    LockError::provider(operation, lock, self.describe(), unreachable)
                }
                Err(e) => self.error(operation, lock, e),
            }),
            Err(_) => {
                let timed_out = ConnectError::new(
                    "MySQL",
                    endpoint.unwrap_or(UNKNOWN_ENDPOINT),
                    ConnectFailure::TimedOut,
                    connect_timed_out(self.connect_timeout),
                );
                Err(LockError::provider(
                    operation,
                    lock,
                    self.describe(),
                    timed_out,
                ))
            }
        }
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
    async fn columns(&self, conn: &mut Conn) -> Result<Vec<ColumnInfo>, LockError> {
        let rows: Vec<ColumnRow> = conn
            .exec(COLUMNS_QUERY, (self.table.schema(), self.table.name()))
            .await
            .map_err(|e| self.error("schema", "", e))?;
        Ok(rows.into_iter().map(column_info).collect())
    }

    /// What the table holds, or `None` when it does not exist.
    async fn inspect(&self, conn: &mut Conn) -> Result<Option<Shape>, LockError> {
        let rows = self.columns(conn).await?;
        let shape = self.table.layout_from(&rows)?;
        if let Some(warning) = self.table.name_collation_warning(&rows)
            && !self.warned_collation.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(table = %self.table.display(), "{warning}");
        }
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
    pub(crate) fn error(
        &self,
        operation: &'static str,
        lock: &str,
        error: mysql_async::Error,
    ) -> LockError {
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

/// Whether `error` says the connection is dead (so that the statement may be tried again on
/// another): an I/O error, a connection the driver found closed, or the server's notice that
/// it ended the session.
fn connection_lost(error: &mysql_async::Error) -> bool {
    match error {
        mysql_async::Error::Io(_) => true,
        mysql_async::Error::Driver(mysql_async::DriverError::ConnectionClosed) => true,
        mysql_async::Error::Server(server) => matches!(
            server.code,
            SERVER_SHUTDOWN | CONNECTION_KILLED | INTERACTION_TIMEOUT
        ),
        _ => false,
    }
}

fn log_retry(operation: &str, lock: &str, error: &dyn std::fmt::Display) {
    tracing::debug!(
        operation,
        lock,
        error = %error,
        "mysql: connection lost, retrying on a fresh one"
    );
}

/// Whether a [`LockError::Provider`] came from a driver error that says the connection is dead
/// (see [`connection_lost`]). A connect that timed out is not one: trying again would only
/// multiply the wait.
fn provider_error_lost_connection(error: &LockError) -> bool {
    match error {
        LockError::Provider { source, .. } => source
            .downcast_ref::<mysql_async::Error>()
            .is_some_and(connection_lost),
        _ => false,
    }
}

/// Where a pool built by the caller connects: mysql_async does not say.
const UNKNOWN_ENDPOINT: &str = "the server of the pool given to the provider";

/// `error` as a [`ConnectError`] naming `endpoint` when it is a failure to connect (refused,
/// timed out, login rejected); any other error is given back.
pub(crate) fn unreachable(
    endpoint: Option<&str>,
    error: mysql_async::Error,
) -> Result<ConnectError, mysql_async::Error> {
    let failure = match &error {
        // ER_DBACCESS_DENIED_ERROR, ER_ACCESS_DENIED_ERROR, ER_BAD_DB_ERROR.
        mysql_async::Error::Server(server) if matches!(server.code, 1044 | 1045 | 1049) => {
            ConnectFailure::LoginRejected
        }
        mysql_async::Error::Io(mysql_async::IoError::Io(io)) => {
            match ConnectFailure::of_io(io.kind()) {
                Some(failure) => failure,
                None => return Err(error),
            }
        }
        _ => return Err(error),
    };
    let endpoint = endpoint.unwrap_or(UNKNOWN_ENDPOINT);
    Ok(ConnectError::new("MySQL", endpoint, failure, error))
}

/// The error of a connection that did not come within `timeout`.
pub(crate) fn connect_timed_out(timeout: Duration) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("no connection to the server within the connect timeout of {timeout:?}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_utc_setup() {
        assert!(sets_utc(UTC_SESSION));
        assert!(sets_utc("set session time_zone='+00:00'"));
        assert!(sets_utc("SET @@session.time_zone = 'UTC'"));
        assert!(!sets_utc("SET time_zone = 'Europe/Berlin'"));
        assert!(!sets_utc("SET sql_mode = ''"));
    }

    #[test]
    fn options_keep_the_users_and_add_ours() {
        let opts =
            Opts::from_url("mysql://root@127.0.0.1:3306/test?reset_connection=true").unwrap();
        let opts = OptsBuilder::from_opts(opts).setup(vec!["SET sql_mode = ''"]);
        let opts = Opts::from(pool_options(Opts::from(opts)));
        assert_eq!(opts.setup(), ["SET sql_mode = ''", UTC_SESSION]);
        assert!(!opts.pool_opts().reset_connection());
        assert!(pins_utc(&opts));
        assert_eq!(opts.db_name(), Some("test"));
    }
}
