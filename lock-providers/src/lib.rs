#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod database;
mod deadline;
mod mysql;
mod open;
mod postgres;
mod redis;
mod registry;
mod sqlite;
mod sqlx;

pub use database::UrlError;
/// The lock table a URL opens unless told otherwise: ShedLock's `shedlock`.
pub use lock_sql::DEFAULT_TABLE;
pub use open::{OpenError, OpenOptions, OpenedProvider, SchemaAction};
pub use registry::LockDatabase;

/// Opens the provider `url`'s scheme names, on the default table (`shedlock`), left as it is.
/// For another table, a schema action, or a check of the URL before connecting, use
/// [`OpenOptions`] or [`LockDatabase`].
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let opened = lock_providers::open("postgresql://app@db.internal:5432/app").await?;
/// println!("{} locks in {}", opened.provider().list_locks().await?.len(), opened.provider().describe());
/// opened.close().await;
/// # Ok(()) }
/// ```
pub async fn open(url: &str) -> Result<OpenedProvider, OpenError> {
    OpenOptions::new().open(url).await
}
