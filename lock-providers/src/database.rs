//! What the registry and each provider module share: the parsed URL a module returns
//! ([`Database`]) and the error of a URL it refuses ([`UrlError`]). The modules depend on this
//! room, and the registry on the modules, so no import runs back.

use std::fmt;

use async_trait::async_trait;
use lock_core::LockError;

use crate::{OpenError, OpenOptions, OpenedProvider};

/// What a provider module implements for the registry: a parsed URL that describes itself and
/// opens the provider.
#[async_trait]
pub(crate) trait Database: fmt::Display + fmt::Debug + Send + Sync {
    /// A short name for the provider: `postgres`, `mysql`, `sqlite`, `redis`.
    fn kind(&self) -> &'static str;

    /// Checks, without connecting, a name `open` would point the provider at: by default
    /// the SQL rule, `table` or `schema.table` of plain identifiers; a provider whose "table"
    /// is something else (Redis: a key prefix) has its own rule.
    fn check_table(&self, table: &str) -> Result<(), LockError> {
        lock_sql::validate_table_name(table).map(drop)
    }

    /// Connects (or opens the file), points the provider at `options.table_name()` and, for
    /// `SchemaAction::Create`, calls `ensure_schema()`; the registry does the `Check`.
    async fn open(&self, options: &OpenOptions) -> Result<OpenedProvider, OpenError>;
}

/// A URL refused by [`LockDatabase::parse`](crate::LockDatabase::parse). The message never repeats the URL.
///
/// It reads as what is wrong with the URL, to follow the name of where the URL came from:
///
/// ```
/// let error = lock_providers::LockDatabase::parse("db.internal:5432").unwrap_err();
/// assert_eq!(
///     format!("--url {error}"),
///     "--url is not a URL (expected postgres://, postgresql://, mysql://, mariadb://, sqlite://, \
///      redis://, rediss://, sqlx+postgres://, sqlx+postgresql://, sqlx+mysql://, sqlx+mariadb:// \
///      or sqlx+sqlite://)"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct UrlError {
    reason: String,
}

impl UrlError {
    /// `reason` completes a sentence that starts with the URL's name (`--url is not ...`).
    pub(crate) fn new(reason: String) -> Self {
        UrlError { reason }
    }
}
