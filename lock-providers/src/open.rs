//! How a provider is opened ([`OpenOptions`]), what can go wrong ([`OpenError`]), and what
//! comes back ([`OpenedProvider`]).

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use lock_cluster::ClusterProvider;
use lock_core::{LockError, LockProvider};
use lock_sql::DEFAULT_TABLE;

use crate::UrlError;
use crate::deadline::{Deadline, TimedOut};

/// How long connecting may take by default: TCP, TLS and the protocol's handshake.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What to do about the lock table once connected.
///
/// ```
/// use lock_providers::{OpenOptions, SchemaAction};
///
/// let service = OpenOptions::new().schema(SchemaAction::Create);
/// let no_ddl_rights = OpenOptions::new().schema(SchemaAction::Check);
/// assert_ne!(service.schema_action(), no_ddl_rights.schema_action());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SchemaAction {
    /// Nothing: the first operation on the table reports a missing one.
    #[default]
    Leave,
    /// `ensure_schema()`: create the table or add the extension columns.
    Create,
    /// Only look at it (a service without DDL rights): a missing table is an error at open,
    /// [`LockError::TableMissing`] with the DDL to run.
    Check,
}

/// How [`LockDatabase::open`](crate::LockDatabase::open) opens a provider: the table, the
/// [`SchemaAction`], whether a missing database file may be created, how long connecting may
/// take and how long each operation may wait for its answer.
///
/// ```no_run
/// use lock_providers::{OpenOptions, SchemaAction};
/// # async fn run() -> Result<(), lock_providers::OpenError> {
/// let opened = OpenOptions::new()
///     .table("ops.shedlock")
///     .schema(SchemaAction::Check)
///     .open("postgres://app@db.internal/app")
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpenOptions {
    table: String,
    schema: SchemaAction,
    create_if_missing: bool,
    connect_timeout: Duration,
    operation_timeout: Option<Duration>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            table: DEFAULT_TABLE.to_owned(),
            schema: SchemaAction::Leave,
            create_if_missing: true,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            operation_timeout: None,
        }
    }
}

impl OpenOptions {
    /// The default table (`shedlock`), left as it is; a missing SQLite file is created, as
    /// `SqliteLockProvider::open` does.
    ///
    /// ```
    /// let options = lock_providers::OpenOptions::new();
    /// assert_eq!(options.table_name(), "shedlock");
    /// assert_eq!(options.schema_action(), lock_providers::SchemaAction::Leave);
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// The lock table, `table` or `schema.table`; the provider refuses a name that is not a
    /// plain identifier ([`OpenError::Table`]).
    ///
    /// ```
    /// let options = lock_providers::OpenOptions::new().table("ops.shedlock");
    /// assert_eq!(options.table_name(), "ops.shedlock");
    /// ```
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// What to do about the table once connected.
    ///
    /// ```
    /// use lock_providers::{OpenOptions, SchemaAction};
    /// let options = OpenOptions::new().schema(SchemaAction::Create);
    /// assert_eq!(options.schema_action(), SchemaAction::Create);
    /// ```
    pub fn schema(mut self, action: SchemaAction) -> Self {
        self.schema = action;
        self
    }

    /// Whether opening a database file that does not exist creates it (the default) or fails
    /// with [`OpenError::Missing`]: an inspection tool must not leave an empty database
    /// behind a mistyped path. Servers never create a database.
    ///
    /// ```
    /// let options = lock_providers::OpenOptions::new().create_if_missing(false);
    /// assert!(!options.creates_missing());
    /// ```
    pub fn create_if_missing(mut self, create: bool) -> Self {
        self.create_if_missing = create;
        self
    }

    /// How long connecting may take (default 10 s): the TCP connection, TLS and the protocol's
    /// handshake (PostgreSQL's startup and authentication, MySQL's greeting, Redis's version
    /// and script checks), whatever the URL says. A server that accepts the connection and
    /// never answers is then [`OpenError::Unreachable`] saying it timed out, not a hang.
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = lock_providers::OpenOptions::new().connect_timeout(Duration::from_secs(3));
    /// assert_eq!(options.get_connect_timeout(), Duration::from_secs(3));
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long connecting may take.
    ///
    /// ```
    /// let options = lock_providers::OpenOptions::new();
    /// assert_eq!(options.get_connect_timeout(), std::time::Duration::from_secs(10));
    /// ```
    pub fn get_connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// How long each operation of the opened provider may wait for its answer (default: no
    /// limit, the driver's own). When it passes, the operation fails with
    /// [`LockError::Provider`] saying it timed out; the database may still have applied it.
    /// For an operator's tool or page, where a database that stopped answering must be an
    /// error within seconds; a scheduler has its own bounds (lease lengths, acquire windows).
    ///
    /// ```
    /// use std::time::Duration;
    /// let options = lock_providers::OpenOptions::new().operation_timeout(Duration::from_secs(10));
    /// assert_eq!(options.get_operation_timeout(), Some(Duration::from_secs(10)));
    /// ```
    pub fn operation_timeout(mut self, timeout: Duration) -> Self {
        self.operation_timeout = Some(timeout);
        self
    }

    /// How long each operation may wait for its answer, if limited.
    ///
    /// ```
    /// assert_eq!(lock_providers::OpenOptions::new().get_operation_timeout(), None);
    /// ```
    pub fn get_operation_timeout(&self) -> Option<Duration> {
        self.operation_timeout
    }

    /// Parses `url` ([`LockDatabase::parse`](crate::LockDatabase::parse)) and opens it with
    /// these options.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_providers::OpenError> {
    /// let opened = lock_providers::OpenOptions::new()
    ///     .table("app_locks")
    ///     .open("sqlite:///var/lib/app/locks.db")
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn open(&self, url: &str) -> Result<OpenedProvider, OpenError> {
        crate::LockDatabase::parse(url)?.open(self).await
    }

    /// The lock table's name, as given.
    ///
    /// ```
    /// assert_eq!(lock_providers::OpenOptions::new().table_name(), lock_sql::DEFAULT_TABLE);
    /// ```
    pub fn table_name(&self) -> &str {
        &self.table
    }

    /// The [`SchemaAction`] chosen.
    ///
    /// ```
    /// let options = lock_providers::OpenOptions::new();
    /// assert_eq!(options.schema_action(), lock_providers::SchemaAction::Leave);
    /// ```
    pub fn schema_action(&self) -> SchemaAction {
        self.schema
    }

    /// Whether a missing database file is created.
    ///
    /// ```
    /// assert!(lock_providers::OpenOptions::new().creates_missing());
    /// ```
    pub fn creates_missing(&self) -> bool {
        self.create_if_missing
    }

    /// Awaits a provider's connect within [`connect_timeout`](Self::connect_timeout); a
    /// failure or the timeout is [`OpenError::Unreachable`] naming `database`.
    pub(crate) async fn connect<T>(
        &self,
        database: &(dyn fmt::Display + Sync),
        connecting: impl Future<Output = Result<T, LockError>>,
    ) -> Result<T, OpenError> {
        let context = || format!("cannot connect to {database}");
        match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(Ok(connected)) => Ok(connected),
            Ok(Err(e)) => Err(OpenError::unreachable(context(), e)),
            Err(_) => {
                let timed_out = TimedOut::connecting(self.connect_timeout);
                let source = LockError::provider("connect", "", database.to_string(), timed_out);
                Err(OpenError::unreachable(context(), source))
            }
        }
    }

    /// Runs the provider's `ensure_schema()` future if the action is
    /// [`Create`](SchemaAction::Create); a provider module's one line for it.
    pub(crate) async fn ensure_schema(
        &self,
        ensure_schema: impl Future<Output = Result<(), LockError>>,
    ) -> Result<(), OpenError> {
        if self.schema == SchemaAction::Create {
            ensure_schema.await.map_err(OpenError::Schema)?;
        }
        Ok(())
    }

    /// Reads the table if the action is [`Check`](SchemaAction::Check): the one check every
    /// provider has; a missing table is `LockError::TableMissing` with the DDL to run.
    pub(crate) async fn check_schema(&self, provider: &dyn LockProvider) -> Result<(), OpenError> {
        if self.schema == SchemaAction::Check {
            provider.list_locks().await.map_err(OpenError::Schema)?;
        }
        Ok(())
    }
}

/// Why a provider could not be opened.
///
/// ```no_run
/// use lock_providers::OpenError;
/// # async fn run() {
/// match lock_providers::open("postgres://app@db.internal/app").await {
///     Ok(opened) => opened.close().await,
///     Err(OpenError::Unreachable { context, source }) => eprintln!("{context}: {source}"),
///     Err(other) => eprintln!("{other}"),
/// }
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL names no registered provider, or is malformed for its provider.
    #[error("the lock database URL {0}")]
    Url(#[from] UrlError),
    /// The database could not be reached or opened: server down, credentials refused,
    /// unknown database, unreadable file.
    #[error("{context}")]
    Unreachable {
        /// What failed where: `cannot connect to the PostgreSQL server at host:5432
        /// (database app)`, `cannot open the SQLite database locks.db`.
        context: String,
        /// The provider's error.
        #[source]
        source: LockError,
    },
    /// The database file does not exist, and [`OpenOptions::create_if_missing`] forbade
    /// creating it.
    #[error("{database} does not exist")]
    Missing {
        /// The database, as [`LockDatabase`](crate::LockDatabase) displays it.
        database: String,
    },
    /// The provider refused the table name.
    #[error(transparent)]
    Table(LockError),
    /// Creating or checking the table failed ([`SchemaAction`]).
    #[error(transparent)]
    Schema(LockError),
}

impl OpenError {
    pub(crate) fn unreachable(context: String, source: LockError) -> Self {
        OpenError::Unreachable { context, source }
    }

    /// The provider's own error, for a caller that reports [`LockError`]s: the source of
    /// [`Unreachable`](Self::Unreachable), [`Table`](Self::Table) and
    /// [`Schema`](Self::Schema) as it is, the others as
    /// [`LockError::InvalidConfiguration`] with this error's message.
    ///
    /// ```
    /// let error = lock_providers::LockDatabase::parse("db:5432").unwrap_err();
    /// let error = lock_providers::OpenError::from(error).into_lock_error();
    /// assert!(matches!(error, lock_core::LockError::InvalidConfiguration(_)));
    /// ```
    pub fn into_lock_error(self) -> LockError {
        match self {
            OpenError::Unreachable { source, .. } => source,
            OpenError::Table(error) | OpenError::Schema(error) => error,
            other => LockError::InvalidConfiguration(other.to_string()),
        }
    }
}

/// Ends a provider's connections cleanly, at [`OpenedProvider::close`].
type Closing = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An open provider, and what has to be closed before the process exits.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let opened = lock_providers::open("mysql://root@127.0.0.1:3306/test").await?;
/// for lock in opened.provider().list_locks().await? {
///     println!("{} held by {}", lock.name, lock.locked_by);
/// }
/// opened.close().await;
/// # Ok(()) }
/// ```
pub struct OpenedProvider {
    provider: Arc<dyn ClusterProvider>,
    /// The same provider, for [`downcast_ref`](Self::downcast_ref).
    concrete: Arc<dyn Any + Send + Sync>,
    closing: Option<Closing>,
}

impl OpenedProvider {
    pub(crate) fn new<P: ClusterProvider>(provider: P) -> Self {
        let provider = Arc::new(provider);
        OpenedProvider {
            provider: provider.clone(),
            concrete: provider,
            closing: None,
        }
    }

    /// The same provider with each operation bounded by `limit` ([`Deadline`]); `downcast_ref`
    /// still finds the provider's own type.
    pub(crate) fn with_deadline(mut self, limit: Duration, server: String) -> Self {
        self.provider = Arc::new(Deadline::new(self.provider, limit, server));
        self
    }

    /// What [`close`](Self::close) awaits after dropping the provider.
    pub(crate) fn closing_with(
        mut self,
        goodbye: impl Future<Output = ()> + Send + 'static,
    ) -> Self {
        self.closing = Some(Box::pin(goodbye));
        self
    }

    /// The provider, for a scheduler or an executor.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let opened = lock_providers::open("sqlite:///var/lib/app/locks.db").await?;
    /// let executor = lock_core::LockingTaskExecutor::new(opened.provider().clone());
    /// # Ok(()) }
    /// ```
    pub fn provider(&self) -> &Arc<dyn ClusterProvider> {
        &self.provider
    }

    /// The provider as its own type, `None` if it is another: for what only one provider
    /// has, such as the PostgreSQL pool.
    ///
    /// ```no_run
    /// use lock_provider_postgres::PostgresLockProvider;
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let opened = lock_providers::open("postgres://app@db.internal/app").await?;
    /// let postgres: &PostgresLockProvider = opened.downcast_ref().expect("a postgres:// URL");
    /// println!("{} connections at most", postgres.pool().status().max_size);
    /// # Ok(()) }
    /// ```
    pub fn downcast_ref<P: LockProvider>(&self) -> Option<&P> {
        self.concrete.downcast_ref()
    }

    /// The provider alone, for a caller that keeps it to the end of the process: what
    /// [`close`](Self::close) would have ended cleanly is then just dropped.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let provider = lock_providers::open("postgres://app@db.internal/app").await?.into_provider();
    /// # Ok(()) }
    /// ```
    pub fn into_provider(self) -> Arc<dyn ClusterProvider> {
        self.provider
    }

    /// Drops the provider and ends its connections cleanly (a MySQL pool is disconnected,
    /// not dropped). A failing goodbye is ignored: the work is done already.
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let opened = lock_providers::open("mysql://root@127.0.0.1:3306/test").await?;
    /// opened.close().await;
    /// # Ok(()) }
    /// ```
    pub async fn close(self) {
        let OpenedProvider {
            provider,
            concrete,
            closing,
        } = self;
        drop((provider, concrete));
        if let Some(goodbye) = closing {
            goodbye.await;
        }
    }
}

impl fmt::Debug for OpenedProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenedProvider")
            .field("provider", &self.provider.describe())
            .field("closes_explicitly", &self.closing.is_some())
            .finish()
    }
}
