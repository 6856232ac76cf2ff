//! The statements the provider runs: their SQL text is the provider kit's
//! ([`lock_sql::sql::postgres`], shared with every other PostgreSQL driver's provider);
//! what is tokio-postgres's is the parameter types each is prepared with.

use tokio_postgres::types::Type;

/// The exact SQL the provider runs on its table, for operators (to `EXPLAIN` it, or to grant
/// precisely what it needs) and for benchmarks that issue the same statements by hand.
///
/// ```no_run
/// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
/// let statements = provider.statements().await?;
/// println!("{}\n{}", statements.acquire, statements.release);
/// # Ok(()) }
/// ```
pub use lock_sql::sql::postgres::LockStatements;

/// The statements for one table in one shape.
pub(crate) type Statements = LockStatements;

/// `$1` name, `$2` lock_at_most_for (ms), `$3` locked_by, `$4` slot (NULL for none), `$5` the
/// slot's greatest lead over the database's now (ms), `$6` give up at (NULL for none).
pub(crate) const ACQUIRE_TYPES: &[Type] = &[
    Type::TEXT,
    Type::INT8,
    Type::TEXT,
    Type::TIMESTAMP,
    Type::INT8,
    Type::TIMESTAMP,
];
/// `$1` name, `$2` locked_by, `$3` fence, `$4` lock_at_least_for (ms).
pub(crate) const RELEASE_TYPES: &[Type] = &[Type::TEXT, Type::TEXT, Type::INT8, Type::INT8];
/// `$1` name, `$2` locked_by, `$3` fence, `$4` lock_at_most_for (ms).
pub(crate) const EXTEND_TYPES: &[Type] = &[Type::TEXT, Type::TEXT, Type::INT8, Type::INT8];
/// `$1` name.
pub(crate) const UNLOCK_TYPES: &[Type] = &[Type::TEXT];
/// The batch statements: the arrays of `ACQUIRE_TYPES`.
pub(crate) const ACQUIRE_MANY_TYPES: &[Type] = &[
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::TEXT_ARRAY,
    Type::TIMESTAMP_ARRAY,
    Type::INT8_ARRAY,
    Type::TIMESTAMP_ARRAY,
];
/// The arrays of `RELEASE_TYPES`.
pub(crate) const RELEASE_MANY_TYPES: &[Type] = &[
    Type::TEXT_ARRAY,
    Type::TEXT_ARRAY,
    Type::INT8_ARRAY,
    Type::INT8_ARRAY,
];
