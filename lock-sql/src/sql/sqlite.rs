//! SQLite: the lock table's DDL and the SQL text of every lock statement, built once per table
//! and column naming, for any driver (rusqlite, sqlx). Placeholders are `?N`.
//!
//! Every time is SQLite's own clock: `strftime('%Y-%m-%d %H:%M:%f','now')` gives UTC wall time
//! as `YYYY-MM-DD HH:MM:SS.SSS`, a fixed-width text that sorts chronologically, so plain text
//! comparisons order it correctly at millisecond precision. Durations travel as integer
//! milliseconds, rounded by the kit's rule (`crate::lease_millis`: up, and a lease at
//! least 1 ms), and are added in SQL with a `+N.NNN seconds` modifier (SQLite keeps its
//! internal clock in whole milliseconds, so no float error reaches the stored value). SQLite
//! evaluates `'now'` once per statement step, so every `now` inside one statement is the same
//! instant.

use chrono::{DateTime, Datelike, Utc};

use crate::{
    IdentifierStyle, LockTableConfig, MAX_INSTANCE_ID_LEN, MAX_LOCK_NAME_LEN, ResolvedTable,
    validate_table_name,
};
use lock_core::LockError;

/// `?1` table, `?2` schema: the table's column names.
pub const TABLE_COLUMNS: &str = "SELECT name FROM pragma_table_info(?1, ?2)";

/// The lock table, resolved once, with its DDL.
///
/// ```
/// use lock_sql::LockTableConfig;
/// use lock_sql::sql::sqlite::Table;
///
/// assert!(Table::new(&LockTableConfig::default().with_table("aux.locks")).is_err());
/// let table = Table::new(&LockTableConfig::default().with_table("main.locks"))?;
/// assert!(table.create_table.starts_with(r#"CREATE TABLE IF NOT EXISTS "main"."locks""#));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Debug)]
pub struct Table {
    /// Names validated and quoted by the kit.
    pub resolved: ResolvedTable,
    /// The schema the table lives in: always `main` (the only one the connection has); the
    /// `?2` of [`TABLE_COLUMNS`].
    pub schema: String,
    /// `CREATE TABLE IF NOT EXISTS` with every column.
    pub create_table: String,
    /// Adds `fence` to a ShedLock table.
    pub add_fence: String,
    /// Adds `last_fire` to a ShedLock table.
    pub add_last_fire: String,
}

impl Table {
    /// Validates the names (a schema other than `main` included) and builds the DDL.
    pub fn new(config: &LockTableConfig) -> Result<Self, LockError> {
        let table = &config.table;
        let (schema, _) = validate_table_name(table)?;
        // Another schema would be a database ATTACHed to the provider's private connection,
        // which nothing can do; refuse it here rather than report a missing table later.
        if let Some(schema) = schema.filter(|s| !s.eq_ignore_ascii_case("main")) {
            return Err(LockError::InvalidConfiguration(format!(
                "table name {table:?}: schema {schema:?} is not available to the SQLite lock \
                 provider; use `table` or `main.table`"
            )));
        }
        let resolved = config.resolve(IdentifierStyle::ANSI)?;
        let t = &resolved.qualified;
        let c = &resolved.columns;
        let (name, lock_until, locked_at) = (&c.name, &c.lock_until, &c.locked_at);
        let (locked_by, fence, last_fire) = (&c.locked_by, &c.fence, &c.last_fire);
        let create_table = format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n  \
             {name} VARCHAR({MAX_LOCK_NAME_LEN}) NOT NULL PRIMARY KEY,\n  \
             {lock_until} TEXT NOT NULL,\n  \
             {locked_at} TEXT NOT NULL,\n  \
             {locked_by} VARCHAR({MAX_INSTANCE_ID_LEN}) NOT NULL,\n  \
             {fence} INTEGER NOT NULL DEFAULT 0,\n  \
             {last_fire} TEXT NULL\n\
             ) WITHOUT ROWID;"
        );
        let add_fence = format!("ALTER TABLE {t} ADD COLUMN {fence} INTEGER NOT NULL DEFAULT 0;");
        let add_last_fire = format!("ALTER TABLE {t} ADD COLUMN {last_fire} TEXT NULL;");
        Ok(Table {
            schema: resolved.schema.clone().unwrap_or_else(|| "main".to_owned()),
            resolved,
            create_table,
            add_fence,
            add_last_fire,
        })
    }

    /// The table as the user named it, for messages.
    pub fn display(&self) -> &str {
        &self.resolved.display
    }

    /// What `ensure_schema()` still has to run after [`create_table`](Self::create_table),
    /// given the column names [`TABLE_COLUMNS`] found: the statements adding the missing
    /// extension columns, or `Err` with the configured ShedLock columns that match nothing.
    ///
    /// ```
    /// use lock_sql::LockTableConfig;
    /// use lock_sql::sql::sqlite::Table;
    ///
    /// let table = Table::new(&LockTableConfig::default())?;
    /// let shedlock = ["name", "lock_until", "locked_at", "locked_by"].map(String::from);
    /// assert_eq!(table.migration(&shedlock), Ok(vec![&table.add_fence, &table.add_last_fire]));
    /// assert_eq!(table.migration(&shedlock[..2]), Err(vec!["locked_at".into(), "locked_by".into()]));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn migration(&self, present: &[String]) -> Result<Vec<&String>, Vec<String>> {
        let has = |column: &str| present.iter().any(|c| c.eq_ignore_ascii_case(column));
        let columns = &self.resolved.columns;
        let missing: Vec<String> = columns
            .required()
            .into_iter()
            .map(|(_, column)| &column.catalog)
            .filter(|c| !has(c))
            .cloned()
            .collect();
        if !missing.is_empty() {
            return Err(missing);
        }
        let mut ddl = Vec::new();
        if !has(&columns.fence.catalog) {
            ddl.push(&self.add_fence);
        }
        if !has(&columns.last_fire.catalog) {
            ddl.push(&self.add_last_fire);
        }
        Ok(ddl)
    }
}

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
///
/// ```
/// use lock_sql::LockTableConfig;
/// use lock_sql::sql::sqlite::{Statements, Table};
///
/// let statements = Statements::new(Table::new(&LockTableConfig::default())?);
/// assert!(statements.acquire.starts_with(r#"INSERT INTO "shedlock" AS cur"#));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Debug)]
pub struct Statements {
    /// The table the statements run on, with its DDL.
    pub table: Table,
    /// `?1` name, `?2` locked_by, `?3` at_most ms, `?4` slot or NULL, `?5` the slot's greatest
    /// lead over now (ms), `?6` give up at ([`instant_text`]) or NULL; returns the new fence
    /// when granted, no row when refused (and then nothing was written). Past `?6` by SQLite's
    /// `now` when the statement runs (inside the write transaction, after any wait for the
    /// write lock), it proposes no row: nothing is written.
    pub acquire: String,
    /// `?1` name, `?2` slot or NULL; returns locked_by, lock_until, last_fire and the reason
    /// (1 held, 2 slot already run, 0 neither any more).
    pub refusal: String,
    /// `?1` name, `?2` locked_by, `?3` fence, `?4` at_least ms.
    pub release: String,
    /// `?1` name, `?2` locked_by, `?3` fence, `?4` at_most ms.
    pub extend: String,
    /// Every row, sorted by name, with `held`.
    pub list: String,
    /// `?1` name: the row with `held`.
    pub select_one: String,
    /// `?1` name: ends the lease now.
    pub force_unlock: String,
    /// `?1` name: `last_fire = min(last_fire, now)`.
    pub reset_slot: String,
}

impl Statements {
    /// Builds every statement for `table`.
    pub fn new(table: Table) -> Self {
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
             SELECT ?1, {until}, {now}, ?2, 1, ?4 WHERE (?4 IS NULL OR ?4 <= {limit}) \
             AND (?6 IS NULL OR {now} <= ?6) \
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

/// A slot as stored in `last_fire` (and bound to the acquire's `?4`): the same fixed-width text as SQLite's own times, so text
/// comparison orders slots. Years outside 0000-9999 would break that width and are refused.
pub fn slot_text(slot: DateTime<Utc>) -> Result<String, LockError> {
    if !(0..=9999).contains(&slot.year()) {
        return Err(LockError::InvalidConfiguration(format!(
            "fire slot {slot} is outside the years 0000-9999 that SQLite's date functions support"
        )));
    }
    Ok(slot.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
}

/// An instant (a request's `give_up_at`) in the stored format, for comparison with SQLite's
/// `now`: years outside 0000-9999 are clamped to that range's ends, which compare the same way
/// with any `now` SQLite can have.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// let at = Utc.with_ymd_and_hms(2026, 3, 9, 1, 2, 3).unwrap();
/// assert_eq!(lock_sql::sql::sqlite::instant_text(at), "2026-03-09 01:02:03.000");
/// ```
pub fn instant_text(at: DateTime<Utc>) -> String {
    match at.year() {
        ..0 => "0000-01-01 00:00:00.000".to_owned(),
        10_000.. => "9999-12-31 23:59:59.999".to_owned(),
        _ => at.format("%Y-%m-%d %H:%M:%S%.3f").to_string(),
    }
}

#[cfg(test)]
mod statement_tests {
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

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn names_are_validated_and_quoted() {
        let table = |name: &str| Table::new(&LockTableConfig::default().with_table(name));
        assert!(table("shedlock; DROP TABLE x").is_err());
        assert!(table("aux.locks").is_err());
        let sql = table("main.locks").unwrap();
        assert_eq!(sql.schema, "main");
        assert!(
            sql.create_table
                .starts_with("CREATE TABLE IF NOT EXISTS \"main\".\"locks\"")
        );
    }
}
