//! Opening a [`RedisLockProvider`] from a URL and checking the server it reaches: the
//! reconnection policy, the version, the scripts loaded, the persistence settings.

use std::time::Duration;

use lock_core::{LockError, LockProvider};
use redis::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::RedisLockProvider;
use crate::config::RedisLockConfig;
use crate::server::{self, MIN_REDIS_VERSION, Persistence};

/// How long [`RedisLockProvider::connect`] may take to open the first connection (and each
/// reconnection): 10 s, as the SQL providers.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Reconnection attempts after the first, when the connection was lost (see `connect`).
const RECONNECT_RETRIES: usize = 1;
/// The pause before that retry.
const RECONNECT_DELAY: Duration = Duration::from_millis(100);
impl RedisLockProvider {
    /// Connects to `url` (`redis://[user:password@]host:port/db`; `rediss://` with the `tls`
    /// feature; `redis+unix:///path`) with the default configuration.
    ///
    /// The connection is a [`ConnectionManager`]: it reconnects by itself after the server or
    /// the link went away (the operation that saw the break fails; the next one opens a new
    /// connection, with one quick retry, and fails at once if the server is still out of reach,
    /// so a fire is skipped and logged rather than held up by a reconnection backoff). At connect the provider checks that the server is Redis
    /// 5.0 or later, loads its scripts, and reads the persistence settings: when a restart
    /// would forget locks and fences (no AOF) it logs a warning (see
    /// [`persistence`](Self::persistence)).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let provider = lock_provider_redis::RedisLockProvider::connect("redis://127.0.0.1:6379").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        Self::connect_with_config(url, RedisLockConfig::default()).await
    }

    /// [`connect`](Self::connect) with a configuration.
    ///
    /// ```no_run
    /// use lock_provider_redis::{RedisLockConfig, RedisLockProvider};
    /// use std::time::Duration;
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// let config = RedisLockConfig::default()
    ///     .with_key_prefix("billing:locks")
    ///     .with_replica_acks(1, Duration::from_millis(500));
    /// let provider = RedisLockProvider::connect_with_config("redis://cache.internal/0", config).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_with_config(
        url: &str,
        config: RedisLockConfig,
    ) -> Result<Self, LockError> {
        config.validate()?;
        let client = Self::client(url)?;
        let info = client.get_connection_info();
        let server = format!(
            "redis server {} (database {})",
            info.addr(),
            info.redis_settings().db()
        );
        // One quick retry of a reconnection, not the driver's six with backoff (6 s in all):
        // every command waits for a reconnection under way, so a long backoff would hold each
        // fire's acquire for seconds while the server is down. Failing fast lets the fire be
        // logged and skipped; the next operation tries to reconnect again.
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(DEFAULT_CONNECT_TIMEOUT))
            .set_response_timeout(Some(config.response_timeout))
            .set_number_of_retries(RECONNECT_RETRIES)
            .set_min_delay(RECONNECT_DELAY)
            .set_max_delay(RECONNECT_DELAY);
        let conn = match tokio::time::timeout(
            DEFAULT_CONNECT_TIMEOUT,
            ConnectionManager::new_with_config(client, manager_config),
        )
        .await
        {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(LockError::provider("connect", "", server, e)),
            Err(_) => {
                return Err(LockError::provider(
                    "connect",
                    "",
                    server,
                    format!("timed out: no connection within {DEFAULT_CONNECT_TIMEOUT:?}"),
                ));
            }
        };
        let mut provider = Self::with_config(conn, config)?;
        provider.server = Some(server);
        provider.persistence = Some(provider.check_server().await?);
        Ok(provider)
    }

    /// The driver's client for `url`, as [`connect`](Self::connect) reads it; a malformed URL,
    /// or `rediss://` without the `tls` feature, is an error here. The message never repeats
    /// the URL (it may hold a password).
    ///
    /// ```
    /// use lock_provider_redis::RedisLockProvider;
    /// assert!(RedisLockProvider::client("redis://127.0.0.1:6379/2").is_ok());
    /// let error = RedisLockProvider::client("redis://:secret@host:notaport").unwrap_err().to_string();
    /// assert!(!error.contains("secret"), "{error}");
    /// ```
    pub fn client(url: &str) -> Result<Client, LockError> {
        if !cfg!(feature = "tls") && url.to_ascii_lowercase().starts_with("rediss://") {
            return Err(LockError::InvalidConfiguration(
                "a rediss:// (TLS) URL needs the `tls` feature of lock-provider-redis".to_owned(),
            ));
        }
        Client::open(url)
            .map_err(|e| LockError::InvalidConfiguration(format!("not a valid Redis URL: {}", e)))
    }

    /// Checks the server as [`connect`](Self::connect) does: Redis 5.0 or later (refused
    /// otherwise), the scripts loaded, and the persistence settings read, with a warning logged
    /// when a restart would forget locks, fences and `last_fire`. Returns what was found.
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_redis::RedisLockProvider) -> Result<(), lock_core::LockError> {
    /// let persistence = provider.check_server().await?;
    /// println!("Redis keeps its locks by {persistence}");
    /// # Ok(()) }
    /// ```
    pub async fn check_server(&self) -> Result<Persistence, LockError> {
        let mut conn = self.conn.clone();
        let version = server::version(&mut conn)
            .await
            .map_err(|e| self.error("connect", "", e))?;
        if !server::supported(&version) {
            return Err(self.error(
                "connect",
                "",
                format!(
                    "Redis {version} is too old: the lock scripts need Redis {}.{} or later \
                     (scripts replicated by their effects)",
                    MIN_REDIS_VERSION.0, MIN_REDIS_VERSION.1
                ),
            ));
        }
        for script in self.scripts.all() {
            script
                .load_async(&mut conn)
                .await
                .map_err(|e| self.error("connect", "", e))?;
        }
        // The operations scripts too, in one round trip, so that the first heartbeat is one
        // round trip like every later one (not EVALSHA, NOSCRIPT, EVAL).
        let mut load = redis::pipe();
        for source in crate::operations::scripts::ALL {
            load.cmd("SCRIPT").arg("LOAD").arg(source);
        }
        let _: Vec<String> = load
            .query_async(&mut conn)
            .await
            .map_err(|e| self.error("connect", "", e))?;
        let persistence = server::persistence(&mut conn).await;
        match &persistence {
            Persistence::None | Persistence::Snapshots { .. } => tracing::warn!(
                server = %self.describe(),
                persistence = %persistence,
                "a restart of this Redis server forgets the locks, fences and last_fire \
                 written since its last save: a slot that already ran can run again and fences \
                 start over; turn on the append-only file (appendonly yes) to keep them"
            ),
            Persistence::Unknown { .. } => tracing::info!(
                server = %self.describe(),
                persistence = %persistence,
                "cannot tell whether a restart of this Redis server keeps locks and fences"
            ),
            _ => {
                tracing::debug!(server = %self.describe(), persistence = %persistence, "Redis persistence")
            }
        }
        Ok(persistence)
    }
}
