//! Which table and columns the provider uses: the kit's [`LockTableConfig`], the same config
//! type as every other SQL provider's.
//!
//! On PostgreSQL the names are folded to lower case, exactly as PostgreSQL folds the unquoted
//! names of ShedLock's own DDL, and then double-quoted, so a reserved word such as `user` works
//! as a column name ([`IdentifierStyle::POSTGRES`](lock_sql::IdentifierStyle::POSTGRES)).
//!
//! ```
//! use lock_provider_postgres::LockTableConfig;
//!
//! let config = LockTableConfig::default().with_table("ops.shedlock");
//! assert!(config.validate().is_ok());
//! let bad = LockTableConfig::default().with_table("shedlock; DROP TABLE users");
//! assert!(bad.validate().is_err());
//! ```

pub use lock_sql::{ColumnNames, LockTableConfig};
