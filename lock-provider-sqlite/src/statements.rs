//! The statements the provider runs: their SQL text is the provider kit's
//! ([`lock_sql::sql::sqlite`], shared with every other SQLite driver's provider).

use chrono::{DateTime, Utc};
use lock_core::{Refusal, RefusalReason};
use rusqlite::{Connection, OptionalExtension, params};

pub(crate) use lock_sql::sql::sqlite::{Statements, instant_text, slot_text};

/// The row of `name` as a refusal: `Held` while `lock_until > now`, `SlotAlreadyRun` when
/// `slot` is not after `last_fire`, `Unknown` when neither (the lease looks free). `None` when
/// there is no row.
pub(crate) fn read_refusal(
    connection: &Connection,
    sql: &Statements,
    name: &str,
    slot: Option<&str>,
) -> rusqlite::Result<Option<Refusal>> {
    connection
        .prepare_cached(&sql.refusal)?
        .query_row(params![name, slot], |row| {
            let reason = match row.get::<_, i64>(3)? {
                1 => RefusalReason::Held,
                2 => RefusalReason::SlotAlreadyRun,
                _ => RefusalReason::Unknown,
            };
            Ok(Refusal {
                reason,
                locked_by: row.get(0)?,
                lock_until: row.get::<_, Option<DateTime<Utc>>>(1)?,
                last_fire: row.get(2)?,
                database_now: None,
            })
        })
        .optional()
}
