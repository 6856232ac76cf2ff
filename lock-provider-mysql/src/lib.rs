#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod batch;
mod config;
mod connection;
mod operations;
mod provider;
mod session;
mod statements;
mod table;

pub use config::{ColumnNames, LockTableConfig};
pub use connection::SslMode;
pub use provider::MySqlLockProvider;

/// The MySQL driver the provider runs on, re-exported so that one dependency line is enough to
/// build a pool.
///
/// ```
/// use lock_provider_mysql::{MySqlLockProvider, mysql_async};
///
/// let opts = mysql_async::Opts::from_url("mysql://app@db.internal/app").unwrap();
/// let pool = mysql_async::Pool::new(MySqlLockProvider::pool_options(opts));
/// let provider = MySqlLockProvider::new(pool);
/// ```
pub use mysql_async;
