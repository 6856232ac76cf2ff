//! `PostgresLockProvider`: the `LockProvider` contract on a deadpool-postgres pool.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use deadpool_postgres::Pool;
use lock_cluster::{Cluster, ClusterProvider};
use lock_core::batching::{acquire_each, batchable};
use lock_core::{
    AcquireOutcome, Lease, LockError, LockProvider, LockRecord, LockRequest, Refusal,
    RefusalReason, validate_lock_name,
};
use lock_sql::{
    ColumnNames, IdentifierStyle, at_least_millis, fence_from_sql, fence_to_sql, lease_millis,
};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::config::LockTableConfig;
use crate::connection::ConnectionConfig;
use crate::operations::PgOperations;
use crate::session::Session;
use crate::statements::{self as sql, LockStatements};
use crate::table::{self, TableShape};

/// Locks in a PostgreSQL table shared with ShedLock, on a [`deadpool_postgres::Pool`].
///
/// - **Database time**: every `now` is the server's `timezone('utc', CURRENT_TIMESTAMP)`,
///   durations travel as intervals; a client whose clock is wrong can neither steal nor keep a
///   lock longer.
/// - **One round trip** per acquire, release and extend; statements are prepared once per
///   pooled connection (or sent unnamed, behind PgBouncer: see
///   [`with_statement_cache`](Self::with_statement_cache)). A losing acquire writes nothing; a row deleted by hand is recreated by
///   the next acquire.
/// - **Fencing and once-per-slot** through the `fence` and `last_fire` columns, which
///   [`ensure_schema`](Self::ensure_schema) adds to a ShedLock table. Without them the provider
///   still gives exclusion (fence 0, slots ignored) and logs a warning once.
///
/// ```no_run
/// use lock_provider_postgres::PostgresLockProvider;
///
/// # async fn run() -> Result<(), lock_core::LockError> {
/// let provider = PostgresLockProvider::connect("postgres://app@db.internal/app")
///     .await?
///     .with_table("ops.shedlock")?;
/// provider.ensure_schema().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PostgresLockProvider {
    config: LockTableConfig,
    pub(crate) session: Session,
    /// The operations tables next to the lock table (`operations.rs`).
    operations: Option<Arc<PgOperations>>,
}

impl PostgresLockProvider {
    /// A provider on `pool` using the table `shedlock` with ShedLock's column names.
    ///
    /// Nothing is sent to the database yet; the table is looked at on first use (or by
    /// [`check_schema`](Self::check_schema) / [`ensure_schema`](Self::ensure_schema)).
    ///
    /// ```no_run
    /// use lock_provider_postgres::{deadpool_postgres, PostgresLockProvider};
    ///
    /// let mut config = deadpool_postgres::Config::new();
    /// config.url = Some("postgres://app@localhost/app".into());
    /// let pool = config
    ///     .create_pool(Some(deadpool_postgres::Runtime::Tokio1), tokio_postgres::NoTls)
    ///     .unwrap();
    /// let provider = PostgresLockProvider::new(pool);
    /// ```
    pub fn new(pool: Pool) -> Self {
        Self::with_config(pool, LockTableConfig::default())
            .expect("the default lock table configuration is valid")
    }

    /// A provider on `pool` with the given table and columns, refused if any name is not a
    /// plain identifier.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// use lock_provider_postgres::ColumnNames;
    /// use lock_provider_postgres::{LockTableConfig, PostgresLockProvider};
    ///
    /// let config = LockTableConfig {
    ///     table: "ops.job_locks".into(),
    ///     columns: ColumnNames { locked_by: "owner".into(), ..ColumnNames::default() },
    /// };
    /// let provider = PostgresLockProvider::with_config(pool(), config)?;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_config(pool: Pool, config: LockTableConfig) -> Result<Self, LockError> {
        let table = config.resolve(IdentifierStyle::POSTGRES)?;
        let operations = PgOperations::new(pool.clone(), &table).map(Arc::new);
        Ok(PostgresLockProvider {
            session: Session::new(pool, table),
            config,
            operations,
        })
    }

    /// Connects to `url` (`postgres://user:password@host:port/database?...`, or libpq's
    /// `key=value` form) with a new pool, and checks that the server answers, so that a wrong
    /// URL fails at start-up rather than at the first fire.
    ///
    /// Besides the driver's parameters, the URL may set `sslmode` (`disable`, the default
    /// without it; `prefer`, `require`, `verify-ca`, `verify-full`), `sslrootcert` (a PEM file)
    /// and `statement_cache=false` (for PgBouncer in transaction mode): see
    /// [`ConnectionConfig`]. A 10 s connect timeout applies unless the URL sets one; the pool
    /// has deadpool's default size (see [`ConnectionConfig::pool_size`]).
    ///
    /// The table is not looked at yet (a `.with_table(..)` may follow): call
    /// [`ensure_schema`](Self::ensure_schema) or [`check_schema`](Self::check_schema) at
    /// start-up; otherwise the first lock operation does it. An unreachable server, or a TLS
    /// handshake that fails, is a [`LockError::Provider`] (operation `connect`) with the
    /// driver's error as source.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// use lock_provider_postgres::PostgresLockProvider;
    ///
    /// let provider = PostgresLockProvider::connect("postgres://app@localhost/app").await?;
    /// let over_tls = PostgresLockProvider::connect(
    ///     "postgres://app@db.internal/app?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem",
    /// )
    /// .await?;
    /// provider.ensure_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(url: &str) -> Result<Self, LockError> {
        Self::connect_with(ConnectionConfig::from_url(url)?).await
    }

    /// [`connect`](Self::connect) with a [`ConnectionConfig`], for what a URL cannot say: root
    /// certificates given as PEM, the pool size.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::LockError> {
    /// use lock_provider_postgres::{ConnectionConfig, PostgresLockProvider, SslMode};
    ///
    /// let ca_pem = std::env::var("DB_CA_PEM").unwrap_or_default();
    /// let config = ConnectionConfig::from_url("postgres://app@db.internal/app")?
    ///     .ssl_mode(SslMode::VerifyFull)
    ///     .root_certificates_pem(ca_pem.as_bytes())?
    ///     .pool_size(8);
    /// let provider = PostgresLockProvider::connect_with(config).await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect_with(config: ConnectionConfig) -> Result<Self, LockError> {
        let pool = config.build_pool()?;
        let mut provider = Self::new(pool).with_statement_cache(config.get_statement_cache());
        provider.session.endpoint = Some(config.endpoint().into());
        // Fail fast, and as a connect error, when the server cannot be reached; the connection
        // stays in the pool for the first fire.
        drop(provider.session.client("connect", "").await?);
        Ok(provider)
    }

    /// The same provider with statements prepared once per connection and kept (`true`, the
    /// default) or sent unnamed each time (`false`), for a pool of your own behind PgBouncer in
    /// transaction mode; see [`ConnectionConfig::statement_cache`].
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost:6432/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// use lock_provider_postgres::PostgresLockProvider;
    ///
    /// let provider = PostgresLockProvider::new(pool()).with_statement_cache(false);
    /// ```
    pub fn with_statement_cache(mut self, cache: bool) -> Self {
        self.session.statement_cache = cache;
        self
    }

    /// The same provider on another table (`table` or `schema.table`), refused if the name is
    /// not a plain identifier.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// use lock_provider_postgres::PostgresLockProvider;
    ///
    /// let provider = PostgresLockProvider::new(pool()).with_table("ops.shedlock")?;
    /// assert!(PostgresLockProvider::new(pool()).with_table("locks; DROP TABLE users").is_err());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_table(self, table: &str) -> Result<Self, LockError> {
        let config = LockTableConfig {
            table: table.into(),
            ..self.config.clone()
        };
        self.with(config)
    }

    /// The same provider with other column names, refused if a name is not a plain identifier
    /// or two are the same.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// use lock_provider_postgres::ColumnNames;
    /// use lock_provider_postgres::PostgresLockProvider;
    ///
    /// let columns = ColumnNames { name: "lock_name".into(), ..ColumnNames::default() };
    /// let provider = PostgresLockProvider::new(pool()).with_columns(columns)?;
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_columns(self, columns: ColumnNames) -> Result<Self, LockError> {
        let config = LockTableConfig {
            columns,
            ..self.config.clone()
        };
        self.with(config)
    }

    fn with(self, config: LockTableConfig) -> Result<Self, LockError> {
        let cache = self.session.statement_cache;
        Ok(Self::with_config(self.session.pool, config)?.with_statement_cache(cache))
    }

    /// The pool the provider takes its connections from.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// # fn provider() -> lock_provider_postgres::PostgresLockProvider {
    /// #     lock_provider_postgres::PostgresLockProvider::new(pool())
    /// # }
    /// println!("{:?}", provider().pool().status());
    /// ```
    pub fn pool(&self) -> &Pool {
        &self.session.pool
    }

    /// The table and column configuration.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// # fn provider() -> lock_provider_postgres::PostgresLockProvider {
    /// #     lock_provider_postgres::PostgresLockProvider::new(pool())
    /// # }
    /// assert_eq!(provider().config().table, "shedlock");
    /// ```
    pub fn config(&self) -> &LockTableConfig {
        &self.config
    }

    /// The `CREATE TABLE` statement for this provider's table and columns, for migrations run
    /// by other tools.
    ///
    /// ```no_run
    /// # fn pool() -> lock_provider_postgres::deadpool_postgres::Pool {
    /// #     use lock_provider_postgres::{deadpool_postgres as dp, tokio_postgres::NoTls};
    /// #     let mut config = dp::Config::new();
    /// #     config.url = Some("postgres://app@localhost/app".into());
    /// #     config.create_pool(Some(dp::Runtime::Tokio1), NoTls).unwrap() // connects lazily
    /// # }
    /// # fn provider() -> lock_provider_postgres::PostgresLockProvider {
    /// #     lock_provider_postgres::PostgresLockProvider::new(pool())
    /// # }
    /// println!("{}", provider().create_table_sql());
    /// ```
    pub fn create_table_sql(&self) -> String {
        table::create_table(&self.session.table)
    }

    /// Creates the lock table if it is missing, or adds `fence` and `last_fire` to a table
    /// made by ShedLock's DDL; does nothing to a table that already has every column. Safe to
    /// call from many instances at once.
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
    /// provider.ensure_schema().await?;
    /// # Ok(()) }
    /// ```
    pub async fn ensure_schema(&self) -> Result<(), LockError> {
        self.session.ensure_table().await?;
        crate::operations::ensure(self.operations.as_deref(), &self.config).await?;
        self.check_schema().await.map(|_| ())
    }

    /// Looks at the lock table (one query) and says what it supports. A table without the
    /// extension columns is logged once, at `warn`, with the statements that add them.
    ///
    /// Errors: [`LockError::TableMissing`] (with the DDL to run) when the table does not exist,
    /// [`LockError::InvalidConfiguration`] when a configured column is missing or has the wrong
    /// type, [`LockError::Provider`] when the database cannot be reached.
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
    /// use lock_provider_postgres::TableShape;
    /// if provider.check_schema().await? == TableShape::ShedLockOnly {
    ///     provider.ensure_schema().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn check_schema(&self) -> Result<TableShape, LockError> {
        self.session.forget_shape();
        Ok(self.session.statements().await?.shape)
    }

    /// The statements the provider runs on its table as it is now (looks at the table if it
    /// has not yet).
    ///
    /// ```no_run
    /// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
    /// println!("EXPLAIN {}", provider.statements().await?.acquire);
    /// # Ok(()) }
    /// ```
    pub async fn statements(&self) -> Result<LockStatements, LockError> {
        Ok(LockStatements::clone(&*self.session.statements().await?))
    }

    fn record(&self, operation: &'static str, row: &Row) -> Result<LockRecord, LockError> {
        let name: String = row
            .try_get(0)
            .map_err(|e| self.session.row_error(operation, "", e))?;
        let parse = || -> Result<LockRecord, tokio_postgres::Error> {
            Ok(LockRecord {
                lock_until: utc(row.try_get(1)?),
                locked_at: utc(row.try_get(2)?),
                locked_by: row.try_get(3)?,
                fence: fence_from_sql(row.try_get(4)?),
                last_fire: row.try_get::<_, Option<NaiveDateTime>>(5)?.map(utc),
                held: row.try_get(6)?,
                name: name.clone(),
            })
        };
        parse().map_err(|e| self.session.row_error(operation, &name, e))
    }

    /// The refusal of an acquire that lost a race, the row read again to tell who won
    /// (`lock_sql::sql::postgres::refusal_as_committed`: one primary-key read, only for such a
    /// loser; the batch's waiting statement reads the winner's row in the same statement). A
    /// read that fails keeps the refusal it was.
    async fn refusal_as_committed(
        &self,
        request: &LockRequest,
        refusal: Refusal,
        db_now: DateTime<Utc>,
    ) -> Refusal {
        match self.read_lock(&request.name).await {
            Ok(Some(row)) => lock_sql::sql::postgres::refusal_as_committed(request, row, db_now),
            _ => refusal,
        }
    }
}

impl fmt::Debug for PostgresLockProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresLockProvider")
            .field("config", &self.config)
            .field("pool", &self.session.pool.status())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl LockProvider for PostgresLockProvider {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        validate_lock_name(&request.name)?;
        let name: &str = &request.name;
        let locked_by: &str = &request.locked_by;
        let at_most = lease_millis(request.lock_at_most_for);
        let slot = request.slot.map(|s| s.instant().naive_utc());
        let lead = lease_millis(request.max_slot_lead);
        let give_up_at = request.give_up_at.map(|at| at.naive_utc());
        let params: [&(dyn ToSql + Sync); 6] =
            [&name, &at_most, &locked_by, &slot, &lead, &give_up_at];
        let rows: Vec<Row> = self
            .session
            .run("acquire", name, |s| &s.acquire, sql::ACQUIRE_TYPES, &params)
            .await?;
        let Some(row) = rows.first() else {
            // No row for this name: its first fire, or the row was deleted by hand.
            let rows: Vec<Row> = self
                .session
                .run("acquire", name, |s| &s.create, sql::ACQUIRE_TYPES, &params)
                .await?;
            let row = rows.first().ok_or_else(|| {
                self.session
                    .unexpected("acquire", name, "the create statement returned no row")
            })?;
            let parse = || -> Result<(Option<i64>, NaiveDateTime, bool), tokio_postgres::Error> {
                Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?))
            };
            let (granted, db_now, too_late) =
                parse().map_err(|e| self.session.row_error("acquire", name, e))?;
            return Ok(match granted {
                Some(new_fence) => {
                    AcquireOutcome::Acquired(Lease::granted(request, fence_from_sql(new_fence)))
                }
                None if too_late => AcquireOutcome::Refused(Refusal::too_late(utc(db_now))),
                None if request.slot_too_far_ahead(utc(db_now)) => {
                    AcquireOutcome::Refused(Refusal::slot_in_future(utc(db_now)))
                }
                // Another instance created it between our two statements: it holds the lock.
                None => AcquireOutcome::Refused(Refusal::new(RefusalReason::Held)),
            });
        };
        let parse = || -> Result<(AcquireOutcome, DateTime<Utc>), tokio_postgres::Error> {
            let db_now = utc(row.try_get::<_, NaiveDateTime>(5)?);
            if let Some(new_fence) = row.try_get::<_, Option<i64>>(0)? {
                let lease = Lease::granted(request, fence_from_sql(new_fence));
                return Ok((AcquireOutcome::Acquired(lease), db_now));
            }
            let locked_by: Option<String> = row.try_get(1)?;
            let lock_until: Option<NaiveDateTime> = row.try_get(2)?;
            let last_fire: Option<NaiveDateTime> = row.try_get(3)?;
            let held: bool = row.try_get(4)?;
            let too_late: bool = row.try_get(6)?;
            let refusal = lock_sql::sql::postgres::refusal(
                request, locked_by, lock_until, last_fire, held, db_now, too_late,
            );
            Ok((AcquireOutcome::Refused(refusal), db_now))
        };
        let (outcome, db_now) = parse().map_err(|e| self.session.row_error("acquire", name, e))?;
        match outcome {
            // Refused, yet the row the statement read was free with its slot not run.
            AcquireOutcome::Refused(refusal) if refusal.database_now.is_none() => Ok(
                AcquireOutcome::Refused(self.refusal_as_committed(request, refusal, db_now).await),
            ),
            outcome => Ok(outcome),
        }
    }

    /// One statement over arrays for the whole batch (plus one creating the rows that were
    /// missing); see [`LockStatements::acquire_many`].
    async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        // Names repeated, too many, or one: decided one by one, as the contract allows.
        if !batchable(requests, crate::batch::MAX_BATCH) {
            return acquire_each(self, requests).await;
        }
        let outcomes = std::sync::Mutex::new(vec![None; requests.len()]);
        self.acquire_batch(requests, &|at, outcome| {
            outcomes.lock().unwrap_or_else(|p| p.into_inner())[at] = Some(outcome);
        })
        .await?;
        outcomes
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .into_iter()
            .zip(requests)
            .map(|(outcome, request)| {
                outcome.ok_or_else(|| {
                    self.session.unexpected(
                        "acquire",
                        &request.name,
                        "the batch statement returned no row for this name",
                    )
                })
            })
            .collect()
    }

    /// As [`acquire_many`](LockProvider::acquire_many), telling the first statement's
    /// decisions (the rows it could lock at once) before the second statement waits for the
    /// rows other transactions held.
    async fn acquire_many_each(
        &self,
        requests: &[LockRequest],
        decided: &(dyn Fn(usize, AcquireOutcome) + Send + Sync),
    ) -> Result<(), LockError> {
        if !batchable(requests, crate::batch::MAX_BATCH) {
            for (at, outcome) in acquire_each(self, requests).await?.into_iter().enumerate() {
                decided(at, outcome);
            }
            return Ok(());
        }
        self.acquire_batch(requests, decided).await
    }

    async fn release_many(&self, leases: &[(Lease, Duration)]) -> Result<Vec<bool>, LockError> {
        match leases {
            [] => Ok(Vec::new()),
            [(lease, at_least)] => Ok(vec![self.release(lease, *at_least).await?]),
            _ if leases.len() <= crate::batch::MAX_BATCH => self.release_batch(leases).await,
            _ => {
                let mut released = Vec::with_capacity(leases.len());
                for chunk in leases.chunks(crate::batch::MAX_BATCH) {
                    released.extend(self.release_batch(chunk).await?);
                }
                Ok(released)
            }
        }
    }

    fn max_batch(&self) -> usize {
        crate::batch::MAX_BATCH
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        let (name, locked_by) = (lease.name(), lease.locked_by());
        let fence = fence_to_sql(lease);
        let at_most = lease_millis(lock_at_most_for);
        let params: [&(dyn ToSql + Sync); 4] = [&name, &locked_by, &fence, &at_most];
        let n: u64 = self
            .session
            .run("extend", name, |s| &s.extend, sql::EXTEND_TYPES, &params)
            .await?;
        Ok(n > 0)
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        let (name, locked_by) = (lease.name(), lease.locked_by());
        let fence = fence_to_sql(lease);
        let at_least = at_least_millis(lock_at_least_for);
        let params: [&(dyn ToSql + Sync); 4] = [&name, &locked_by, &fence, &at_least];
        let n: u64 = self
            .session
            .run("release", name, |s| &s.release, sql::RELEASE_TYPES, &params)
            .await?;
        Ok(n > 0)
    }

    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        let rows: Vec<Row> = self.session.run("list", "", |s| &s.list, &[], &[]).await?;
        rows.iter().map(|row| self.record("list", row)).collect()
    }

    /// One lookup on the primary key, not the trait's whole-table default (read at each
    /// misfire check and after a lost acquire reply).
    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let rows: Vec<Row> = self
            .session
            .run("read", name, |s| &s.read, sql::UNLOCK_TYPES, &[&name])
            .await?;
        rows.first().map(|row| self.record("read", row)).transpose()
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let rows: Vec<Row> = self
            .session
            .run(
                "unlock",
                name,
                |s| &s.force_unlock,
                sql::UNLOCK_TYPES,
                &[&name],
            )
            .await?;
        rows.first()
            .map(|row| self.record("unlock", row))
            .transpose()
    }

    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        let rows: Vec<Row> = self
            .session
            .run(
                "reset slot",
                name,
                |s| &s.reset_slot,
                sql::UNLOCK_TYPES,
                &[&name],
            )
            .await?;
        rows.first()
            .map(|row| self.record("reset slot", row))
            .transpose()
    }

    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        let rows: Vec<Row> = self.session.run("now", "", |s| &s.now, &[], &[]).await?;
        let row = rows
            .first()
            .ok_or_else(|| self.session.unexpected("now", "", "SELECT returned no row"))?;
        let now: NaiveDateTime = row
            .try_get(0)
            .map_err(|e| self.session.row_error("now", "", e))?;
        Ok(utc(now))
    }

    /// A table made by ShedLock's DDL has no `last_fire`: refused, with the `ALTER TABLE`.
    async fn check_once_per_slot(&self) -> Result<(), LockError> {
        if self.check_schema().await? == TableShape::Full {
            return Ok(());
        }
        let table = &self.session.table;
        Err(lock_sql::sql::no_last_fire(
            &table.display,
            &table::add_extension_columns(table),
        ))
    }

    fn describe(&self) -> String {
        self.session.describe()
    }
}

impl ClusterProvider for PostgresLockProvider {
    fn cluster(&self) -> Option<&dyn Cluster> {
        self.operations.as_deref().map(|o| o as _)
    }
}

fn utc(naive: NaiveDateTime) -> DateTime<Utc> {
    naive.and_utc()
}
