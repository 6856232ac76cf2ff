//! The lock database `--url` names, opened through the `lock-providers` registry, with
//! lockctl's wording for what goes wrong.

use std::time::Duration;

use lock_providers::{LockDatabase, OpenError, OpenOptions, OpenedProvider};

use crate::Failure;

/// Checks `--url` before anything connects, so that a typing mistake is a usage error (exit
/// code 2) and never a connection attempt to somewhere unintended.
pub(crate) fn parse(url: &str) -> Result<LockDatabase, Failure> {
    LockDatabase::parse(url).map_err(|e| Failure::usage(format!("--url {e}")))
}

/// Connects and points a provider at `table` (already validated). Never creates a SQLite
/// file: an inspection tool must not leave an empty database behind a mistyped path.
/// `timeout` (`--timeout`) bounds the connect and, for every command but `serve`, each
/// operation, so that a database that stopped answering is an error and not a hang.
/// `serve` bounds each request instead (the dashboard's request timeout answers 503 and
/// drops the request's statements with it), so that a stalled database is a 503, not a 500.
pub(crate) async fn open(
    database: &LockDatabase,
    table: &str,
    timeout: Duration,
    serving: bool,
) -> Result<OpenedProvider, Failure> {
    let mut options = OpenOptions::new()
        .table(table)
        .create_if_missing(false)
        .connect_timeout(timeout);
    if !serving {
        options = options.operation_timeout(timeout);
    }
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
