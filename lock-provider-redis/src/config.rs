//! What the provider is configured with: the key prefix and the opt-in replica
//! acknowledgement of grants.
//!
//! ```
//! use lock_provider_redis::RedisLockConfig;
//! use std::time::Duration;
//!
//! let config = RedisLockConfig::default()
//!     .with_key_prefix("billing:locks")
//!     .with_replica_acks(1, Duration::from_millis(200));
//! assert!(config.validate().is_ok());
//! assert!(RedisLockConfig::default().with_key_prefix("locks*").validate().is_err());
//! ```

use std::time::Duration;

use lock_core::LockError;

/// The default key prefix: a lock named `report` is the hash `shedlock:report`.
pub const DEFAULT_KEY_PREFIX: &str = "shedlock";

/// The longest key prefix accepted, in bytes.
pub const MAX_KEY_PREFIX_LEN: usize = 128;

/// How long one command may wait for its reply unless configured otherwise: long enough for a
/// loaded server (the driver's own default is 500 ms), short enough that a link that went
/// silent fails the operation instead of hanging the fire.
pub const DEFAULT_RESPONSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The provider's configuration: `Clone + Debug + Default`, checked by
/// [`validate`](Self::validate) (and by every constructor that takes it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisLockConfig {
    /// Every lock is the hash `<key_prefix>:<name>`. Default [`DEFAULT_KEY_PREFIX`].
    pub key_prefix: String,
    /// After each grant, wait (Redis `WAIT`) for this many replicas to acknowledge it; `None`
    /// (the default) does not wait. See [`ReplicaAcks`].
    pub replica_acks: Option<ReplicaAcks>,
    /// How long one command may wait for its reply (default [`DEFAULT_RESPONSE_TIMEOUT`]);
    /// used by [`connect`](crate::RedisLockProvider::connect), which builds the connection.
    pub response_timeout: Duration,
}

/// An opt-in `WAIT replicas timeout` after each grant, so that a failover to a replica that
/// acknowledged it cannot lose it.
///
/// Cost: one more round trip per grant, plus the replicas' replication delay (a losing acquire,
/// which writes nothing, never waits). A grant that fewer replicas acknowledge within `timeout`
/// (or whose `WAIT` fails) is released again at once (its fence and `last_fire` stay) and the
/// acquire fails with an error saying so: the body does not run on a grant that a failover
/// could forget. A grant the executor finds by reading the row back after a lost reply is
/// waited for the same way before it is adopted
/// ([`confirm_grant`](lock_core::LockProvider::confirm_grant)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaAcks {
    /// How many replicas must acknowledge (at least 1).
    pub replicas: u32,
    /// How long to wait for them (at least 1 ms, shorter than the response timeout).
    pub timeout: Duration,
}

impl Default for RedisLockConfig {
    fn default() -> Self {
        RedisLockConfig {
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            replica_acks: None,
            response_timeout: DEFAULT_RESPONSE_TIMEOUT,
        }
    }
}

impl RedisLockConfig {
    /// Uses `prefix` for the keys instead of `shedlock`.
    ///
    /// ```
    /// let config = lock_provider_redis::RedisLockConfig::default().with_key_prefix("ops:locks");
    /// assert_eq!(config.key_prefix, "ops:locks");
    /// ```
    pub fn with_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Waits for `replicas` replicas to acknowledge each grant, at most `timeout` (see
    /// [`ReplicaAcks`] for the cost and what happens when they do not).
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = lock_provider_redis::RedisLockConfig::default()
    ///     .with_replica_acks(1, Duration::from_millis(100));
    /// assert_eq!(config.replica_acks.unwrap().replicas, 1);
    /// ```
    pub fn with_replica_acks(mut self, replicas: u32, timeout: Duration) -> Self {
        self.replica_acks = Some(ReplicaAcks { replicas, timeout });
        self
    }

    /// Waits at most `timeout` for each command's reply.
    ///
    /// ```
    /// use std::time::Duration;
    /// let config = lock_provider_redis::RedisLockConfig::default()
    ///     .with_response_timeout(Duration::from_secs(2));
    /// assert_eq!(config.response_timeout, Duration::from_secs(2));
    /// ```
    pub fn with_response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Checks the configuration: the prefix is 1 to [`MAX_KEY_PREFIX_LEN`] printable ASCII
    /// characters without spaces and without the glob characters `* ? [ ] \` (the prefix is
    /// the pattern `list_locks` scans for), not starting with `}` (the operations keys' hash
    /// tag `{<prefix>:ops}` would be empty); a replica wait asks for at least one replica and
    /// a timeout of at least 1 ms, shorter than the response timeout.
    ///
    /// ```
    /// use lock_provider_redis::RedisLockConfig;
    /// assert!(RedisLockConfig::default().validate().is_ok());
    /// // A hash tag is allowed: it keeps every lock in one Redis Cluster slot.
    /// assert!(RedisLockConfig::default().with_key_prefix("{locks}").validate().is_ok());
    /// for bad in ["", "a b", "locks?", "loc[k]s", "é", "}locks"] {
    ///     assert!(RedisLockConfig::default().with_key_prefix(bad).validate().is_err(), "{bad}");
    /// }
    /// ```
    pub fn validate(&self) -> Result<(), LockError> {
        let prefix = &self.key_prefix;
        let invalid = |why: &str| {
            Err(LockError::InvalidConfiguration(format!(
                "Redis key prefix {prefix:?} {why}"
            )))
        };
        if prefix.is_empty() {
            return invalid("is empty");
        }
        if prefix.len() > MAX_KEY_PREFIX_LEN {
            return invalid(&format!("is longer than {MAX_KEY_PREFIX_LEN} bytes"));
        }
        if let Some(c) = prefix
            .chars()
            .find(|c| !c.is_ascii_graphic() || matches!(c, '*' | '?' | '[' | ']' | '\\'))
        {
            return invalid(&format!(
                "contains {c:?}: only printable ASCII without spaces and without the glob \
                 characters * ? [ ] \\ is accepted"
            ));
        }
        if prefix.starts_with('}') {
            // `{<prefix>:ops}` would be an empty hash tag: Redis Cluster would hash each
            // operations key whole, scattering them over slots.
            return invalid(
                "starts with `}`: the operations keys `{<prefix>:ops}:..` need a non-empty \
                 Redis Cluster hash tag",
            );
        }
        if self.response_timeout.is_zero() {
            return Err(LockError::InvalidConfiguration(
                "the Redis response timeout must be greater than zero".to_owned(),
            ));
        }
        if let Some(acks) = self.replica_acks {
            if acks.replicas == 0 {
                return Err(LockError::InvalidConfiguration(
                    "a replica wait must ask for at least one replica".to_owned(),
                ));
            }
            if acks.timeout < Duration::from_millis(1) || acks.timeout >= self.response_timeout {
                return Err(LockError::InvalidConfiguration(format!(
                    "the replica wait's timeout ({:?}) must be at least 1 ms and shorter than \
                     the response timeout ({:?})",
                    acks.timeout, self.response_timeout
                )));
            }
        }
        Ok(())
    }
}
