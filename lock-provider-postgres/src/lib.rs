#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod batch;
mod config;
mod connection;
mod operations;
mod provider;
mod session;
mod ssl_mode;
mod statements;
mod table;
#[cfg(feature = "tls")]
mod tls;

pub use config::{ColumnNames, LockTableConfig};
pub use connection::ConnectionConfig;
pub use provider::PostgresLockProvider;
pub use ssl_mode::SslMode;
pub use statements::LockStatements;
pub use table::TableShape;

/// The pool crate, re-exported so that one dependency line is enough to build a pool.
///
/// ```no_run
/// use lock_provider_postgres::deadpool_postgres::{Manager, Pool};
/// use lock_provider_postgres::tokio_postgres::{Config, NoTls};
///
/// let config: Config = "postgres://app@localhost/app".parse().unwrap();
/// let pool = Pool::builder(Manager::new(config, NoTls)).max_size(4).build().unwrap();
/// let provider = lock_provider_postgres::PostgresLockProvider::new(pool);
/// ```
pub use deadpool_postgres;
/// The driver, re-exported for its `Config`, `NoTls` and error types.
pub use deadpool_postgres::tokio_postgres;
