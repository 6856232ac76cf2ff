//! Which table and columns the provider uses: the kit's [`LockTableConfig`], the same config
//! type as every other SQL provider's.
//!
//! On SQLite the table may be qualified only by `main` (the provider's connection has no other
//! schema); names are double-quoted and kept as written.
//!
//! ```
//! use lock_provider_sqlite::LockTableConfig;
//!
//! let config = LockTableConfig::default().with_table("main.job_locks");
//! assert!(config.validate().is_ok());
//! assert!(LockTableConfig::default().with_table("locks; DROP TABLE x").validate().is_err());
//! ```

pub use lock_sql::{ColumnNames, LockTableConfig};
