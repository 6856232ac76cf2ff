#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod provider;
mod schema;
mod session;
mod statements;

pub use provider::MySqlLockProvider;

/// The MySQL driver the provider runs on, re-exported so that one dependency line is enough to
/// build a pool: `lock_provider_mysql::mysql_async::Pool`.
pub use mysql_async;
