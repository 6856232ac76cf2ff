//! Which table and columns the provider uses: the kit's [`LockTableConfig`], the same config
//! type as every other SQL provider's.
//!
//! On MySQL and MariaDB the schema of `schema.table` is the database; names are quoted with
//! backticks and kept as written (the server decides whether table names are case-sensitive).
//!
//! ```
//! use lock_provider_mysql::LockTableConfig;
//!
//! let config = LockTableConfig::default().with_table("ops.job_locks");
//! assert!(config.validate().is_ok());
//! assert!(LockTableConfig::default().with_table("locks; DROP TABLE users").validate().is_err());
//! ```

pub use lock_sql::{ColumnNames, LockTableConfig};
