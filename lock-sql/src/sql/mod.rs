//! The SQL text of the lock statements, the table DDL and the checks of an existing table's
//! shape, one module per database, written once for every driver that speaks to it.
//!
//! `lock-provider-postgres` (tokio-postgres) and `lock-provider-sqlx`'s PostgreSQL backend build
//! their statements from [`postgres`]; `lock-provider-mysql` (mysql_async) and
//! `lock-provider-sqlx`'s MySQL backend from [`mysql`]; `lock-provider-sqlite` (rusqlite) and
//! `lock-provider-sqlx`'s SQLite backend from [`sqlite`]. A driver only binds the parameters,
//! decodes the rows and handles its connections, so two providers on one table run the very same
//! statements and exclude each other.
//!
//! Parameters that a driver binds are described by [`SqlValue`], so that their order (which the
//! MySQL statements repeat, `?` being positional) is also decided once.

pub mod mysql;
pub mod postgres;
pub mod sqlite;

use chrono::NaiveDateTime;

/// One parameter value of a statement, in the driver-neutral form a provider converts to its
/// driver's own value type.
///
/// ```
/// use lock_sql::sql::SqlValue;
/// let value = SqlValue::Int(1000);
/// assert_eq!(value, SqlValue::Int(1000));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SqlValue {
    /// A string: a lock name or an owner.
    Text(String),
    /// A 64-bit integer: a duration in milliseconds or microseconds, a fence.
    Int(i64),
    /// A UTC wall time, or SQL `NULL` (a request without a slot).
    Timestamp(Option<NaiveDateTime>),
}

/// The error of [`LockProvider::check_once_per_slot`](lock_core::LockProvider::check_once_per_slot)
/// on a lock table with ShedLock's four columns only: it names the table and the statement
/// (`alter`) that adds the missing columns, shared by every SQL provider so they say it alike.
///
/// ```
/// let error = lock_sql::sql::no_last_fire("test.shedlock", "ALTER TABLE `shedlock` ADD ...");
/// assert!(error.to_string().contains("test.shedlock has no last_fire column"));
/// ```
pub fn no_last_fire(table: &str, alter: &str) -> lock_core::LockError {
    lock_core::LockError::InvalidConfiguration(format!(
        "lock table {table} has no last_fire column (ShedLock's four columns only), so it \
         cannot remember that a slot or a run-once task is done: the task would run again at \
         every call. Call ensure_schema() or run:\n{alter}"
    ))
}
