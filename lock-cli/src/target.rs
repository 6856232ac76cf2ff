//! The lock database `--url` names, opened through the `lock-providers` registry, with
//! lockctl's wording for what goes wrong.

use lock_providers::{LockDatabase, OpenError, OpenOptions, OpenedProvider};

use crate::Failure;

/// Checks `--url` before anything connects, so that a typing mistake is a usage error (exit
/// code 2) and never a connection attempt to somewhere unintended.
pub(crate) fn parse(url: &str) -> Result<LockDatabase, Failure> {
    LockDatabase::parse(url).map_err(|e| Failure::usage(format!("--url {e}")))
}

/// Connects and points a provider at `table` (already validated). Never creates a SQLite
/// file: an inspection tool must not leave an empty database behind a mistyped path.
pub(crate) async fn open(database: &LockDatabase, table: &str) -> Result<OpenedProvider, Failure> {
    let options = OpenOptions::new().table(table).create_if_missing(false);
    database.open(&options).await.map_err(|e| match e {
        OpenError::Unreachable { context, source } => Failure::runtime(context, source),
        OpenError::Missing { database } => Failure::runtime_message(format!(
            "{database} does not exist (lockctl never creates one; check the path in --url)"
        )),
        // Only fails on a name `check_table` let through but the backend refuses (e.g. a
        // schema other than `main` in SQLite): still a usage error.
        OpenError::Table(e) => Failure::usage(format!("--table: {e}")),
        other => Failure::runtime_message(other.to_string()),
    })
}
