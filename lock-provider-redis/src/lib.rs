#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod batch;
mod config;
mod connection;
mod keys;
mod operations;
mod provider;
mod scripts;
mod server;

pub use config::{
    DEFAULT_KEY_PREFIX, DEFAULT_RESPONSE_TIMEOUT, MAX_KEY_PREFIX_LEN, RedisLockConfig, ReplicaAcks,
};
pub use connection::DEFAULT_CONNECT_TIMEOUT;
pub use operations::ACTIONS_PER_JOB;
pub use provider::RedisLockProvider;
pub use server::{MIN_REDIS_VERSION, Persistence};

/// The Lua scripts, one per operation, as the provider sends them (by SHA1, `EVALSHA`), for
/// review and for tools that must speak the same protocol. Each takes the lock's key as
/// `KEYS[1]`; the arguments and replies are described on each.
///
/// ```
/// assert!(lock_provider_redis::lua::ACQUIRE.contains("redis.call('TIME')"));
/// ```
pub mod lua {
    pub use crate::scripts::{
        ACQUIRE, ACQUIRE_MANY, EXTEND, FORCE_UNLOCK, READ, READ_MANY, RELEASE, RELEASE_MANY,
        RESET_SLOT,
    };

    /// The scripts of the operations keys (registry, history, control, action log, incidents), each declaring every
    /// key it touches, all under the hash tag `{<prefix>:ops}`; the keys, arguments and
    /// replies are described on each.
    ///
    /// ```
    /// let heartbeat = lock_provider_redis::lua::operations::HEARTBEAT;
    /// assert!(heartbeat.starts_with("local t = redis.call('TIME')"));
    /// ```
    pub mod operations {
        pub use crate::operations::scripts::{
            AFTER_REQUESTS, CLAIM_TRIGGER, DELETE_ACTIONS, DELETE_AFTER, DELETE_CONTROL,
            DELETE_RUNS, DELETE_SCORED, HEARTBEAT, OPEN_INCIDENT, PAUSE, READ_ACTIONS,
            READ_CONTROL, READ_HISTORY, READ_INCIDENTS, READ_INSTANCES, READ_LAST_RUNS,
            READ_REGISTRY, READ_RUN_LOGS, RECORD_ACTION, REQUEST_AFTER, REQUEST_TRIGGER,
            RESOLVE_INCIDENT, RESUME, RUN_ENDED, RUN_STARTED, UNCLAIM_TRIGGER, WITHDRAW_TRIGGER,
        };
    }
}

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
