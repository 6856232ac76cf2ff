#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod batch;
mod config;
mod operations;
mod provider;
mod session;
mod statements;
mod table;

pub use config::{ColumnNames, LockTableConfig};
pub use provider::SqliteLockProvider;
/// The SQLite driver this provider is built on (bundled SQLite), re-exported so that one
/// dependency line is enough, e.g. to inspect the lock table with your own connection.
///
/// ```no_run
/// let connection = lock_provider_sqlite::rusqlite::Connection::open("locks.db")?;
/// let held: i64 = connection.query_row(
///     "SELECT count(*) FROM shedlock WHERE lock_until > strftime('%Y-%m-%d %H:%M:%f', 'now')",
///     [],
///     |row| row.get(0),
/// )?;
/// # Ok::<(), lock_provider_sqlite::rusqlite::Error>(())
/// ```
pub use rusqlite;
