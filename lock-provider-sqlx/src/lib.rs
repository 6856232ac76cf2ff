#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

#[cfg(not(any(feature = "postgres", feature = "mysql", feature = "sqlite")))]
compile_error!(
    "lock-provider-sqlx needs a backend: enable the `postgres`, `mysql` or `sqlite` feature"
);

#[cfg(feature = "mysql")]
mod mysql;
mod operations;
#[cfg(feature = "postgres")]
mod postgres;
mod provider;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(any(feature = "postgres", feature = "mysql"))]
mod unreachable;

pub use provider::SqlxLockProvider;

/// Which table and columns the provider uses: the kit's [`LockTableConfig`], the same config
/// type as every other SQL provider's.
///
/// ```
/// use lock_provider_sqlx::LockTableConfig;
/// assert!(LockTableConfig::default().with_table("ops.shedlock").validate().is_ok());
/// ```
pub use lock_sql::{ColumnNames, LockTableConfig};

/// What [`SqlxLockProvider::check_schema`] found: every column (exclusion, fencing,
/// once-per-slot), or ShedLock's four only (exclusion, until `ensure_schema()`).
///
/// ```no_run
/// # async fn run(provider: lock_provider_sqlx::SqlxLockProvider) -> Result<(), lock_core::LockError> {
/// use lock_provider_sqlx::TableShape;
/// if provider.check_schema().await? == TableShape::ShedLockOnly {
///     provider.ensure_schema().await?;
/// }
/// # Ok(()) }
/// ```
pub use lock_sql::sql::postgres::TableShape;

/// The sqlx crate, re-exported so that the pool types are the provider's own.
///
/// ```no_run
/// # #[cfg(feature = "postgres")]
/// # fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use lock_provider_sqlx::{SqlxLockProvider, sqlx::postgres::PgPoolOptions};
///
/// let pool = PgPoolOptions::new().max_connections(8).connect_lazy("postgres://app@localhost/app")?;
/// let provider = SqlxLockProvider::postgres(pool);
/// # Ok(()) }
/// ```
pub use sqlx;
