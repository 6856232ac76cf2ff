//! The provider's one connection: how it is set up, how it is used off the async workers, and
//! the transactions every write runs in.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lock_core::LockError;
use rusqlite::Connection;
use rusqlite::config::DbConfig;

use crate::statements::Statements;

/// How long a statement waits for another connection's write lock before failing with
/// `SQLITE_BUSY` (then the fire is skipped, like any provider error).
pub(crate) const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Room for every statement of [`Statements`] plus the transaction and pragma statements.
const STATEMENT_CACHE_CAPACITY: usize = 32;

/// One connection (WAL mode, a busy timeout, `synchronous = FULL`) behind a mutex, shared by
/// the clones of a provider, and the database file it is open on.
#[derive(Clone, Debug)]
pub(crate) struct Session {
    connection: Arc<Mutex<Connection>>,
    path: Arc<Path>,
}

impl Session {
    /// Opens (creating if needed) the database file at `path` and sets the connection up.
    pub(crate) fn open(path: &Path) -> Result<Self, LockError> {
        let connection = Connection::open(path).map_err(|e| open_error(path, e))?;
        Self::new(connection, path)
    }

    /// Sets up an open connection: busy timeout, WAL mode, strict identifier quoting,
    /// `synchronous = FULL`, the statement cache.
    pub(crate) fn new(connection: Connection, path: &Path) -> Result<Self, LockError> {
        let fail = |e: rusqlite::Error| open_error(path, e);
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
        Ok(Session {
            connection: Arc::new(Mutex::new(connection)),
            path: Arc::from(path),
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Sets the busy timeout of the shared connection.
    pub(crate) fn set_busy_timeout(&self, timeout: Duration) -> rusqlite::Result<()> {
        lock_connection(&self.connection).busy_timeout(timeout)
    }

    /// `sqlite table <table> in <path>`, for errors and logs.
    pub(crate) fn backend(&self, statements: &Statements) -> String {
        format!(
            "sqlite table {} in {}",
            statements.table.display(),
            self.path.display()
        )
    }

    /// Runs `work` with the connection on tokio's blocking pool and maps its errors.
    pub(crate) async fn run<T, F>(
        &self,
        statements: &Arc<Statements>,
        operation: &'static str,
        lock: &str,
        work: F,
    ) -> Result<T, LockError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &Statements) -> rusqlite::Result<T> + Send + 'static,
    {
        let connection = Arc::clone(&self.connection);
        let shared = Arc::clone(statements);
        let joined = tokio::task::spawn_blocking(move || {
            let connection = lock_connection(&connection);
            work(&connection, &shared)
        })
        .await;
        match joined {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.map_error(statements, operation, lock, error)),
            Err(join) => Err(LockError::provider(
                operation,
                lock,
                self.backend(statements),
                join,
            )),
        }
    }

    fn map_error(
        &self,
        statements: &Statements,
        operation: &'static str,
        lock: &str,
        error: rusqlite::Error,
    ) -> LockError {
        let table = &statements.table;
        let message = match &error {
            rusqlite::Error::SqliteFailure(_, Some(message)) => message.as_str(),
            // A prepare error with its position in the SQL (SQLite 3.38+).
            rusqlite::Error::SqlInputError { msg, .. } => msg.as_str(),
            _ => "",
        };
        if message.starts_with("no such table") {
            return LockError::TableMissing {
                table: table.display().to_owned(),
                ddl: table.create_table.clone(),
                source: Some(Box::new(error)),
            };
        }
        if message.starts_with("no such column") || message.contains("has no column named") {
            let hint = format!(
                "lock table {} lacks a column; run `ensure_schema()` or:\n{}\n{}",
                table.display(),
                table.add_fence,
                table.add_last_fire
            );
            return LockError::provider(
                operation,
                lock,
                self.backend(statements),
                ColumnMissing {
                    hint,
                    source: error,
                },
            );
        }
        LockError::provider(operation, lock, self.backend(statements), error)
    }
}

fn open_error(path: &Path, e: rusqlite::Error) -> LockError {
    LockError::provider("open", "", format!("sqlite database {}", path.display()), e)
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
pub(crate) fn in_immediate_transaction<T>(
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
pub(crate) fn relaxed_commit<T>(
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
