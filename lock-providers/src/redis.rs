//! `redis://` and `rediss://`: [`RedisLockProvider`]. The registry's "table" is the key prefix
//! (default `shedlock`: a lock `report` is the hash `shedlock:report`, the operations keys are
//! under `{shedlock:ops}:`), checked by the prefix's rule, not as an SQL identifier.

use std::fmt;

use async_trait::async_trait;
use lock_core::LockError;
use lock_provider_redis::{RedisLockConfig, RedisLockProvider};

use crate::database::Database;
use crate::{OpenError, OpenOptions, OpenedProvider, UrlError};

/// A Redis server, by URL.
pub(crate) struct Redis {
    url: String,
    /// `host:port (database n)`, read from the URL without its user or password.
    server: String,
}

pub(crate) fn parse(scheme: &str, rest: &str) -> Result<Box<dyn Database>, UrlError> {
    let url = format!("{scheme}://{rest}");
    // As `RedisLockProvider::connect` reads it; the message never repeats the URL.
    let client = RedisLockProvider::client(&url)
        .map_err(|e| UrlError::new(format!("is not a valid Redis URL: {e}")))?;
    let info = client.get_connection_info();
    let server = format!("{} (database {})", info.addr(), info.redis_settings().db());
    Ok(Box::new(Redis { url, server }))
}

#[async_trait]
impl Database for Redis {
    fn kind(&self) -> &'static str {
        "redis"
    }

    /// The key prefix's rule ([`RedisLockConfig::validate`]), not the SQL identifier rule:
    /// `billing:locks` and `{locks}` are prefixes.
    fn check_table(&self, table: &str) -> Result<(), LockError> {
        RedisLockConfig::default().with_key_prefix(table).validate()
    }

    async fn open(&self, options: &OpenOptions) -> Result<OpenedProvider, OpenError> {
        self.check_table(options.table_name())
            .map_err(OpenError::Table)?;
        let config = RedisLockConfig::default().with_key_prefix(options.table_name());
        let provider = options
            .connect(
                self,
                RedisLockProvider::connect_with_config(&self.url, config),
            )
            .await?;
        options.ensure_schema(provider.ensure_schema()).await?;
        Ok(OpenedProvider::new(provider))
    }
}

/// Host, port and database: never the user or password.
impl fmt::Display for Redis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the Redis server at {}", self.server)
    }
}

/// Like `Display`: a derived `Debug` would print the URL, password included.
impl fmt::Debug for Redis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Redis").field(&self.to_string()).finish()
    }
}

#[cfg(test)]
mod tests {
    use crate::LockDatabase;

    #[test]
    fn redis_urls_parse_and_describe_without_the_password() {
        let database = LockDatabase::parse("redis://:secret@cache.internal:6380/2").unwrap();
        assert_eq!(database.kind(), "redis");
        assert_eq!(
            database.to_string(),
            "the Redis server at cache.internal:6380 (database 2)"
        );
        let error = LockDatabase::parse("redis://:secret@cache:port/0")
            .unwrap_err()
            .to_string();
        assert!(error.contains("not a valid Redis URL"), "{error}");
        assert!(!error.contains("secret"), "{error}");
    }

    #[test]
    fn the_table_of_a_redis_url_is_checked_as_a_key_prefix() {
        let redis = LockDatabase::parse("redis://127.0.0.1:6379/0").unwrap();
        for prefix in ["shedlock", "billing:locks", "{locks}", "app.v2:locks"] {
            assert!(redis.check_table(prefix).is_ok(), "{prefix}");
        }
        for prefix in ["", "billing locks", "locks*", "}locks"] {
            let error = redis.check_table(prefix).unwrap_err().to_string();
            assert!(error.contains("Redis key prefix"), "{prefix}: {error}");
        }
        // The SQL providers keep the identifier rule.
        let sqlite = LockDatabase::parse("sqlite:///tmp/locks.db").unwrap();
        assert!(sqlite.check_table("billing:locks").is_err());
        assert!(sqlite.check_table("main.shedlock").is_ok());
    }
}
