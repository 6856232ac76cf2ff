#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod config;
mod keys;
mod provider;
mod scripts;
mod server;

pub use config::{
    DEFAULT_KEY_PREFIX, DEFAULT_RESPONSE_TIMEOUT, MAX_KEY_PREFIX_LEN, RedisLockConfig, ReplicaAcks,
};
pub use provider::{DEFAULT_CONNECT_TIMEOUT, RedisLockProvider};
pub use server::{MIN_REDIS_VERSION, Persistence};

/// The Redis driver the provider runs on, re-exported so that one dependency line is enough to
/// build a connection by hand.
///
/// ```no_run
/// use lock_provider_redis::{RedisLockProvider, redis};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = redis::Client::open("redis://cache.internal:6379/0")?;
/// let provider = RedisLockProvider::new(redis::aio::ConnectionManager::new(client).await?);
/// # Ok(()) }
/// ```
pub use redis;
