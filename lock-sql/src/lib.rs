#![doc = include_str!("../README.md")]
//!
//! The SQL of the lock and cluster tables: what every SQL lock provider needs, written once.
//!
//! A provider crate (`lock-provider-postgres`, `-mysql`, `-sqlite`, `-sqlx`, the next one)
//! builds its statements from these pieces instead of its own copies (Redis needs none of
//! it: its scripts share only [`lock_core::encoding`]):
//!
//! - **the configuration**: [`LockTableConfig`] (table and [`ColumnNames`], with `with_table`
//!   and `with_columns`), which every provider crate re-exports as its config type;
//! - **identifiers**: [`validate_identifier`], [`validate_table_name`] (`table` or
//!   `schema.table`), and [`IdentifierStyle`] for quoting (and, for PostgreSQL, folding);
//!   [`LockTableConfig::resolve`] does all of it at once and gives a [`ResolvedTable`] whose
//!   columns can go straight into `format!`;
//! - **durations**: the one rounding rule, [`lease_millis`] and [`at_least_millis`]: a lease is
//!   never shorter than asked and never 0 (rounded up to the column's millisecond, at least one),
//!   and capped at [`MAX_INTERVAL`] (see [the rule](lock_core::encoding), which Redis shares);
//! - **fences**: [`fence_to_sql`] and [`fence_from_sql`] between a lease's `u64` and the
//!   `BIGINT` column;
//! - **limits**: [`MAX_LOCK_NAME_LEN`] (the `name` column, `VARCHAR(64)`),
//!   [`MAX_INSTANCE_ID_LEN`] (`locked_by`, `VARCHAR(255)`), [`MAX_IDENTIFIER_LEN`],
//!   [`MAX_INTERVAL`].
//!
//! - **SQL text**: [`sql`], the statements, DDL and table-shape checks of each database, shared
//!   by the providers of every driver for it (no second copy of a statement).
//!
//! Every provider crate has the same layout: `config.rs` (the config type, re-exported),
//! `table.rs` (the DDL and the checks of an existing table's shape), `statements.rs` (the SQL),
//! `session.rs` (connections and statement handling), `provider.rs` (the
//! [`LockProvider`](lock_core::LockProvider) impl), and a `lib.rs` that re-exports the driver crate.
//! The steps to add one are in the crate documentation ("Adding a provider").
//!
//! ```
//! use lock_sql::{self as kit, IdentifierStyle, LockTableConfig};
//! use std::time::Duration;
//!
//! let table = LockTableConfig::default().with_table("ops.shedlock").resolve(IdentifierStyle::ANSI)?;
//! let c = &table.columns;
//! let extend = format!(
//!     "UPDATE {} SET {} = now() + ?4 WHERE {} = ?1 AND {} = ?2 AND {} = ?3",
//!     table.qualified, c.lock_until, c.name, c.locked_by, c.fence
//! );
//! assert!(extend.starts_with(r#"UPDATE "ops"."shedlock" SET "lock_until""#));
//! assert_eq!(kit::lease_millis(Duration::from_micros(200)), 1);
//! # Ok::<(), lock_core::LockError>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod connect_error;
mod ident;
pub mod operations_sql;
pub mod sql;
mod table;

pub use connect_error::{ConnectError, ConnectFailure};
pub use ident::{IdentifierStyle, MAX_IDENTIFIER_LEN, validate_identifier};
pub use lock_core::encoding::{
    COLUMN_UNIT, MAX_INTERVAL, at_least_millis, fence_from_sql, fence_to_sql, lease_millis,
};
pub use lock_core::{MAX_INSTANCE_ID_LEN, MAX_LOCK_NAME_LEN};
pub use operations_sql::{AddedLater, OperationsSql, OperationsTables, SqlDialect};
pub use table::{
    Column, ColumnNames, DEFAULT_TABLE, LockTableConfig, ResolvedColumns, ResolvedTable,
    validate_table_name,
};
