//! MySQL and MariaDB: the lock table's DDL and shape checks, the SQL of every lock statement with
//! the order of its `?` parameters, and the decoding of what the server answers, for any driver
//! (mysql_async, sqlx).
//!
//! Every time is the server's `UTC_TIMESTAMP(3)` (evaluated once per statement, so all its uses
//! in one statement agree); durations travel as microsecond intervals holding whole
//! milliseconds, rounded by the kit's rule (`crate::kit::lease_millis`), so that
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

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use crate::kit::sql::SqlValue;
use crate::kit::{
    ColumnNames, IdentifierStyle, LockTableConfig, MAX_INSTANCE_ID_LEN, ResolvedTable,
    at_least_millis, fence_to_sql, lease_millis,
};
use crate::{AcquireOutcome, Lease, LockError, LockRequest, Refusal, RefusalReason};

/// `last_insert_id` at or above this is a refusal; below it, a fence. 2^62: no fence gets there.
const REFUSED: u64 = 1 << 62;
/// Set in a refusal when the lease was free but the slot had already run.
const SLOT_ALREADY_RUN: u64 = 1 << 61;
/// Set in a refusal when the slot was too far ahead of the server's now.
const SLOT_IN_FUTURE: u64 = 1 << 60;
/// The low bits of a refusal: the time (of `lock_until` when held, of `last_fire` when the slot
/// already ran, the server's now when the slot was too far ahead) as `TO_SECONDS`, whole
/// seconds since year 0. Whole seconds are enough for the
/// `skipped` event, and this integer function is much cheaper on the server than a conversion
/// that keeps the milliseconds (`DECIMAL` arithmetic, measured here at a quarter of a losing
/// acquire's server time); it reads a `DATETIME`'s stored UTC wall time whatever the session
/// zone.
const SECONDS_MASK: u64 = SLOT_IN_FUTURE - 1;

/// The server's now on the columns' millisecond grid, UTC: evaluated once per statement, so
/// all its uses in one statement agree.
pub const NOW: &str = "UTC_TIMESTAMP(3)";

/// The server's now with microseconds, for the scheduler's clock estimate: the same clock as
/// [`NOW`], finer than the columns, so that the estimate's error is the round trip's alone.
pub const NOW_PRECISE: &str = "SELECT UTC_TIMESTAMP(6)";

/// The statements for one table of one shape, with the parameters each takes in order.
///
/// ```
/// use lock_core::kit::LockTableConfig;
/// use lock_core::kit::sql::mysql::{Shape, Statements, Table};
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
    select_for_unlock: String,
    unlock: String,
    reset_slot: String,
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
        let held_until = format!("{REFUSED} + {}", to_seconds(&lock_until));

        let acquire = if shape.extended {
            // Params: name, slot, lead, at_most, locked_by, slot (the inserted row); then slot
            // (x3), lead, slot, lead, locked_by, slot, at_most (the update clause).
            let ahead = format!("? > {NOW} + INTERVAL ? MICROSECOND");
            let in_future = format!("{REFUSED} + {SLOT_IN_FUTURE} + {}", to_seconds(NOW));
            let free = format!(
                "{lock_until} <= {NOW} AND (? IS NULL OR (({last_fire} IS NULL OR {last_fire} < ?) \
                 AND ? <= {NOW} + INTERVAL ? MICROSECOND))"
            );
            let refusal = format!(
                "IF({ahead}, {in_future}, IF({lock_until} > {NOW}, {held_until}, {REFUSED} + {SLOT_ALREADY_RUN} + {}))",
                to_seconds(&format!("COALESCE({last_fire}, {lock_until})"))
            );
            // A missing row is inserted free, with no last_fire, when the slot is too far
            // ahead: the decision is recorded with LAST_INSERT_ID (0 for a grant) by the first
            // value and read back by the later ones. On the update path the update clause's
            // first assignment overwrites it.
            let inserted = "LAST_INSERT_ID() = 0";
            format!(
                "INSERT INTO {t} ({name}, {lock_until}, {locked_at}, {locked_by}, {fence}, {last_fire}) \
                 VALUES (?, IF(LAST_INSERT_ID(IF({ahead}, {in_future}, 0)) = 0, {NOW} + INTERVAL ? MICROSECOND, {NOW}), \
                 {NOW}, ?, IF({inserted}, 1, 0), IF({inserted}, ?, NULL)) \
                 ON DUPLICATE KEY UPDATE \
                 {locked_by} = IF(LAST_INSERT_ID(IF({free}, GREATEST({fence}, 0) + 1, {refusal})) < {REFUSED}, ?, {locked_by}), \
                 {locked_at} = IF({granted}, {NOW}, {locked_at}), \
                 {fence} = IF({granted}, LAST_INSERT_ID(), {fence}), \
                 {last_fire} = IF({granted}, COALESCE(?, {last_fire}), {last_fire}), \
                 {lock_until} = IF({granted}, {NOW} + INTERVAL ? MICROSECOND, {lock_until})"
            )
        } else {
            // ShedLock's own four columns. Params: name, at_most, locked_by, locked_by, at_most.
            format!(
                "INSERT INTO {t} ({name}, {lock_until}, {locked_at}, {locked_by}) \
                 VALUES (?, {NOW} + INTERVAL ? MICROSECOND, {NOW}, ?) \
                 ON DUPLICATE KEY UPDATE \
                 {locked_by} = IF(LAST_INSERT_ID(IF({lock_until} <= {NOW}, 1, {held_until})) < {REFUSED}, ?, {locked_by}), \
                 {locked_at} = IF({granted}, {NOW}, {locked_at}), \
                 {lock_until} = IF({granted}, {NOW} + INTERVAL ? MICROSECOND, {lock_until})"
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
            select_for_unlock,
            unlock,
            reset_slot,
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
        let params = if self.shape.extended {
            let slot = SqlValue::Timestamp(request.slot.map(|s| s.instant().naive_utc()));
            let lead = micros(lease_millis(request.max_slot_lead));
            vec![
                name,
                slot.clone(),
                lead.clone(),
                at_most.clone(),
                by.clone(),
                slot.clone(),
                slot.clone(),
                slot.clone(),
                slot.clone(),
                lead.clone(),
                slot.clone(),
                lead,
                by,
                slot,
                at_most,
            ]
        } else {
            vec![name, at_most.clone(), by.clone(), by, at_most]
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
        if last_insert_id < REFUSED {
            let fence = if self.shape.extended {
                last_insert_id
            } else {
                0
            };
            return Some(AcquireOutcome::Acquired(Lease::granted(request, fence)));
        }
        let code = last_insert_id - REFUSED;
        let at = from_to_seconds(code & SECONDS_MASK);
        Some(AcquireOutcome::Refused(if code & SLOT_IN_FUTURE != 0 {
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

/// The lock table's name and column names, validated once by the kit so that every statement
/// built from them is safe: each identifier is `[A-Za-z_][A-Za-z0-9_]*` and is quoted with
/// backticks.
///
/// ```
/// use lock_core::kit::LockTableConfig;
/// use lock_core::kit::sql::mysql::Table;
///
/// let table = Table::new(&LockTableConfig::default().with_table("ops.locks"))?;
/// assert!(table.create_ddl().starts_with("CREATE TABLE IF NOT EXISTS `ops`.`locks`"));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone, Debug)]
pub struct Table {
    resolved: ResolvedTable,
    columns: ColumnNames,
}

impl Table {
    /// Validates and quotes the configured names.
    pub fn new(config: &LockTableConfig) -> Result<Self, LockError> {
        Ok(Table {
            resolved: config.resolve(IdentifierStyle::MYSQL)?,
            columns: config.columns.clone(),
        })
    }

    /// The database the table was qualified with, if any.
    pub fn schema(&self) -> Option<&str> {
        self.resolved.schema.as_deref()
    }

    /// The bare table name.
    pub fn name(&self) -> &str {
        &self.resolved.name
    }

    /// `schema.table` or `table`, for messages.
    pub fn display(&self) -> String {
        self.resolved.display.clone()
    }

    /// The table as it appears in SQL.
    pub fn quoted(&self) -> String {
        self.resolved.qualified.clone()
    }

    /// One column, quoted.
    pub fn col(&self, role: Column) -> String {
        self.resolved(role).sql.clone()
    }

    /// One column, as `information_schema` names it.
    fn column_name(&self, role: Column) -> &str {
        &self.resolved(role).catalog
    }

    fn resolved(&self, role: Column) -> &crate::kit::Column {
        let c = &self.resolved.columns;
        match role {
            Column::Name => &c.name,
            Column::LockUntil => &c.lock_until,
            Column::LockedAt => &c.locked_at,
            Column::LockedBy => &c.locked_by,
            Column::Fence => &c.fence,
            Column::LastFire => &c.last_fire,
        }
    }

    /// `name` is `VARBINARY`: compared byte by byte, so `Report`, `report` and `report ` are
    /// three locks, where a `VARCHAR` in the server's default collation would make them one
    /// (case- and accent-insensitive, trailing spaces ignored).
    ///
    /// `DATETIME(3)` rather than ShedLock's `TIMESTAMP(3)`: a `DATETIME` stores the UTC wall
    /// time as written, while a `TIMESTAMP` converts through the session time zone, and a UTC
    /// time that falls into that zone's spring-forward gap cannot be stored at all (ShedLock
    /// issue 1876). The table is InnoDB because the statements rely on its row locks.
    pub fn create_ddl(&self) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {table} (\n  \
               {name} {NAME_TYPE} NOT NULL,\n  \
               {lock_until} DATETIME(3) NOT NULL,\n  \
               {locked_at} DATETIME(3) NOT NULL,\n  \
               {locked_by} VARCHAR({MAX_INSTANCE_ID_LEN}) NOT NULL,\n  \
               {fence} BIGINT NOT NULL DEFAULT 0,\n  \
               {last_fire} DATETIME(3) NULL,\n  \
               PRIMARY KEY ({name})\n\
             ) ENGINE=InnoDB",
            table = self.quoted(),
            name = self.col(Column::Name),
            lock_until = self.col(Column::LockUntil),
            locked_at = self.col(Column::LockedAt),
            locked_by = self.col(Column::LockedBy),
            fence = self.col(Column::Fence),
            last_fire = self.col(Column::LastFire),
        )
    }

    /// The statement that adds the extension columns missing from an existing table.
    pub fn migration_ddl(&self, missing: &[Column]) -> Option<String> {
        let additions: Vec<String> = missing
            .iter()
            .filter_map(|column| match column {
                Column::Fence => Some(format!(
                    "ADD COLUMN {} BIGINT NOT NULL DEFAULT 0",
                    self.col(Column::Fence)
                )),
                Column::LastFire => Some(format!(
                    "ADD COLUMN {} DATETIME(3) NULL",
                    self.col(Column::LastFire)
                )),
                _ => None,
            })
            .collect();
        (!additions.is_empty())
            .then(|| format!("ALTER TABLE {} {}", self.quoted(), additions.join(", ")))
    }

    /// Interprets the rows of [`COLUMNS_QUERY`]. `None` when the table does not exist; an
    /// error naming every problem, and the `ALTER TABLE` that fixes them, when the table would
    /// misbehave.
    pub fn layout_from(&self, rows: &[ColumnInfo]) -> Result<Option<Shape>, LockError> {
        if rows.is_empty() {
            return Ok(None);
        }
        let find = |column: &str| rows.iter().find(|c| c.name.eq_ignore_ascii_case(column));
        let c = &self.columns;
        for (role, column) in [
            ("name", &c.name),
            ("lock_until", &c.lock_until),
            ("locked_at", &c.locked_at),
            ("locked_by", &c.locked_by),
        ] {
            if find(column).is_none() {
                return Err(LockError::InvalidConfiguration(format!(
                    "lock table {} has no column `{column}` (the `{role}` column); its columns \
                     are: {}",
                    self.display(),
                    rows.iter()
                        .map(|c| c.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let fence = find(&c.fence);
        let last_fire = find(&c.last_fire);
        let extended = match (fence, last_fire) {
            (Some(_), Some(_)) => true,
            (None, None) => false,
            _ => {
                return Err(LockError::InvalidConfiguration(format!(
                    "lock table {} has only one of the columns `{}` and `{}`; run \
                     `ensure_schema()` to add the other",
                    self.display(),
                    c.fence,
                    c.last_fire
                )));
            }
        };
        let problems = self.problems(rows, extended);
        if !problems.is_empty() {
            let (why, fixes): (Vec<String>, Vec<String>) = problems.into_iter().unzip();
            return Err(LockError::InvalidConfiguration(format!(
                "lock table {} cannot be used as it is: {}; run: ALTER TABLE {} {}",
                self.display(),
                why.join("; "),
                self.quoted(),
                fixes.join(", ")
            )));
        }
        let zone_sensitive = rows
            .iter()
            .filter(|column| {
                [&c.lock_until, &c.locked_at, &c.last_fire]
                    .iter()
                    .any(|name| column.name.eq_ignore_ascii_case(name))
            })
            .any(|column| column.data_type.eq_ignore_ascii_case("timestamp"));
        Ok(Some(Shape {
            extended,
            zone_sensitive,
        }))
    }

    /// What would make the provider misbehave on a table with these columns, each with the
    /// clause of an `ALTER TABLE` that fixes it.
    fn problems(&self, rows: &[ColumnInfo], extended: bool) -> Vec<(String, String)> {
        let mut problems = Vec::new();
        let find = |column: &str| rows.iter().find(|c| c.name.eq_ignore_ascii_case(column));
        let c = &self.columns;
        if let Some(name) = find(&c.name)
            && !name.is_one_of(&["char", "varchar", "binary", "varbinary"])
        {
            problems.push((
                format!("`{}` is {}, not a string", c.name, name.data_type),
                format!("MODIFY {} {NAME_TYPE} NOT NULL", self.col(Column::Name)),
            ));
        }
        if let Some(by) = find(&c.locked_by)
            && !by.is_one_of(&[
                "char",
                "varchar",
                "tinytext",
                "text",
                "mediumtext",
                "longtext",
            ])
        {
            problems.push((
                format!("`{}` is {}, not a string", c.locked_by, by.data_type),
                format!(
                    "MODIFY {} VARCHAR({MAX_INSTANCE_ID_LEN}) NOT NULL",
                    self.col(Column::LockedBy)
                ),
            ));
        }
        // Times are stored to the millisecond: with fewer digits the server rounds, so two
        // slots within a second collide and a lease may end up to half a second early.
        for (role, null) in [
            (Column::LockUntil, "NOT NULL"),
            (Column::LockedAt, "NOT NULL"),
            (Column::LastFire, "NULL"),
        ] {
            let Some(column) = find(self.column_name(role)) else {
                continue;
            };
            let time = column.is_one_of(&["datetime", "timestamp"]);
            if time && column.precision.unwrap_or(0) >= 3 {
                continue;
            }
            let fixed = if column.data_type.eq_ignore_ascii_case("timestamp") {
                "TIMESTAMP(3)"
            } else {
                "DATETIME(3)"
            };
            problems.push((
                format!(
                    "`{}` is {}{}, which does not keep milliseconds",
                    column.name,
                    column.data_type,
                    column
                        .precision
                        .map(|p| format!("({p})"))
                        .unwrap_or_default()
                ),
                format!("MODIFY {} {fixed} {null}", self.col(role)),
            ));
        }
        if let Some(fence) = find(&c.fence)
            && !fence.is_one_of(&["bigint"])
        {
            problems.push((
                format!(
                    "`{}` is {}, too narrow for a fence that only grows",
                    c.fence, fence.data_type
                ),
                format!(
                    "MODIFY {} BIGINT NOT NULL DEFAULT 0",
                    self.col(Column::Fence)
                ),
            ));
        }
        // The server reports a new row's AUTO_INCREMENT value where the acquire reads its
        // fence, so the first lease of every name would carry the surrogate key.
        if extended
            && let Some(key) = rows
                .iter()
                .find(|c| c.extra.to_ascii_lowercase().contains("auto_increment"))
        {
            let name_is_key = find(&c.name).is_some_and(|n| n.key.eq_ignore_ascii_case("PRI"));
            problems.push((
                format!(
                    "`{}` is AUTO_INCREMENT, whose value the server reports in place of the fence",
                    key.name
                ),
                if name_is_key {
                    format!("DROP COLUMN `{}`", key.name)
                } else {
                    format!(
                        "DROP COLUMN `{}`, ADD PRIMARY KEY ({})",
                        key.name,
                        self.col(Column::Name)
                    )
                },
            ));
        }
        problems
    }

    /// Why the `name` column of a table with these columns makes names that differ (in case,
    /// accents or trailing spaces) share one lock, with the statement that fixes it; `None`
    /// when names are compared byte by byte.
    pub fn name_collation_warning(&self, rows: &[ColumnInfo]) -> Option<String> {
        let name = rows
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(&self.columns.name))?;
        let collation = name.collation.as_deref()?;
        let lower = collation.to_ascii_lowercase();
        // Binary and no-pad binary collations compare bytes; `binary` types have none.
        if lower == "binary" || lower.ends_with("_nopad_bin") || lower.ends_with("_0900_bin") {
            return None;
        }
        Some(format!(
            "lock table {}: column `{}` has collation {collation}, so lock names that differ \
             only in case, accents or trailing spaces (`Report`, `report`) share one lock; to \
             make them distinct locks, run: ALTER TABLE {} MODIFY {} {NAME_TYPE} NOT NULL",
            self.display(),
            name.name,
            self.quoted(),
            self.col(Column::Name)
        ))
    }

    /// The extension columns missing from a table with these [`COLUMNS_QUERY`] rows.
    pub fn missing_extension_columns(&self, rows: &[ColumnInfo]) -> Vec<Column> {
        let has = |column: &str| rows.iter().any(|c| c.name.eq_ignore_ascii_case(column));
        let mut missing = Vec::new();
        if !has(&self.columns.fence) {
            missing.push(Column::Fence);
        }
        if !has(&self.columns.last_fire) {
            missing.push(Column::LastFire);
        }
        missing
    }
}

/// The type of the `name` column: bytes compared as bytes, as many as the longest lock name
/// (`MAX_LOCK_NAME_LEN`, checked by a unit test).
const NAME_TYPE: &str = "VARBINARY(64)";

/// One row of [`COLUMNS_QUERY`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnInfo {
    /// `COLUMN_NAME`.
    pub name: String,
    /// `DATA_TYPE`: `varchar`, `datetime`, `bigint`...
    pub data_type: String,
    /// `DATETIME_PRECISION`: digits of the fraction of a second, for time columns.
    pub precision: Option<u64>,
    /// `COLLATION_NAME`: for character columns.
    pub collation: Option<String>,
    /// `COLUMN_KEY`: `PRI` for the primary key.
    pub key: String,
    /// `EXTRA`: holds `auto_increment` for such a column.
    pub extra: String,
}

impl ColumnInfo {
    fn is_one_of(&self, types: &[&str]) -> bool {
        types.iter().any(|t| self.data_type.eq_ignore_ascii_case(t))
    }
}

/// The columns of a table and their types, from `information_schema`. Parameters: the schema
/// (`NULL` for the connection's database) and the table name.
pub const COLUMNS_QUERY: &str = "SELECT COLUMN_NAME, DATA_TYPE, DATETIME_PRECISION, \
     COLLATION_NAME, COLUMN_KEY, EXTRA FROM information_schema.COLUMNS \
     WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?";

/// A column by its role in the lock table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(missing_docs)] // the roles are ColumnNames' fields, documented there
pub enum Column {
    Name,
    LockUntil,
    LockedAt,
    LockedBy,
    Fence,
    LastFire,
}

/// What an existing lock table holds, as found in `information_schema`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Has the `fence` and `last_fire` columns. Without them (a table made by ShedLock's own
    /// DDL) leases still exclude each other, but fences are 0 and slots are not remembered.
    pub extended: bool,
    /// A time column is a `TIMESTAMP`, whose values convert through the session time zone.
    pub zone_sensitive: bool,
}

#[cfg(test)]
mod statement_tests {
    use super::*;
    use crate::FireSlot;
    use crate::kit::LockTableConfig;
    use std::sync::Arc;

    fn statements(extended: bool) -> Statements {
        let table = Table::new(&LockTableConfig::default()).unwrap();
        Statements::new(
            &table,
            Shape {
                extended,
                zone_sensitive: false,
            },
        )
    }

    fn request() -> LockRequest {
        LockRequest {
            name: Arc::from("job"),
            locked_by: Arc::from("me"),
            lock_at_most_for: Duration::from_micros(10),
            slot: FireSlot::from_unix_millis(1_700_000_000_000),
            max_slot_lead: crate::DEFAULT_MAX_SLOT_LEAD,
        }
    }

    #[test]
    fn placeholders_match_params() {
        for extended in [true, false] {
            let s = statements(extended);
            let lease = Lease::granted(&request(), 3);
            let cases = [
                s.acquire(&request()),
                s.release(&lease, Duration::ZERO),
                s.extend(&lease, Duration::from_secs(1)),
            ];
            for (sql, params) in cases {
                assert_eq!(sql.matches('?').count(), params.len(), "{sql}");
            }
        }
    }

    #[test]
    fn a_lease_is_at_least_a_millisecond() {
        let (_, values) = statements(true).acquire(&request());
        // The inserted row's lock_until (after name, slot and lead).
        assert_eq!(values[3], SqlValue::Int(1000));
    }

    #[test]
    fn outcomes() {
        let s = statements(true);
        let r = request();
        let fence = |o: Option<AcquireOutcome>| match o {
            Some(AcquireOutcome::Acquired(lease)) => lease.fence(),
            other => panic!("{other:?}"),
        };
        assert_eq!(fence(s.acquire_outcome(&r, 0, 1)), 1);
        assert_eq!(fence(s.acquire_outcome(&r, 42, 2)), 42);
        assert_eq!(s.acquire_outcome(&r, 0, 0), None);
        let held = REFUSED + UNIX_EPOCH_TO_SECONDS + 1_700_000_000;
        match s.acquire_outcome(&r, held, 0) {
            Some(AcquireOutcome::Refused(refusal)) => {
                assert_eq!(refusal.reason, RefusalReason::Held);
                assert_eq!(refusal.lock_until.unwrap().timestamp(), 1_700_000_000);
                assert_eq!(refusal.last_fire, None);
            }
            other => panic!("{other:?}"),
        }
        match s.acquire_outcome(&r, held + SLOT_ALREADY_RUN, 1) {
            Some(AcquireOutcome::Refused(refusal)) => {
                assert_eq!(refusal.reason, RefusalReason::SlotAlreadyRun);
                assert_eq!(refusal.last_fire.unwrap().timestamp(), 1_700_000_000);
            }
            other => panic!("{other:?}"),
        }
        let now = 1_700_000_100;
        match s.acquire_outcome(
            &r,
            REFUSED + SLOT_IN_FUTURE + UNIX_EPOCH_TO_SECONDS + now,
            1,
        ) {
            Some(AcquireOutcome::Refused(refusal)) => {
                assert_eq!(refusal.reason, RefusalReason::SlotInFuture);
                assert_eq!(refusal.database_now.unwrap().timestamp(), now as i64);
            }
            other => panic!("{other:?}"),
        }
        let shedlock = statements(false);
        assert_eq!(fence(shedlock.acquire_outcome(&r, 1, 2)), 0);
        assert_eq!(fence(shedlock.acquire_outcome(&r, 0, 1)), 0);
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;
    use crate::kit::MAX_LOCK_NAME_LEN;

    fn rows(columns: &[(&str, &str)]) -> Vec<ColumnInfo> {
        columns
            .iter()
            .map(|(n, t)| ColumnInfo {
                name: n.to_string(),
                data_type: t.to_string(),
                precision: matches!(*t, "datetime" | "timestamp").then_some(3),
                collation: None,
                key: String::new(),
                extra: String::new(),
            })
            .collect()
    }

    #[test]
    fn the_name_column_holds_the_longest_lock_name() {
        assert_eq!(NAME_TYPE, format!("VARBINARY({MAX_LOCK_NAME_LEN})"));
    }

    fn table(name: &str, columns: ColumnNames) -> Result<Table, LockError> {
        Table::new(
            &LockTableConfig::default()
                .with_table(name)
                .with_columns(columns),
        )
    }

    #[test]
    fn refuses_unsafe_identifiers() {
        assert!(table("shedlock`; DROP TABLE x; --", ColumnNames::default()).is_err());
        let columns = ColumnNames {
            fence: "fence`".into(),
            ..ColumnNames::default()
        };
        assert!(table("shedlock", columns).is_err());
        let table = table("ops.locks", ColumnNames::default()).unwrap();
        assert_eq!(table.quoted(), "`ops`.`locks`");
        assert_eq!(table.display(), "ops.locks");
    }

    #[test]
    fn ddl_uses_datetime_and_custom_columns() {
        let columns = ColumnNames {
            locked_by: "owner".into(),
            ..ColumnNames::default()
        };
        let ddl = table("jobs_lock", columns).unwrap().create_ddl();
        assert!(
            ddl.starts_with("CREATE TABLE IF NOT EXISTS `jobs_lock`"),
            "{ddl}"
        );
        assert!(ddl.contains("`owner` VARCHAR(255) NOT NULL"), "{ddl}");
        assert!(ddl.contains("`lock_until` DATETIME(3) NOT NULL"), "{ddl}");
        assert!(!ddl.contains("TIMESTAMP"), "{ddl}");
    }

    #[test]
    fn shapes() {
        let table = table("shedlock", ColumnNames::default()).unwrap();
        assert_eq!(table.layout_from(&[]).unwrap(), None);
        let shedlock = rows(&[
            ("name", "varchar"),
            ("lock_until", "timestamp"),
            ("locked_at", "timestamp"),
            ("locked_by", "varchar"),
        ]);
        assert_eq!(
            table.layout_from(&shedlock).unwrap(),
            Some(Shape {
                extended: false,
                zone_sensitive: true
            })
        );
        let ours = rows(&[
            ("NAME", "varchar"),
            ("lock_until", "datetime"),
            ("locked_at", "datetime"),
            ("locked_by", "varchar"),
            ("fence", "bigint"),
            ("last_fire", "datetime"),
        ]);
        assert_eq!(
            table.layout_from(&ours).unwrap(),
            Some(Shape {
                extended: true,
                zone_sensitive: false
            })
        );
        let half = rows(&[
            ("name", "varchar"),
            ("lock_until", "datetime"),
            ("locked_at", "datetime"),
            ("locked_by", "varchar"),
            ("fence", "bigint"),
        ]);
        assert!(table.layout_from(&half).is_err());
        let broken = rows(&[("name", "varchar"), ("lock_until", "datetime")]);
        let err = table.layout_from(&broken).unwrap_err().to_string();
        assert!(err.contains("`locked_at`"), "{err}");
    }

    #[test]
    fn migration_adds_only_what_is_missing() {
        let table = table("shedlock", ColumnNames::default()).unwrap();
        assert_eq!(
            table
                .migration_ddl(&[Column::Fence, Column::LastFire])
                .unwrap(),
            "ALTER TABLE `shedlock` ADD COLUMN `fence` BIGINT NOT NULL DEFAULT 0, \
             ADD COLUMN `last_fire` DATETIME(3) NULL"
        );
        assert_eq!(table.migration_ddl(&[]), None);
        let half = rows(&[("name", "varchar"), ("FENCE", "bigint")]);
        assert_eq!(table.missing_extension_columns(&half), [Column::LastFire]);
    }
}
