//! [`RedisLockProvider`]: the [`LockProvider`] on Redis hashes, one Lua script per operation.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_cluster::{Cluster, ClusterProvider};
use lock_core::encoding::{at_least_millis, fence_to_sql, lease_millis};
use lock_core::{
    AcquireOutcome, Lease, LockError, LockProvider, LockRecord, LockRequest, Refusal,
    RefusalReason, validate_lock_name,
};
use redis::aio::ConnectionManager;
use redis::{ErrorKind, Script, ServerErrorKind, Value};

use crate::config::{RedisLockConfig, ReplicaAcks};
use crate::keys::KeyLayout;
use crate::operations::scripts::OpsScripts;
use crate::scripts::{Scripts, int, opt_time, parse_row, text, time};
use crate::server::Persistence;

/// How many keys one `SCAN` step asks for in `list_locks`.
const SCAN_COUNT: usize = 1000;

/// A [`LockProvider`] that keeps each lock in one Redis hash, `<prefix>:<name>`, with the
/// fields `lock_until`, `locked_at`, `locked_by`, `fence` and `last_fire`, and changes it only
/// through Lua scripts that take the time from the server's `TIME`.
///
/// It gives Redis the guarantees of the SQL providers: the server's clock for every lease,
/// fencing, once per slot, owner- and fence-checked extend and release, a losing acquire that
/// writes nothing. A steady-state fire costs two round trips (the acquire script and the
/// release script). See the crate's README for the key layout, durability and failover.
///
/// ```no_run
/// use lock_core::{LockConfiguration, LockOutcome, LockingTaskExecutor};
/// use lock_provider_redis::RedisLockProvider;
/// use std::time::Duration;
///
/// # async fn run() -> Result<(), lock_core::LockError> {
/// let provider = RedisLockProvider::connect("redis://cache.internal:6379/0").await?;
/// provider.ensure_schema().await?; // nothing to create on Redis; kept for a one-line swap
/// let executor = LockingTaskExecutor::new(provider);
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// if let LockOutcome::Executed(()) = executor.execute_with_lock(&config, async { /* work */ }).await? {
///     println!("this instance ran the report");
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisLockProvider {
    pub(crate) conn: ConnectionManager,
    pub(crate) config: RedisLockConfig,
    pub(crate) keys: KeyLayout,
    pub(crate) scripts: Arc<Scripts>,
    pub(crate) ops_scripts: Arc<OpsScripts>,
    /// `host:port` (and database) when known, for messages; never the password.
    pub(crate) server: Option<String>,
    pub(crate) persistence: Option<Persistence>,
    /// The server answered `CROSSSLOT` to a batch: it is a cluster, and batches are split by
    /// hash tag (`batch.rs`).
    pub(crate) cross_slot: Arc<AtomicBool>,
    /// Whether the server runs in cluster mode (`INFO cluster`), asked once by `list_locks`
    /// for a prefix without a hash tag.
    cluster_mode: Arc<OnceLock<bool>>,
}

impl fmt::Debug for RedisLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLockProvider")
            .field("server", &self.server)
            .field("config", &self.config)
            .field("persistence", &self.persistence)
            .finish_non_exhaustive()
    }
}

impl RedisLockProvider {
    /// How long a connection may take to open: see [`DEFAULT_CONNECT_TIMEOUT`](crate::DEFAULT_CONNECT_TIMEOUT).
    ///
    /// ```
    /// assert_eq!(lock_provider_redis::RedisLockProvider::DEFAULT_CONNECT_TIMEOUT.as_secs(), 10);
    /// ```
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = crate::DEFAULT_CONNECT_TIMEOUT;

    /// A provider on `conn` with the default configuration (key prefix `shedlock`).
    ///
    /// The server is not checked (this is not async): [`connect`](Self::connect) checks its
    /// version and persistence; [`check_server`](Self::check_server) does it for a connection
    /// built by hand.
    ///
    /// ```no_run
    /// use lock_provider_redis::{RedisLockProvider, redis};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redis::Client::open("redis://cache.internal/0")?;
    /// let conn = redis::aio::ConnectionManager::new(client).await?;
    /// let provider = RedisLockProvider::new(conn);
    /// provider.check_server().await?;
    /// # Ok(()) }
    /// ```
    pub fn new(conn: ConnectionManager) -> Self {
        Self::with_config(conn, RedisLockConfig::default())
            .expect("the default configuration is valid")
    }

    /// A provider on `conn` with `config`, refused if the configuration is not valid
    /// ([`RedisLockConfig::validate`]). The config's response timeout applies only to
    /// connections [`connect`](Self::connect) builds; `conn` keeps its own.
    ///
    /// ```no_run
    /// # fn run(conn: lock_provider_redis::redis::aio::ConnectionManager) -> Result<(), lock_core::LockError> {
    /// use lock_provider_redis::{RedisLockConfig, RedisLockProvider};
    /// let provider = RedisLockProvider::with_config(conn, RedisLockConfig::default().with_key_prefix("ops:locks"))?;
    /// # Ok(()) }
    /// ```
    pub fn with_config(
        conn: ConnectionManager,
        config: RedisLockConfig,
    ) -> Result<Self, LockError> {
        config.validate()?;
        Ok(RedisLockProvider {
            conn,
            keys: KeyLayout::new(&config),
            config,
            scripts: Arc::new(Scripts::new()),
            ops_scripts: Arc::new(OpsScripts::new()),
            server: None,
            persistence: None,
            cross_slot: Arc::new(AtomicBool::new(false)),
            cluster_mode: Arc::new(OnceLock::new()),
        })
    }

    /// Uses `prefix` for the keys instead of `shedlock`, checked as
    /// [`RedisLockConfig::validate`] says.
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_redis::RedisLockProvider) -> Result<(), lock_core::LockError> {
    /// let provider = provider.with_key_prefix("ops:locks")?;
    /// assert_eq!(provider.key("report"), "ops:locks:report");
    /// # Ok(()) }
    /// ```
    pub fn with_key_prefix(mut self, prefix: &str) -> Result<Self, LockError> {
        let config = self.config.clone().with_key_prefix(prefix);
        config.validate()?;
        self.keys = KeyLayout::new(&config);
        self.config = config;
        Ok(self)
    }

    /// Waits for `replicas` replicas to acknowledge every grant (see
    /// [`ReplicaAcks`](crate::ReplicaAcks)).
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_redis::RedisLockProvider) -> Result<(), lock_core::LockError> {
    /// let provider = provider.with_replica_acks(1, std::time::Duration::from_millis(500))?;
    /// # Ok(()) }
    /// ```
    pub fn with_replica_acks(
        mut self,
        replicas: u32,
        timeout: Duration,
    ) -> Result<Self, LockError> {
        let config = self.config.clone().with_replica_acks(replicas, timeout);
        config.validate()?;
        self.config = config;
        Ok(self)
    }

    /// The configuration.
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_redis::RedisLockProvider) {
    /// assert_eq!(provider.config().key_prefix, "shedlock");
    /// # }
    /// ```
    pub fn config(&self) -> &RedisLockConfig {
        &self.config
    }

    /// The key of lock `name`: `<prefix>:<name>`.
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_redis::RedisLockProvider) {
    /// assert_eq!(provider.key("report"), "shedlock:report");
    /// # }
    /// ```
    pub fn key(&self, name: &str) -> String {
        self.keys.key(name)
    }

    /// The connection, for commands of the application's own (it is a cheap clone of one
    /// multiplexed connection).
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_redis::RedisLockProvider) -> redis::RedisResult<()> {
    /// use lock_provider_redis::redis;
    /// let mut conn = provider.connection().clone();
    /// let pong: String = redis::cmd("PING").query_async(&mut conn).await?;
    /// # Ok(()) }
    /// ```
    pub fn connection(&self) -> &ConnectionManager {
        &self.conn
    }

    /// How the server keeps its data across a restart, as read at connect (`None` for a
    /// provider built with [`new`](Self::new) and not checked).
    ///
    /// ```no_run
    /// # fn run(provider: lock_provider_redis::RedisLockProvider) {
    /// if provider.persistence().is_some_and(|p| p.restart_loses_fences()) {
    ///     eprintln!("a Redis restart forgets locks and fences");
    /// }
    /// # }
    /// ```
    pub fn persistence(&self) -> Option<&Persistence> {
        self.persistence.as_ref()
    }

    /// Nothing to create on Redis (a lock's hash is written by its first acquire, the
    /// operations keys by the first heartbeat, run or pause): succeeds at once. It exists so
    /// that a service moving from an SQL provider keeps its start-up code. (The SQL providers'
    /// case of "a service with ShedLock's table alone" has no counterpart here: the registry,
    /// history and control keys are there as soon as they are written.)
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_redis::RedisLockProvider) -> Result<(), lock_core::LockError> {
    /// provider.ensure_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ensure_schema(&self) -> Result<(), LockError> {
        Ok(())
    }

    pub(crate) fn error(
        &self,
        operation: &'static str,
        lock: &str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> LockError {
        LockError::provider(operation, lock, self.describe(), source)
    }

    /// Runs `script` on the key of `name` with `args`: EVALSHA, and EVAL again after
    /// `NOSCRIPT` (the driver's `Script::invoke_async`).
    async fn run<T: redis::FromRedisValue>(
        &self,
        operation: &'static str,
        name: &str,
        script: &Script,
        args: &[String],
    ) -> Result<T, LockError> {
        let mut invocation = script.key(self.keys.key(name));
        for arg in args {
            invocation.arg(arg);
        }
        let mut conn = self.conn.clone();
        invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| self.error(operation, name, e))
    }

    /// The prefix's lock index, where the scripts can update it with the lock: always when the
    /// prefix holds a hash tag (one slot for all), else until the server has answered
    /// `CROSSSLOT` (a cluster, where the locks are in every slot; see `keys.rs`).
    pub(crate) fn index_key(&self) -> Option<&str> {
        (self.keys.tagged || !self.cross_slot.load(Ordering::Relaxed))
            .then_some(self.keys.index.as_str())
    }

    /// Remembers that the server is a cluster: from now on the index is not passed to the
    /// scripts of a prefix without a hash tag.
    pub(crate) fn learn_cross_slot(&self) {
        if !self.cross_slot.swap(true, Ordering::Relaxed) {
            tracing::info!(
                server = self.server.as_deref().unwrap_or("redis"),
                "the server is a cluster (CROSSSLOT): batches are split by hash tag, and \
                 without a hash tag in the key prefix the lock index is not kept"
            );
        }
    }

    /// Runs `script` on the key of `name` and the prefix's lock index (`KEYS[2]`), with
    /// `args`; on the lock's key alone where the index lives in another cluster slot.
    async fn run_indexed<T: redis::FromRedisValue>(
        &self,
        operation: &'static str,
        name: &str,
        script: &Script,
        args: &[String],
    ) -> Result<T, LockError> {
        if let Some(index) = self.index_key() {
            let mut invocation = script.key(self.keys.key(name));
            invocation.key(index);
            for arg in args {
                invocation.arg(arg);
            }
            let mut conn = self.conn.clone();
            match invocation.invoke_async(&mut conn).await {
                Ok(reply) => return Ok(reply),
                // Nothing ran: the lock and the index are in different slots.
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::CrossSlot) => {
                    self.learn_cross_slot();
                }
                Err(e) => return Err(self.error(operation, name, e)),
            }
        }
        self.run(operation, name, script, args).await
    }

    /// Whether the server runs in cluster mode: known from a `CROSSSLOT`, else asked once.
    async fn cluster_mode(&self) -> Result<bool, LockError> {
        if self.cross_slot.load(Ordering::Relaxed) {
            return Ok(true);
        }
        if let Some(known) = self.cluster_mode.get() {
            return Ok(*known);
        }
        let mut conn = self.conn.clone();
        let info: String = redis::cmd("INFO")
            .arg("cluster")
            .query_async(&mut conn)
            .await
            .map_err(|e| self.error("list", "", e))?;
        let enabled = info.lines().any(|line| line.trim() == "cluster_enabled:1");
        Ok(*self.cluster_mode.get_or_init(|| enabled))
    }

    /// The locks in the prefix's index, read [`MAX_BATCH`] at a time by one script each.
    async fn list_indexed(&self) -> Result<Vec<LockRecord>, LockError> {
        let mut conn = self.conn.clone();
        let mut names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(&self.keys.index)
            .query_async(&mut conn)
            .await
            .map_err(|e| self.error("list", "", e))?;
        names.sort();
        let mut records = Vec::with_capacity(names.len());
        for chunk in names.chunks(MAX_BATCH) {
            let mut invocation = self.scripts.read_many.prepare_invoke();
            for name in chunk {
                invocation.key(self.keys.key(name));
            }
            let reply: Vec<Value> = invocation
                .invoke_async(&mut conn)
                .await
                .map_err(|e| self.error("list", "", e))?;
            let Some((now, rows)) = reply.split_first() else {
                return Err(self.error("list", "", "an empty reply to the list script"));
            };
            for (name, row) in chunk.iter().zip(rows) {
                let fields = match row {
                    Value::Array(fields) => fields,
                    other => {
                        return Err(self.error("list", name, format!("{other:?} is not a row")));
                    }
                };
                // A key deleted by hand since its last grant reads as no row.
                if fields.is_empty() {
                    continue;
                }
                let mut reply = Vec::with_capacity(fields.len() + 1);
                reply.push(now.clone());
                reply.extend(fields.iter().cloned());
                if let (_, Some(record)) =
                    parse_row(name, &reply).map_err(|e| self.error("list", name, e))?
                {
                    records.push(record);
                }
            }
        }
        Ok(records)
    }

    /// Every key under `<prefix>:`, by `SCAN` (of the node asked, on a cluster), read one by
    /// one: what a prefix without a hash tag lists on Redis Cluster, where no index is kept.
    async fn list_scanned(&self) -> Result<Vec<LockRecord>, LockError> {
        let mut conn = self.conn.clone();
        let mut keys: Vec<String> = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(self.keys.pattern())
                .arg("COUNT")
                .arg(SCAN_COUNT)
                .query_async(&mut conn)
                .await
                .map_err(|e| self.error("list", "", e))?;
            keys.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        // SCAN may return a key twice (a rehash during the scan).
        keys.sort();
        keys.dedup();
        let mut records = Vec::with_capacity(keys.len());
        for key in &keys {
            let Some(name) = self.keys.name_of(key) else {
                continue;
            };
            // A key deleted since the scan reads as no row.
            if let (_, Some(record)) = self.row("list", name, &self.scripts.read).await? {
                records.push(record);
            }
        }
        Ok(records)
    }

    /// Runs a row script (read, force-unlock, reset-slot) and parses its reply.
    async fn row(
        &self,
        operation: &'static str,
        name: &str,
        script: &Script,
    ) -> Result<(DateTime<Utc>, Option<LockRecord>), LockError> {
        let reply: Vec<Value> = self.run(operation, name, script, &[]).await?;
        parse_row(name, &reply).map_err(|e| self.error(operation, name, e))
    }

    /// Runs a row script that acts only on a lock of the prefix's index (force-unlock,
    /// reset-slot) and parses its reply.
    async fn row_indexed(
        &self,
        operation: &'static str,
        name: &str,
        script: &Script,
    ) -> Result<(DateTime<Utc>, Option<LockRecord>), LockError> {
        let reply: Vec<Value> = self
            .run_indexed(operation, name, script, &[name.to_owned()])
            .await?;
        parse_row(name, &reply).map_err(|e| self.error(operation, name, e))
    }

    /// After a grant, `WAIT` for the configured replicas; a grant fewer of them acknowledged,
    /// or whose `WAIT` failed (its acknowledgement unknown), is released again (by its fence)
    /// and reported as an error, so its body does not run.
    pub(crate) async fn wait_for_replicas(
        &self,
        lease: &Lease,
        acks: ReplicaAcks,
    ) -> Result<(), LockError> {
        let mut conn = self.conn.clone();
        let timeout_ms = u64::try_from(acks.timeout.as_millis()).unwrap_or(u64::MAX);
        let waited: Result<i64, _> = redis::cmd("WAIT")
            .arg(acks.replicas)
            .arg(timeout_ms)
            .query_async(&mut conn)
            .await;
        let why = match waited {
            Ok(acknowledged) if acknowledged >= i64::from(acks.replicas) => return Ok(()),
            Ok(acknowledged) => format!(
                "was acknowledged by {acknowledged} of the {} replicas asked for within {:?}",
                acks.replicas, acks.timeout
            ),
            Err(e) => format!("could not be confirmed by replicas (WAIT failed: {e})"),
        };
        let released = self.release(lease, Duration::ZERO).await;
        Err(self.error(
            "acquire",
            lease.name(),
            format!(
                "the grant (fence {}) {why}; a failover could forget it, so it was released \
                 again ({}) and the job does not run here",
                lease.fence(),
                match released {
                    Ok(true) => "released".to_owned(),
                    Ok(false) => "it was no longer ours".to_owned(),
                    Err(e) => format!("the release failed too: {e}"),
                }
            ),
        ))
    }
}

#[async_trait]
impl LockProvider for RedisLockProvider {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        validate_lock_name(&request.name)?;
        let slot = request
            .slot
            .map_or(String::new(), |slot| slot.unix_millis().to_string());
        let lead = i64::try_from(request.max_slot_lead.as_millis()).unwrap_or(i64::MAX);
        let reply: Vec<Value> = self
            .run_indexed(
                "acquire",
                &request.name,
                &self.scripts.acquire,
                &[
                    request.locked_by.to_string(),
                    lease_millis(request.lock_at_most_for).to_string(),
                    slot,
                    lead.to_string(),
                    give_up_at_arg(request),
                    request.name.to_string(),
                ],
            )
            .await?;
        let outcome = acquire_outcome(request, &reply)
            .map_err(|e| self.error("acquire", &request.name, e))?;
        if let (AcquireOutcome::Acquired(lease), Some(acks)) = (&outcome, self.config.replica_acks)
        {
            self.wait_for_replicas(lease, acks).await?;
        }
        Ok(outcome)
    }

    /// One script over every key ([`lua::ACQUIRE_MANY`](crate::lua::ACQUIRE_MANY)); on Redis
    /// Cluster one per hash tag (see the README's "Batches").
    async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        self.acquire_batch(requests).await
    }

    /// One script over every key ([`lua::RELEASE_MANY`](crate::lua::RELEASE_MANY)).
    async fn release_many(&self, leases: &[(Lease, Duration)]) -> Result<Vec<bool>, LockError> {
        self.release_batch(leases).await
    }

    /// 256 keys per script.
    fn max_batch(&self) -> usize {
        MAX_BATCH
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        let extended: i64 = self
            .run(
                "extend",
                lease.name(),
                &self.scripts.extend,
                &[
                    lease.locked_by().to_owned(),
                    fence_to_sql(lease).to_string(),
                    lease_millis(lock_at_most_for).to_string(),
                ],
            )
            .await?;
        Ok(extended == 1)
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        let released: i64 = self
            .run(
                "release",
                lease.name(),
                &self.scripts.release,
                &[
                    lease.locked_by().to_owned(),
                    fence_to_sql(lease).to_string(),
                    at_least_millis(lock_at_least_for).to_string(),
                ],
            )
            .await?;
        Ok(released == 1)
    }

    /// Every lock of this prefix, from its lock index (the names its grants added, see
    /// `keys.rs`), 256 rows per script call: no `SCAN`, and no lock of a nested
    /// prefix (`billing:eu` under `billing`). A lock last granted before the index existed
    /// (an older version of this crate) is listed from its next grant on. On Redis Cluster
    /// with a prefix without a hash tag no index is kept: the keys under the prefix are
    /// found by `SCAN` of the node asked, as before.
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        if self.keys.tagged || !self.cluster_mode().await? {
            self.list_indexed().await
        } else {
            self.list_scanned().await
        }
    }

    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        Ok(self.row("read", name, &self.scripts.read).await?.1)
    }

    /// With replica acknowledgements, a grant read back after a lost reply is held to the
    /// same rule as one `acquire` answered: `WAIT` for the replicas, else release it and fail.
    /// `WAIT` counts the writes of this (multiplexed) connection, the lost acquire's among
    /// them unless the connection was replaced since.
    async fn confirm_grant(&self, lease: &Lease) -> Result<(), LockError> {
        match self.config.replica_acks {
            Some(acks) => self.wait_for_replicas(lease, acks).await,
            None => Ok(()),
        }
    }

    /// Only a lock in this prefix's index (see [`list_locks`](Self::list_locks)): `None`,
    /// nothing written, for another prefix's lock under this one (`billing:eu`'s `report` is
    /// the key of `billing`'s `eu:report`).
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        Ok(self
            .row_indexed("unlock", name, &self.scripts.force_unlock)
            .await?
            .1)
    }

    /// Only a lock in this prefix's index, as [`force_unlock`](Self::force_unlock).
    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        Ok(self
            .row_indexed("reset slot", name, &self.scripts.reset_slot)
            .await?
            .1)
    }

    /// The server's `TIME`, the clock every script reads (to the microsecond here; the
    /// scripts truncate it to the millisecond).
    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        let mut conn = self.conn.clone();
        let (secs, micros): (i64, u32) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(|e| self.error("now", "", e))?;
        DateTime::from_timestamp(secs, micros.saturating_mul(1000))
            .ok_or_else(|| self.error("now", "", format!("TIME returned {secs} s {micros} µs")))
    }

    fn describe(&self) -> String {
        match &self.server {
            Some(server) => format!("redis keys {} on {server}", self.keys.pattern()),
            None => format!("redis keys {}", self.keys.pattern()),
        }
    }
}

impl ClusterProvider for RedisLockProvider {
    /// The registry, run history, pauses and trigger requests, in the keys under
    /// `{<prefix>:ops}:` (see the crate's README, "The operations keys").
    fn cluster(&self) -> Option<&dyn Cluster> {
        Some(self)
    }
}

/// The most keys one batch script takes (`batch.rs` says why 256).
pub(crate) const MAX_BATCH: usize = 256;

/// The acquire script's give-up argument: milliseconds since the epoch, `""` for none. Cut
/// down to the millisecond, so never later than the request's own instant.
pub(crate) fn give_up_at_arg(request: &LockRequest) -> String {
    request
        .give_up_at
        .map_or(String::new(), |at| at.timestamp_millis().to_string())
}

/// The acquire script's reply as an outcome (see `scripts::ACQUIRE`).
pub(crate) fn acquire_outcome(
    request: &LockRequest,
    reply: &[Value],
) -> Result<AcquireOutcome, String> {
    let status = int(reply.first().unwrap_or(&Value::Nil))?;
    let now = time(int(reply.get(1).unwrap_or(&Value::Nil))?.ok_or("no time in the reply")?)?;
    let field = |i: usize| reply.get(i).unwrap_or(&Value::Nil);
    let refusal = |reason| -> Result<AcquireOutcome, String> {
        Ok(AcquireOutcome::Refused(Refusal {
            reason,
            locked_by: text(field(2))?,
            lock_until: opt_time(field(3))?,
            last_fire: opt_time(field(4))?,
            database_now: Some(now),
        }))
    };
    match status {
        Some(0) => {
            let fence = int(field(2))?.ok_or("a grant without a fence")?;
            Ok(AcquireOutcome::Acquired(Lease::granted(
                request,
                lock_core::encoding::fence_from_sql(fence),
            )))
        }
        Some(1) => refusal(RefusalReason::Held),
        Some(2) => refusal(RefusalReason::SlotAlreadyRun),
        Some(3) => Ok(AcquireOutcome::Refused(Refusal::slot_in_future(now))),
        Some(4) => Ok(AcquireOutcome::Refused(Refusal::too_late(now))),
        other => Err(format!("unexpected acquire status {other:?}")),
    }
}
