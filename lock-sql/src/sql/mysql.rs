//! MySQL and MariaDB: the lock table's DDL and shape checks, the SQL of every lock statement with
//! the order of its `?` parameters, and the decoding of what the server answers, for any driver
//! (mysql_async, sqlx).
//!
//! Every time is the server's `UTC_TIMESTAMP(3)` (evaluated once per statement, so all its uses
//! in one statement agree); durations travel as microsecond intervals holding whole
//! milliseconds, rounded by the kit's rule (`crate::lease_millis`), so that
//! `now + interval` stays on the columns' millisecond grid and no lease is shorter than asked. The shapes follow
//! ShedLock's `MySqlServerTimeStatementsSource`, with two changes:
//!
//! - **Acquire is one statement**, `INSERT ... ON DUPLICATE KEY UPDATE`, instead of ShedLock's
//!   `INSERT IGNORE` followed by an `UPDATE`. It inserts a missing row (so a row deleted by hand
//!   is recreated at the next fire), takes an expired one, and leaves a held one untouched: a
//!   losing acquire changes no value, so InnoDB writes no redo for it and nothing is flushed.
//!   And it hides no error the way `INSERT IGNORE` does.
//! - **The outcome travels in the OK packet's `last_insert_id`**, set with `LAST_INSERT_ID(expr)`
//!   (the documented way to return a value from an `UPDATE`, e.g. a sequence counter). The first
//!   assignment of the update clause decides once, on the row's old values, and records the
//!   decision there: the new fence for a grant, or a refusal code that carries the reason and the
//!   holder's `lock_until`. The later assignments read the decision back with `LAST_INSERT_ID()`
//!   instead of re-testing columns, because MySQL evaluates `SET` assignments left to right (an
//!   assignment sees the columns already changed) while MariaDB's `SIMULTANEOUS_ASSIGNMENT` mode
//!   makes them see the old values; reading the decision works under both. It also makes the
//!   result independent of `CLIENT_FOUND_ROWS`, which changes what affected-row counts mean.
//! - **A slot too far ahead of the server's now is refused** (`SlotInFuture`, with the server's
//!   now in the code): the update clause decides so like any refusal, and the inserted row of a
//!   new name is then written free and without `last_fire`, so no future slot is ever stored.
//! - **A request decided after its `give_up_at` is refused** (`TooLate`), the same way: a
//!   new name's row is inserted free, without `last_fire`. The decision is taken on
//!   [`DECIDED_AT`], the server's clock when the row is decided, not when the statement began.
//! - **A refusal of a held lock says whether this slot already ran, and whether the holder is
//!   the requester** (a bit of the code each): the packet has no room for the row's `last_fire`
//!   and `locked_by` next to its `lock_until`, so when `last_fire` is at or after the request's
//!   slot the refusal carries that slot as its `last_fire`, the one fact a fire that asked
//!   ahead needs (its slot ran: do not ask again at the slot), and when the lock is held in
//!   the requester's own name it carries that name (the executor then reads the row back: a
//!   lost grant of its own is adopted, an orphan released).
//! - **A batch evaluates the same decision** over many rows at once (`batch.rs`): the
//!   expression is built once from named operands (`decision.rs`), `?` parameters here.

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::sql::SqlValue;
use crate::sql::mysql::decision::Operands;
use crate::{
    ColumnNames, IdentifierStyle, LockTableConfig, MAX_INSTANCE_ID_LEN, ResolvedTable,
    at_least_millis, fence_to_sql, lease_millis,
};
use lock_core::{AcquireOutcome, FireSlot, Lease, LockError, LockRequest, Refusal, RefusalReason};

/// `last_insert_id` at or above this is a refusal; below it, a fence. 2^62: no fence gets there.
const REFUSED: u64 = 1 << 62;
/// Set in a refusal when the lease was free but the slot had already run.
const SLOT_ALREADY_RUN: u64 = 1 << 61;
/// Set in a refusal when the slot was too far ahead of the server's now.
const SLOT_IN_FUTURE: u64 = 1 << 60;
/// Set in a refusal decided after the request's `give_up_at`.
const TOO_LATE: u64 = 1 << 59;
/// Set in a refusal of a held lock whose `last_fire` is at or after the request's slot.
const HELD_SLOT_RAN: u64 = 1 << 58;
/// Set in a refusal of a lock held in the requester's own name (`locked_by` is its instance
/// id), so that the executor can tell its own lost or orphaned grant from another's lease.
const HELD_BY_REQUESTER: u64 = 1 << 57;
/// Set in a refusal because the row the table found for the name has another name: a table
/// made by ShedLock's DDL (`name VARCHAR` with a collation that ignores case and trailing
/// spaces) keeps `report` in the row of `Report`. The row is left as it is: lock names
/// compare byte for byte.
const OTHER_NAME: u64 = 1 << 56;
/// The low bits of a refusal: the time (of `lock_until` when held, of `last_fire` when the slot
/// already ran, the server's now when the slot was too far ahead or it was too late) as
/// `TO_SECONDS`, whole
/// seconds since year 0. Whole seconds are enough for the
/// `skipped` event, and this integer function is much cheaper on the server than a conversion
/// that keeps the milliseconds (`DECIMAL` arithmetic, measured here at a quarter of a losing
/// acquire's server time); it reads a `DATETIME`'s stored UTC wall time whatever the session
/// zone.
const SECONDS_MASK: u64 = OTHER_NAME - 1;

/// The server's now on the columns' millisecond grid, UTC: evaluated once per statement, so
/// all its uses in one statement agree.
pub const NOW: &str = "UTC_TIMESTAMP(3)";

/// The server's clock when it is read, UTC: what an acquire compares the request's
/// `give_up_at` with. `UTC_TIMESTAMP()` and `NOW()` are the time the statement began, the same
/// in all its uses, also after the statement waited for a row lock (or for a stalled server);
/// `SYSDATE()` is the time at which it is evaluated, in the session's zone, so the session's
/// offset from UTC (`NOW(6)` against `UTC_TIMESTAMP(6)`, both the statement's start, so their
/// difference is the offset exactly) is taken off. The update clause of an `INSERT ... ON
/// DUPLICATE KEY UPDATE` is evaluated with the row locked, after any wait for it. (A server
/// started with `--sysdate-is-now` makes `SYSDATE()` the statement's start again: a statement
/// that waited is then decided by that earlier time.)
pub const DECIDED_AT: &str =
    "(SYSDATE(6) - INTERVAL TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), NOW(6)) MICROSECOND)";

/// The server's now with microseconds, for the scheduler's clock estimate: the same clock as
/// [`NOW`], finer than the columns, so that the estimate's error is the round trip's alone.
pub const NOW_PRECISE: &str = "SELECT UTC_TIMESTAMP(6)";

/// The server errors of a conditional `ALTER` or `CREATE INDEX` of the operations tables'
/// DDL whose object another instance's `ensure_schema()` added between the catalog check and
/// the statement: `ER_DUP_FIELDNAME` (1060) and `ER_DUP_KEYNAME` (1061). What is wanted is
/// there; a driver ignores them for those statements.
///
/// ```
/// assert!(lock_sql::sql::mysql::ADDED_BY_ANOTHER.contains(&1061));
/// ```
pub const ADDED_BY_ANOTHER: [u16; 2] = [1060, 1061];

/// The statements for one table of one shape, with the parameters each takes in order.
///
/// ```
/// use lock_sql::LockTableConfig;
/// use lock_sql::sql::mysql::{Shape, Statements, Table};
///
/// let table = Table::new(&LockTableConfig::default())?;
/// let statements = Statements::new(&table, Shape { extended: true, zone_sensitive: false });
/// assert!(statements.list().starts_with("SELECT `name`"));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Debug)]
pub struct Statements {
    shape: Shape,
    prepared_at: Instant,
    acquire: String,
    release: String,
    extend: String,
    list: String,
    read: String,
    select_for_unlock: String,
    unlock: String,
    reset_slot: String,
    batch: batch::BatchSql,
}

impl Statements {
    /// The statements for `table` in the shape `shape`.
    pub fn new(table: &Table, shape: Shape) -> Self {
        let t = table.quoted();
        let name = table.col(Column::Name);
        let lock_until = table.col(Column::LockUntil);
        let locked_at = table.col(Column::LockedAt);
        let locked_by = table.col(Column::LockedBy);
        let fence = table.col(Column::Fence);
        let last_fire = table.col(Column::LastFire);
        let granted = format!("LAST_INSERT_ID() < {REFUSED}");
        // The request's values are parameters, the clock is the statement's.
        let decision = Operands {
            name: &name,
            lock_until: &lock_until,
            locked_by: &locked_by,
            fence: &fence,
            last_fire: &last_fire,
            requested_name: "?",
            requester: "?",
            slot: "?",
            lead: "?",
            give_up_at: "?",
            now: NOW,
            decided_at: DECIDED_AT,
        };
        let late = decision.late();
        let too_late = decision.too_late();
        let acquire = if shape.extended {
            // Params: name, give_up_at (x2), slot, lead, at_most, locked_by, slot (the inserted
            // row); then name, give_up_at (x2), slot (x3), lead, slot, lead, slot (x2), locked_by
            // (x2), slot, at_most (the update clause).
            let ahead = decision.ahead();
            let in_future = decision.in_future();
            // A missing row is inserted free, with no last_fire, when the slot is too far
            // ahead: the decision is recorded with LAST_INSERT_ID (0 for a grant) by the first
            // value and read back by the later ones. On the update path the update clause's
            // first assignment overwrites it.
            let inserted = "LAST_INSERT_ID() = 0";
            format!(
                "INSERT INTO {t} ({name}, {lock_until}, {locked_at}, {locked_by}, {fence}, {last_fire}) \
                 VALUES (?, IF(LAST_INSERT_ID(IF({late}, {too_late}, IF({ahead}, {in_future}, 0))) = 0, {NOW} + INTERVAL ? MICROSECOND, {NOW}), \
                 {NOW}, ?, IF({inserted}, 1, 0), IF({inserted}, ?, NULL)) \
                 ON DUPLICATE KEY UPDATE \
                 {locked_by} = IF(LAST_INSERT_ID({}) < {REFUSED}, ?, {locked_by}), \
                 {locked_at} = IF({granted}, {NOW}, {locked_at}), \
                 {fence} = IF({granted}, LAST_INSERT_ID(), {fence}), \
                 {last_fire} = IF({granted}, COALESCE(?, {last_fire}), {last_fire}), \
                 {lock_until} = IF({granted}, {NOW} + INTERVAL ? MICROSECOND, {lock_until})",
                decision.code_extended()
            )
        } else {
            // ShedLock's own four columns. Params: name, give_up_at (x2), at_most, locked_by,
            // name, give_up_at (x2), locked_by (x2), at_most. A new name too late is inserted
            // free.
            format!(
                "INSERT INTO {t} ({name}, {lock_until}, {locked_at}, {locked_by}) \
                 VALUES (?, IF(LAST_INSERT_ID(IF({late}, {too_late}, 0)) = 0, {NOW} + INTERVAL ? MICROSECOND, {NOW}), {NOW}, ?) \
                 ON DUPLICATE KEY UPDATE \
                 {locked_by} = IF(LAST_INSERT_ID({}) < {REFUSED}, ?, {locked_by}), \
                 {locked_at} = IF({granted}, {NOW}, {locked_at}), \
                 {lock_until} = IF({granted}, {NOW} + INTERVAL ? MICROSECOND, {lock_until})",
                decision.code_shedlock()
            )
        };

        // Release and extend report a matched row through LAST_INSERT_ID(1): without
        // CLIENT_FOUND_ROWS the affected-row count says 0 when the new lock_until happens to
        // equal the old one (say lock_at_least_for = lock_at_most_for), which would read as
        // "the lease was lost".
        let owner = if shape.extended {
            format!("{name} = ? AND {locked_by} = ? AND {fence} = ?")
        } else {
            format!("{name} = ? AND {locked_by} = ?")
        };
        let at_least_end = format!("{locked_at} + INTERVAL ? MICROSECOND");
        let release = format!(
            "UPDATE {t} SET {lock_until} = IF(LAST_INSERT_ID(1), \
             IF({at_least_end} > {NOW}, {at_least_end}, {NOW}), NULL) WHERE {owner}"
        );
        let extend = format!(
            "UPDATE {t} SET {lock_until} = IF(LAST_INSERT_ID(1), {NOW} + INTERVAL ? MICROSECOND, NULL) \
             WHERE {owner} AND {lock_until} > {NOW}"
        );

        let (fence_or_zero, last_fire_or_null) = if shape.extended {
            (fence.clone(), last_fire.clone())
        } else {
            ("0".to_owned(), "NULL".to_owned())
        };
        let record = format!(
            "{name}, {lock_until}, {locked_at}, {locked_by}, {fence_or_zero}, {last_fire_or_null}, \
             {lock_until} > {NOW}"
        );
        let list = format!("SELECT {record} FROM {t}");
        let read = format!("SELECT {record} FROM {t} WHERE {name} = ?");
        let select_for_unlock = format!("SELECT {record} FROM {t} WHERE {name} = ? FOR UPDATE");
        let unlock = format!("UPDATE {t} SET {lock_until} = {NOW} WHERE {name} = ?");
        // LEAST keeps a past last_fire and brings a future one back to now (NULL stays NULL:
        // LEAST with a NULL is NULL). Without the column there is nothing to reset.
        let reset_slot = if shape.extended {
            format!("UPDATE {t} SET {last_fire} = LEAST({last_fire}, {NOW}) WHERE {name} = ?")
        } else {
            format!("UPDATE {t} SET {name} = {name} WHERE {name} = ?")
        };

        Statements {
            shape,
            prepared_at: Instant::now(),
            acquire,
            release,
            extend,
            list,
            read,
            select_for_unlock,
            unlock,
            reset_slot,
            batch: batch::BatchSql::new(
                shape.extended,
                t.clone(),
                [name, lock_until, locked_at, locked_by, fence, last_fire],
            ),
        }
    }

    /// The shape of the table these statements were built for.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// When the table was inspected for these statements.
    pub fn prepared_at(&self) -> Instant {
        self.prepared_at
    }

    /// The acquire statement (`INSERT ... ON DUPLICATE KEY UPDATE`) and its parameters; its
    /// outcome is in the OK packet, read by [`acquire_outcome`](Self::acquire_outcome).
    pub fn acquire(&self, request: &LockRequest) -> (&str, Vec<SqlValue>) {
        let name = SqlValue::Text(request.name.to_string());
        let at_most = micros(lease_millis(request.lock_at_most_for));
        let by = SqlValue::Text(request.locked_by.to_string());
        let give_up_at = SqlValue::Timestamp(request.give_up_at.map(|at| at.naive_utc()));
        let params = if self.shape.extended {
            let slot = SqlValue::Timestamp(request.slot.map(|s| s.instant().naive_utc()));
            let lead = micros(lease_millis(request.max_slot_lead));
            vec![
                name.clone(),
                give_up_at.clone(),
                give_up_at.clone(),
                slot.clone(),
                lead.clone(),
                at_most.clone(),
                by.clone(),
                slot.clone(),
                name.clone(),
                give_up_at.clone(),
                give_up_at,
                slot.clone(),
                slot.clone(),
                slot.clone(),
                lead.clone(),
                slot.clone(),
                lead,
                slot.clone(),
                slot.clone(),
                by.clone(),
                by,
                slot,
                at_most,
            ]
        } else {
            vec![
                name.clone(),
                give_up_at.clone(),
                give_up_at.clone(),
                at_most.clone(),
                by.clone(),
                name,
                give_up_at.clone(),
                give_up_at,
                by.clone(),
                by,
                at_most,
            ]
        };
        (&self.acquire, params)
    }

    /// The release statement and its parameters: `last_insert_id` 1 when the lease was still
    /// the holder's.
    pub fn release(&self, lease: &Lease, at_least: Duration) -> (&str, Vec<SqlValue>) {
        let at_least = micros(at_least_millis(at_least));
        let mut params = vec![at_least.clone(), at_least];
        params.extend(self.owner(lease));
        (&self.release, params)
    }

    /// The extend statement and its parameters: `last_insert_id` 1 when the lease was extended.
    pub fn extend(&self, lease: &Lease, at_most: Duration) -> (&str, Vec<SqlValue>) {
        let mut params = vec![micros(lease_millis(at_most))];
        params.extend(self.owner(lease));
        (&self.extend, params)
    }

    /// Every row as a [record](Self::select_for_unlock) (no parameter), in no particular order.
    pub fn list(&self) -> &str {
        &self.list
    }

    /// The rows whose name the table's collation finds equal to the parameter, as
    /// [`list`](Self::list) reads them: a lookup on the primary key. Under a case-insensitive
    /// collation that can be a name differing in case; the caller keeps the exact one.
    pub fn read(&self) -> &str {
        &self.read
    }

    /// One row, locked (`FOR UPDATE`), parameter the name. Columns: name, lock_until, locked_at,
    /// locked_by, fence (BIGINT), last_fire (nullable), held (0 or 1).
    pub fn select_for_unlock(&self) -> &str {
        &self.select_for_unlock
    }

    /// Ends the lease of the row `?` (the name) now; run after
    /// [`select_for_unlock`](Self::select_for_unlock) in the same transaction.
    pub fn unlock(&self) -> &str {
        &self.unlock
    }

    /// Brings a future `last_fire` of the row `?` (the name) back to now; run after
    /// [`select_for_unlock`](Self::select_for_unlock) in the same transaction.
    pub fn reset_slot(&self) -> &str {
        &self.reset_slot
    }

    fn owner(&self, lease: &Lease) -> Vec<SqlValue> {
        let mut params = vec![
            SqlValue::Text(lease.name().to_owned()),
            SqlValue::Text(lease.locked_by().to_owned()),
        ];
        if self.shape.extended {
            params.push(SqlValue::Int(fence_to_sql(lease)));
        }
        params
    }

    /// Reads an acquire's outcome from the OK packet. `None` when the packet is one no
    /// statement of ours can produce; the caller turns that into an error rather than risk
    /// running a body unlocked.
    pub fn acquire_outcome(
        &self,
        request: &LockRequest,
        last_insert_id: u64,
        affected_rows: u64,
    ) -> Option<AcquireOutcome> {
        // The update clause always calls LAST_INSERT_ID(expr); only an insert leaves it unset.
        if last_insert_id == 0 {
            let fence = u64::from(self.shape.extended);
            return (affected_rows == 1)
                .then(|| AcquireOutcome::Acquired(Lease::granted(request, fence)));
        }
        self.outcome_of_code(request, last_insert_id)
    }

    /// The outcome a decision code (not 0: the insert path's) stands for: below [`REFUSED`]
    /// the new fence, at or above it a refusal.
    fn outcome_of_code(&self, request: &LockRequest, code: u64) -> Option<AcquireOutcome> {
        if code < REFUSED {
            let fence = if self.shape.extended { code } else { 0 };
            return Some(AcquireOutcome::Acquired(Lease::granted(request, fence)));
        }
        let code = code - REFUSED;
        let at = from_to_seconds(code & SECONDS_MASK);
        Some(AcquireOutcome::Refused(if code & OTHER_NAME != 0 {
            tracing::warn!(
                lock = &*request.name,
                "refused: the lock table keeps this name in the row of another name that \
                 compares equal under the name column's collation (a table made by ShedLock's \
                 DDL ignores case and trailing spaces); the other lock's row is left as it is. \
                 Make the column compare bytes: ALTER TABLE ... MODIFY name VARBINARY(64) NOT NULL"
            );
            Refusal::new(RefusalReason::Unknown)
        } else if code & TOO_LATE != 0 {
            Refusal::too_late(at?)
        } else if code & SLOT_IN_FUTURE != 0 {
            // The server's now in whole seconds: the warning's "ahead by" is as fine as that.
            Refusal::slot_in_future(at?)
        } else if code & SLOT_ALREADY_RUN != 0 {
            Refusal {
                last_fire: at,
                ..Refusal::new(RefusalReason::SlotAlreadyRun)
            }
        } else {
            Refusal {
                lock_until: at,
                locked_by: (code & HELD_BY_REQUESTER != 0).then(|| request.locked_by.to_string()),
                // This slot (or a later one) ran: the row's last_fire is at least the slot.
                last_fire: request
                    .slot
                    .filter(|_| code & HELD_SLOT_RAN != 0)
                    .map(FireSlot::instant),
                ..Refusal::new(RefusalReason::Held)
            }
        }))
    }
}

/// `TO_SECONDS(expr)` (see [`SECONDS_MASK`]).
fn to_seconds(expr: &str) -> String {
    format!("TO_SECONDS({expr})")
}

/// `TO_SECONDS('1970-01-01 00:00:00')`.
const UNIX_EPOCH_TO_SECONDS: u64 = 62_167_219_200;

/// The instant of a `TO_SECONDS` value; `None` when it is not one.
fn from_to_seconds(seconds: u64) -> Option<DateTime<Utc>> {
    let unix = i64::try_from(seconds).ok()? - UNIX_EPOCH_TO_SECONDS as i64;
    DateTime::from_timestamp(unix, 0)
}

/// Whole milliseconds (already rounded by the kit) as the `MICROSECOND` interval the
/// statements add.
fn micros(millis: i64) -> SqlValue {
    SqlValue::Int(millis * 1000)
}

mod batch;
mod decision;
mod history;
mod literal;
mod table;
pub use batch::UnexpectedBatchAnswer;
pub use history::{HistoryBatchStatements, MAX_HISTORY_TEXT};
pub use table::{
    COLUMNS_QUERY, Column, ColumnInfo, Shape, Table, json_names, names_sharing_a_row_query,
};

#[cfg(test)]
mod statement_tests;
