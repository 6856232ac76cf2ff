//! The SQL text of every lock statement, built once per table and column naming.
//!
//! Every time is SQLite's own clock: `strftime('%Y-%m-%d %H:%M:%f','now')` gives UTC wall time
//! as `YYYY-MM-DD HH:MM:SS.SSS`, a fixed-width text that sorts chronologically, so plain text
//! comparisons order it correctly at millisecond precision. Durations travel as integer
//! milliseconds, rounded by the kit's rule (`lock_core::kit::lease_millis`: up, and a lease at
//! least 1 ms), and are added in SQL with a `+N.NNN seconds` modifier (SQLite keeps its
//! internal clock in whole milliseconds, so no float error reaches the stored value). SQLite
//! evaluates `'now'` once per statement step, so every `now` inside one statement is the same
//! instant.

use chrono::{DateTime, Datelike, Utc};
use lock_core::LockError;

use crate::table::Table;

/// The stored timestamp format (UTC), for `strftime` and for slots written by this crate.
const FORMAT: &str = "%Y-%m-%d %H:%M:%f";

/// SQLite's current time, as stored.
fn now() -> String {
    format!("strftime('{FORMAT}', 'now')")
}

/// `base` plus the milliseconds bound to parameter `param`, as stored.
fn plus_millis(base: &str, param: u8) -> String {
    format!("strftime('{FORMAT}', {base}, '+' || (?{param} / 1000.0) || ' seconds')")
}

/// The statements for one lock table.
#[derive(Debug)]
pub(crate) struct Statements {
    /// The table the statements run on, with its DDL.
    pub(crate) table: Table,
    /// `?1` name, `?2` locked_by, `?3` at_most ms, `?4` slot or NULL, `?5` the slot's greatest
    /// lead over now (ms); returns the new fence when granted, no row when refused (and then
    /// nothing was written).
    pub(crate) acquire: String,
    /// `?1` name, `?2` slot or NULL; returns locked_by, lock_until, last_fire and the reason
    /// (1 held, 2 slot already run, 0 neither any more).
    pub(crate) refusal: String,
    /// `?1` name, `?2` locked_by, `?3` fence, `?4` at_least ms.
    pub(crate) release: String,
    /// `?1` name, `?2` locked_by, `?3` fence, `?4` at_most ms.
    pub(crate) extend: String,
    /// Every row, sorted by name, with `held`.
    pub(crate) list: String,
    /// `?1` name: the row with `held`.
    pub(crate) select_one: String,
    /// `?1` name: ends the lease now.
    pub(crate) force_unlock: String,
    /// `?1` name: `last_fire = min(last_fire, now)`.
    pub(crate) reset_slot: String,
}

impl Statements {
    /// Builds every statement for `table`.
    pub(crate) fn new(table: Table) -> Self {
        let t = &table.resolved.qualified;
        let c = &table.resolved.columns;
        let (name, lock_until, locked_at) = (&c.name, &c.lock_until, &c.locked_at);
        let (locked_by, fence, last_fire) = (&c.locked_by, &c.fence, &c.last_fire);
        let now = now();

        // One statement decides and writes: it inserts a missing row (fence 1), or takes a
        // free row whose last slot is older than this one. When the WHERE fails SQLite changes
        // no row, so a losing acquire dirties no page and its commit writes nothing. A slot
        // more than the lead ahead of now proposes no row at all (the SELECT's WHERE), so it
        // neither inserts nor updates.
        let acquire = format!(
            "INSERT INTO {t} AS cur ({name}, {lock_until}, {locked_at}, {locked_by}, {fence}, {last_fire}) \
             SELECT ?1, {until}, {now}, ?2, 1, ?4 WHERE ?4 IS NULL OR ?4 <= {limit} \
             ON CONFLICT ({name}) DO UPDATE SET \
             {lock_until} = excluded.{lock_until}, \
             {locked_at} = excluded.{locked_at}, \
             {locked_by} = excluded.{locked_by}, \
             {fence} = cur.{fence} + 1, \
             {last_fire} = coalesce(excluded.{last_fire}, cur.{last_fire}) \
             WHERE cur.{lock_until} <= excluded.{locked_at} \
             AND (excluded.{last_fire} IS NULL OR cur.{last_fire} IS NULL \
             OR cur.{last_fire} < excluded.{last_fire}) \
             RETURNING {fence}",
            until = plus_millis("'now'", 3),
            limit = plus_millis("'now'", 5),
        );
        let refusal = format!(
            "SELECT {locked_by}, {lock_until}, {last_fire}, \
             CASE WHEN {lock_until} > {now} THEN 1 \
             WHEN ?2 IS NOT NULL AND {last_fire} >= ?2 THEN 2 ELSE 0 END \
             FROM {t} WHERE {name} = ?1"
        );
        let release = format!(
            "UPDATE {t} SET {lock_until} = max({now}, coalesce({hold}, {now})) \
             WHERE {name} = ?1 AND {locked_by} = ?2 AND {fence} = ?3",
            hold = plus_millis(&locked_at.sql, 4),
        );
        let extend = format!(
            "UPDATE {t} SET {lock_until} = {until} \
             WHERE {name} = ?1 AND {locked_by} = ?2 AND {fence} = ?3 AND {lock_until} > {now}",
            until = plus_millis("'now'", 4),
        );
        let record_columns = format!(
            "{name}, {lock_until}, {locked_at}, {locked_by}, {fence}, {last_fire}, {lock_until} > {now}"
        );
        let list = format!("SELECT {record_columns} FROM {t} ORDER BY {name}");
        let select_one = format!("SELECT {record_columns} FROM {t} WHERE {name} = ?1");
        let force_unlock = format!("UPDATE {t} SET {lock_until} = {now} WHERE {name} = ?1");
        // min() with a NULL is NULL: a lock that never ran a slot stays so.
        let reset_slot =
            format!("UPDATE {t} SET {last_fire} = min({last_fire}, {now}) WHERE {name} = ?1");

        Statements {
            table,
            acquire,
            refusal,
            release,
            extend,
            list,
            select_one,
            force_unlock,
            reset_slot,
        }
    }
}

/// A slot as stored in `last_fire`: the same fixed-width text as SQLite's own times, so text
/// comparison orders slots. Years outside 0000-9999 would break that width and are refused.
pub(crate) fn slot_text(slot: DateTime<Utc>) -> Result<String, LockError> {
    if !(0..=9999).contains(&slot.year()) {
        return Err(LockError::InvalidConfiguration(format!(
            "fire slot {slot} is outside the years 0000-9999 that SQLite's date functions support"
        )));
    }
    Ok(slot.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn slots_use_the_stored_format() {
        let at = Utc.with_ymd_and_hms(2026, 3, 9, 1, 2, 3).unwrap()
            + chrono::TimeDelta::milliseconds(45);
        assert_eq!(slot_text(at).unwrap(), "2026-03-09 01:02:03.045");
        let far = Utc.with_ymd_and_hms(10_000, 1, 1, 0, 0, 0).unwrap();
        assert!(slot_text(far).is_err());
    }
}
