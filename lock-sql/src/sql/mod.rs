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
