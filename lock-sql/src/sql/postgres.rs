//! PostgreSQL: the lock table's DDL, the catalog query and shape checks for an existing table,
//! and the SQL text of every lock statement, for any driver (tokio-postgres, sqlx).
//!
//! Conventions shared by all statements:
//! - "now" is always `timezone('utc', CURRENT_TIMESTAMP)` ([`NOW`], and [`NOW_MS`] where it is
//!   stored): the database's clock, UTC wall time, as ShedLock writes it into zone-less
//!   `TIMESTAMP(3)` columns. The client's clock is never compared with anything.
//! - Durations arrive as whole milliseconds (`bigint`) and become intervals in SQL
//!   (`$n * interval '1 millisecond'`).
//! - Every statement of both shapes takes the same parameters with the same types (see
//!   [`LockStatements`]), so callers bind the same values whatever the table looks like; a shape
//!   that does not need a parameter simply does not reference it.
//! - Placeholders are `$n`, which every PostgreSQL driver understands.

mod batch;
mod history;

use crate::{MAX_INSTANCE_ID_LEN, MAX_LOCK_NAME_LEN, ResolvedTable};
pub use history::HistoryBatchStatements;
use lock_core::LockError;

/// The database's clock, UTC, as a zone-less timestamp: what every comparison uses. A column
/// value on the millisecond grid is `<=` this exactly when it is `<=` [`NOW_MS`].
pub const NOW: &str = "timezone('utc', CURRENT_TIMESTAMP)";

/// The database's clock at the moment it is read, UTC: what an acquire compares the sender's
/// `give_up_at` with. `clock_timestamp()`, not `CURRENT_TIMESTAMP` ([`NOW`]): that one is the
/// start of the transaction, and a statement that waited (for a row lock, a stalled server)
/// decides later than it; `clock_timestamp()` is volatile, so it is read again each time the
/// row is checked, also when a row that another transaction changed is re-checked after that
/// transaction committed (a row only locked by another, `SELECT ... FOR UPDATE`, is not
/// re-checked: its wait is covered by the executor's release of an orphan lease instead).
pub const DECIDED_AT: &str = "timezone('utc', clock_timestamp())";

/// The same instant truncated to the columns' millisecond precision: what every stored value
/// uses. Truncated, not left to the column's rounding: a release that stores "now" rounded up
/// by half a millisecond would keep the lock held that long against an acquire that follows at
/// once.
pub const NOW_MS: &str = "date_trunc('milliseconds', timezone('utc', CURRENT_TIMESTAMP))";

/// The exact SQL the provider runs on its table, for operators (to `EXPLAIN` it, or to grant
/// precisely what it needs) and for benchmarks that issue the same statements by hand.
///
/// Parameters: acquire `$1` name (text), `$2` lock_at_most_for in ms (int8), `$3` locked_by
/// (text), `$4` slot (timestamp, UTC, or NULL), `$5` max slot lead in ms (int8), `$6` give up at
/// (timestamp, UTC, or NULL: past it, by [`DECIDED_AT`], nothing is granted nor written);
/// release `$1` name, `$2` locked_by, `$3` fence
/// (int8), `$4` lock_at_least_for in ms; extend like release with `$4` lock_at_most_for in ms;
/// force unlock and reset slot `$1` name; list and now none.
///
/// ```
/// use lock_sql::{IdentifierStyle, LockTableConfig};
/// use lock_sql::sql::postgres::{LockStatements, TableShape};
///
/// let table = LockTableConfig::default().resolve(IdentifierStyle::POSTGRES)?;
/// let statements = LockStatements::new(&table, TableShape::Full);
/// assert!(statements.release.starts_with(r#"UPDATE "shedlock" t SET "lock_until""#));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatements {
    /// The shape of the table these statements were built for.
    pub shape: TableShape,
    /// Acquire: one row while the lock's row exists (`granted` fence or NULL, then the row as
    /// it was, then the database's now, then `too_late`: decided after `$6`), none when it
    /// does not.
    pub acquire: String,
    /// Create the missing row (same parameters as `acquire`); returns one row: the fence (NULL
    /// when another instance created it first, the slot is too far ahead or it is too late),
    /// the database's now and `too_late`.
    pub create: String,
    /// Release, with asynchronous commit of its own transaction.
    pub release: String,
    /// Acquire many ([`lock_core::LockProvider::acquire_many`]), first of two statements: the
    /// parameters of `acquire` as arrays, one element per request (`$1` text[], `$2` int8[],
    /// `$3` text[], `$4` timestamp[], `$5` int8[], `$6` timestamp[]), names distinct. One row
    /// per request, in order: `ord` (1-based), `granted` fence or NULL, the row as it was
    /// (`locked_by`, `lock_until`, `last_fire`, `held`), whether the row exists, the
    /// database's now, `skipped` and `too_late`. The rows free in the statement's snapshot are locked with
    /// `FOR UPDATE SKIP LOCKED`, so a batch never waits behind another instance's batch; a row
    /// free in the snapshot but not granted (locked by another transaction, or changed since
    /// the snapshot) comes back `skipped` and must be decided by [`Self::acquire_many_wait`]
    /// in a transaction of its own, after this one committed. A row that is held (or whose
    /// slot ran) in the snapshot is neither locked nor written, and is refused.
    pub acquire_many: String,
    /// Acquire many, second statement, over the names [`Self::acquire_many`] skipped: the same
    /// parameters and columns (`skipped` always false), but every row given is locked in name
    /// order (`ORDER BY name FOR UPDATE`), waiting for the transactions that hold them and
    /// re-checking each row as they left it, and a refused row is described as they left it
    /// (holder, `lock_until`, `last_fire`); two batches on overlapping names wait for each
    /// other instead of deadlocking.
    pub acquire_many_wait: String,
    /// Create the missing rows of a batch (same parameters as `acquire_many`), inserted in name
    /// order; one row per request: `ord`, the fence granted (NULL: created by another instance
    /// first, the slot too far ahead, or too late), the database's now, `too_late`.
    pub create_many: String,
    /// Release many: `$1` names (text[]), `$2` owners (text[]), `$3` fences (int8[]), `$4`
    /// lock_at_least_for in ms (int8[]); rows locked in name order; asynchronous commit like
    /// `release`. Returns the `ord` (1-based) of every lease released.
    pub release_many: String,
    /// Extend.
    pub extend: String,
    /// Every row, sorted by name.
    pub list: String,
    /// One row (`$1` the name), as `list` reads it: a lookup on the primary key.
    pub read: String,
    /// Force unlock, returning the row as it was.
    pub force_unlock: String,
    /// Reset a poisoned `last_fire` to `LEAST(last_fire, now)`, returning the row as it was.
    pub reset_slot: String,
    /// The database's now: the expression every statement compares with.
    pub now: String,
}

impl LockStatements {
    /// The statements for the table `t` in the shape `shape`.
    pub fn new(t: &ResolvedTable, shape: TableShape) -> Self {
        let table = &t.qualified;
        let c = &t.columns;
        let (name, until, at, by) = (&c.name, &c.lock_until, &c.locked_at, &c.locked_by);
        let full = shape == TableShape::Full;
        let (fence, last_fire) = (&c.fence, &c.last_fire);
        // On a ShedLock-only table the extension columns read as constants.
        let fence_of = |alias: &str| -> (String, String) {
            if full {
                (format!("{alias}.{fence}"), format!("{alias}.{last_fire}"))
            } else {
                ("0::int8".to_owned(), "NULL::timestamp".to_owned())
            }
        };

        let at_most = "$2 * interval '1 millisecond'";
        let (_, cur_last_fire) = fence_of("t");

        // Acquire: one statement, one round trip while the row exists (every fire but a name's
        // first). `granted` is the conditional UPDATE: when the lock is held (the common,
        // losing case) it matches no row and writes nothing: no row lock, no new tuple, no WAL,
        // no transaction id, so no commit flush. The outer SELECT reads the row as the
        // statement's snapshot saw it, to explain a refusal without another round trip; it
        // returns no row at all when the row does not exist, and only then does the provider
        // send `create`. Keeping the INSERT out of this statement matters: a data-modifying CTE
        // runs (and its ModifyTable node is set up) on every execution, and an INSERT branch
        // measured here made every losing acquire about 0.03 ms slower (0.085 against 0.048 ms
        // per statement with pgbench), for a case that occurs once per lock name.
        let (set_slot, slot_ok, insert_cols, insert_vals, granted_fence) = if full {
            (
                format!(", {fence} = t.{fence} + 1, {last_fire} = COALESCE($4, t.{last_fire})"),
                format!(
                    " AND ($4 IS NULL OR ((t.{last_fire} IS NULL OR t.{last_fire} < $4) \
                     AND $4 <= {NOW} + $5 * interval '1 millisecond'))"
                ),
                format!(", {fence}, {last_fire}"),
                ", 1, $4".to_owned(),
                format!("t.{fence}"),
            )
        } else {
            (
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                "0::int8".to_owned(),
            )
        };
        // No late grant: past the sender's `give_up_at` ($6) by the clock at the decision (read
        // in the WHERE, so again when a waited-for row is re-checked), nothing is written.
        let in_time = format!("($6 IS NULL OR {DECIDED_AT} <= $6)");
        let too_late = format!("($6 IS NOT NULL AND {DECIDED_AT} > $6)");
        let acquire = format!(
            "WITH granted AS (\
                UPDATE {table} t SET {until} = {NOW_MS} + {at_most}, {at} = {NOW_MS}, {by} = $3{set_slot} \
                WHERE t.{name} = $1 AND t.{until} <= {NOW}{slot_ok} AND {in_time} \
                RETURNING {granted_fence} AS fence) \
            SELECT (SELECT fence FROM granted) AS granted, t.{by}::text AS locked_by, \
                t.{until} AS lock_until, {cur_last_fire} AS last_fire, t.{until} > {NOW} AS held, \
                {NOW} AS db_now, {too_late} AS too_late \
            FROM {table} t WHERE t.{name} = $1"
        );

        // Create: the row did not exist (first fire of a name, or deleted by hand), so the
        // next fire recreates it instead of failing until a restart. ON CONFLICT DO NOTHING
        // settles the race of two instances creating it at once: the loser gets no row back.
        let created_fence = if full {
            format!("{fence}")
        } else {
            "0::int8".to_owned()
        };
        // A slot too far ahead of the database's now creates nothing either (the SELECT
        // proposes no row); the provider tells the two cases apart by the now returned.
        let create_guard = if full {
            format!(
                " WHERE ($4 IS NULL OR $4 <= {NOW} + $5 * interval '1 millisecond') AND {in_time}"
            )
        } else {
            format!(" WHERE {in_time}")
        };
        let create = format!(
            "WITH created AS (\
                INSERT INTO {table} ({name}, {until}, {at}, {by}{insert_cols}) \
                SELECT $1, {NOW_MS} + {at_most}, {NOW_MS}, $3{insert_vals}{create_guard} \
                ON CONFLICT ({name}) DO NOTHING \
                RETURNING {created_fence} AS fence) \
            SELECT (SELECT fence FROM created) AS granted, {NOW} AS db_now, {too_late} AS too_late"
        );

        // Release: ShedLock's `max(now, locked_at + lock_at_least_for)`, owner- and
        // fence-checked. The joined one-row subquery switches this statement's own implicit
        // transaction to asynchronous commit (`set_config(..., true)` is transaction-local):
        // the UPDATE cannot produce a row without evaluating it, so every release that writes
        // commits asynchronously. Safe because a release only ever shortens a lease: if the
        // server crashes before the commit reaches disk, the row keeps the holder's
        // `lock_until` and the next holder waits for it, exactly as if the holder had died.
        // Any later durable commit (the next acquire) flushes the WAL up to and including
        // this release, so no later grant can survive a crash that loses the release.
        let owner_fence = if full {
            format!(" AND t.{fence} = $3")
        } else {
            // Without the column the fence ($3) is not compared; it is declared, not used.
            String::new()
        };
        let release = format!(
            "UPDATE {table} t SET {until} = GREATEST({NOW_MS}, t.{at} + $4 * interval '1 millisecond') \
             FROM (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit \
             WHERE t.{name} = $1 AND t.{by} = $2{owner_fence}"
        );

        // Extend: durable (a lost extend could let the lease lapse under a running body).
        let extend = format!(
            "UPDATE {table} t SET {until} = {NOW_MS} + $4 * interval '1 millisecond' \
             WHERE t.{name} = $1 AND t.{by} = $2{owner_fence} AND t.{until} > {NOW}"
        );

        let (list_fence, list_last_fire) = fence_of("t");
        let list = format!(
            "SELECT t.{name}::text, t.{until}, t.{at}, t.{by}::text, {list_fence}, \
                {list_last_fire}, t.{until} > {NOW} \
             FROM {table} t ORDER BY t.{name} COLLATE \"C\""
        );

        let read = format!(
            "SELECT t.{name}::text, t.{until}, t.{at}, t.{by}::text, {list_fence}, \
                {list_last_fire}, t.{until} > {NOW} FROM {table} t WHERE t.{name} = $1"
        );

        // The subquery locks the row and keeps its old values for RETURNING. LEAST: an already
        // expired lease keeps its end rather than moving it forward.
        let (old_fence, old_last_fire) = fence_of("old");
        let old_cols = if full {
            format!(", t.{fence}, t.{last_fire}")
        } else {
            String::new()
        };
        let force_unlock = format!(
            "UPDATE {table} t SET {until} = LEAST(old.{until}, {NOW_MS}) \
             FROM (SELECT t.{name}, t.{until}, t.{at}, t.{by}{old_cols} \
                   FROM {table} t WHERE t.{name} = $1 FOR UPDATE) AS old \
             WHERE t.{name} = old.{name} \
             RETURNING old.{name}::text, old.{until}, old.{at}, old.{by}::text, {old_fence}, \
                {old_last_fire}, old.{until} > {NOW}"
        );

        // Reset slot: like force unlock, the subquery locks the row and keeps its old values.
        // LEAST keeps a past last_fire (no slot that ran can run again) and brings a future one
        // back to now.
        let reset_slot = if full {
            format!(
                "UPDATE {table} t SET {last_fire} = LEAST(old.{last_fire}, {NOW_MS}) \
                 FROM (SELECT t.{name}, t.{until}, t.{at}, t.{by}{old_cols} \
                       FROM {table} t WHERE t.{name} = $1 FOR UPDATE) AS old \
                 WHERE t.{name} = old.{name} \
                 RETURNING old.{name}::text, old.{until}, old.{at}, old.{by}::text, {old_fence}, \
                    {old_last_fire}, old.{until} > {NOW}"
            )
        } else {
            // Without last_fire there is nothing to reset: the row as it is.
            read.clone()
        };
        let batch = batch::BatchStatements::new(t, full);
        let now = format!("SELECT {NOW}");

        LockStatements {
            shape,
            acquire,
            create,
            release,
            acquire_many: batch.acquire_many,
            acquire_many_wait: batch.acquire_many_wait,
            create_many: batch.create_many,
            release_many: batch.release_many,
            extend,
            list,
            read,
            force_unlock,
            reset_slot,
            now,
        }
    }
}

/// What the lock table supports, as found in the catalog by [`shape_of`].
///
/// ```
/// use lock_sql::sql::postgres::TableShape;
/// assert_ne!(TableShape::Full, TableShape::ShedLockOnly);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableShape {
    /// All six columns: exclusion, fencing and once-per-slot.
    Full,
    /// Only ShedLock's four columns (a table made by ShedLock's own DDL): exclusion only;
    /// leases carry fence 0 and slots are ignored until the provider's `ensure_schema()` adds
    /// `fence` and `last_fire` ([`add_extension_columns`]).
    ShedLockOnly,
}

/// The statement that creates the table with all six columns (no-op if it exists).
///
/// With `fillfactor = 50`: every acquire rewrites its row, and a row's new version only stays
/// on its page (a HOT update: no index entry, and the old version pruned as the page is next
/// read) when the page has room for it. Filled to the brim, as the default leaves a table, a
/// thousand jobs due every second bloated the table twentyfold within a minute (400 pages for
/// 2,000 rows, a third of the updates not HOT), and each batch statement's scan of it with it.
/// Half-empty pages cost nothing at the size of a lock table.
pub fn create_table(t: &ResolvedTable) -> String {
    let c = &t.columns;
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (\n  \
           {name} VARCHAR({MAX_LOCK_NAME_LEN}) NOT NULL PRIMARY KEY,\n  \
           {until} TIMESTAMP(3) NOT NULL,\n  \
           {at} TIMESTAMP(3) NOT NULL,\n  \
           {by} VARCHAR({MAX_INSTANCE_ID_LEN}) NOT NULL,\n  \
           {fence} BIGINT NOT NULL DEFAULT 0,\n  \
           {last_fire} TIMESTAMP(3) NULL\n\
         ) WITH (fillfactor = {FILLFACTOR});",
        table = t.qualified,
        name = c.name,
        until = c.lock_until,
        at = c.locked_at,
        by = c.locked_by,
        fence = c.fence,
        last_fire = c.last_fire,
    )
}

/// The `fillfactor` of the tables this crate creates whose rows are rewritten all the time: the
/// lock table (every acquire and release) and the job registry (every heartbeat of a job whose
/// next fire moved). See [`create_table`].
pub const FILLFACTOR: u32 = 50;

/// The statements that add the extension columns to a ShedLock table. Both have defaults, so
/// ShedLock's own INSERTs keep working and adding them rewrites no rows.
pub fn add_extension_columns(t: &ResolvedTable) -> String {
    format!(
        "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {fence} BIGINT NOT NULL DEFAULT 0;\n\
         ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {last_fire} TIMESTAMP(3) NULL;",
        table = t.qualified,
        fence = t.columns.fence,
        last_fire = t.columns.last_fire,
    )
}

/// The table's columns in one query: parameter `$1` (text) is the table's quoted name
/// ([`ResolvedTable::qualified`]). Rows: exists (bool, false on the single row of a missing
/// table), column name (text, NULL for a missing table), `format_type` of the column (text).
/// `to_regclass` resolves the name exactly as the lock statements will (same quoting, same
/// `search_path`), and returns NULL rather than an error for a missing table. A driver sends it
/// unnamed with its parameter type, so that it leaves no prepared statement behind (PgBouncer
/// in transaction mode) and costs one round trip.
pub const COLUMNS_QUERY: &str = "SELECT c.oid IS NOT NULL, a.attname::text, format_type(a.atttypid, a.atttypmod) \
             FROM (SELECT to_regclass($1) AS oid) AS c \
             LEFT JOIN pg_catalog.pg_attribute a \
               ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped \
             ORDER BY a.attnum";

/// The statement `ensure_schema()` runs first in its transaction, with [`ensure_schema_lock_key`]
/// as `$1` (text). It serializes creating the table (or adding the extension columns) through
/// an advisory lock, so that many instances starting at once do not race on
/// `CREATE TABLE` (which is not atomic against a concurrent create of the same name). A table
/// that already has every column is left alone: no DDL, so no `ACCESS EXCLUSIVE` lock on a live
/// table at every start-up.
///
/// The two-key form: its key space is separate from the one-bigint form applications use most.
/// The key is the same for every driver, so a sqlx and a tokio-postgres instance starting at
/// once are serialized too.
pub const ENSURE_SCHEMA_LOCK: &str = "SELECT pg_advisory_xact_lock(1397247051, hashtext($1))";

/// The key of [`ENSURE_SCHEMA_LOCK`] for a table.
pub fn ensure_schema_lock_key(table: &ResolvedTable) -> String {
    format!("lock-provider-postgres ensure_schema {}", table.qualified)
}

/// The DDL `ensure_schema()` runs, inside the transaction holding [`ENSURE_SCHEMA_LOCK`], given
/// what [`COLUMNS_QUERY`] found: the `CREATE TABLE` when the table is missing (`None`), the
/// statements adding the extension columns when one of them is missing, nothing when the
/// table has every column.
///
/// ```
/// use lock_sql::{IdentifierStyle, LockTableConfig};
/// use lock_sql::sql::postgres::schema_change;
///
/// let table = LockTableConfig::default().resolve(IdentifierStyle::POSTGRES)?;
/// assert!(schema_change(&table, None).unwrap().starts_with("CREATE TABLE"));
/// let shedlock: Vec<(String, String)> = ["name", "lock_until", "locked_at", "locked_by"]
///     .iter().map(|c| (c.to_string(), "text".to_string())).collect();
/// assert!(schema_change(&table, Some(&shedlock)).unwrap().starts_with("ALTER TABLE"));
/// # Ok::<(), lock_core::LockError>(())
/// ```
pub fn schema_change(
    table: &ResolvedTable,
    columns: Option<&[(String, String)]>,
) -> Option<String> {
    let Some(columns) = columns else {
        return Some(create_table(table));
    };
    let has = |c: &str| columns.iter().any(|(name, _)| name == c);
    let c = &table.columns;
    (!has(&c.fence.catalog) || !has(&c.last_fire.catalog)).then(|| add_extension_columns(table))
}

/// Decides the shape of an existing table, or says precisely why the provider cannot use it.
pub fn shape_of(
    table: &ResolvedTable,
    columns: &[(String, String)],
) -> Result<TableShape, LockError> {
    let type_of = |column: &str| {
        columns
            .iter()
            .find(|(name, _)| name == column)
            .map(|(_, ty)| ty.as_str())
    };
    let listing = || {
        columns
            .iter()
            .map(|(name, ty)| format!("{name} {ty}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let c = &table.columns;
    for (role, column) in c.required() {
        if type_of(&column.catalog).is_none() {
            return Err(LockError::InvalidConfiguration(format!(
                "lock table {} has no column {:?} (configured for `{role}`); its columns are: {}",
                table.display,
                column.catalog,
                listing()
            )));
        }
    }
    // Timestamps are UTC wall time in zone-less columns, as ShedLock stores them; a
    // `timestamptz` column would be shifted by the session's TimeZone on every comparison.
    for column in [&c.lock_until, &c.locked_at, &c.last_fire] {
        if let Some(ty) = type_of(&column.catalog)
            && !(ty.starts_with("timestamp") && ty.ends_with("without time zone"))
        {
            return Err(LockError::InvalidConfiguration(format!(
                "lock table {}: column {:?} is `{ty}`; it must be `TIMESTAMP(3)` (without time \
                 zone) holding UTC, as ShedLock's PostgreSQL DDL makes it",
                table.display, column.catalog
            )));
        }
    }
    let mut problems = Vec::new();
    // Times are kept to the millisecond: `timestamp(0)` rounds to the second, so two slots
    // within a second collide and a lease may end up to half a second early.
    for column in [&c.lock_until, &c.locked_at, &c.last_fire] {
        if let Some(ty) = type_of(&column.catalog)
            && timestamp_precision(ty) < 3
        {
            problems.push((
                format!(
                    "{:?} is `{ty}`, which does not keep milliseconds",
                    column.catalog
                ),
                format!("ALTER COLUMN {column} TYPE TIMESTAMP(3)"),
            ));
        }
    }
    // The fence is read as an `i64`: a narrower column would fail the read after the grant
    // committed, so every fire would take the lock and run nothing.
    if let Some(ty) = type_of(&c.fence.catalog)
        && ty != "bigint"
    {
        problems.push((
            format!("{:?} is `{ty}`, not `bigint`", c.fence.catalog),
            format!("ALTER COLUMN {} TYPE BIGINT", c.fence),
        ));
    }
    if !problems.is_empty() {
        let (why, fixes): (Vec<String>, Vec<String>) = problems.into_iter().unzip();
        return Err(LockError::InvalidConfiguration(format!(
            "lock table {} cannot be used as it is: {}; run: ALTER TABLE {} {};",
            table.display,
            why.join("; "),
            table.qualified,
            fixes.join(", ")
        )));
    }
    if type_of(&c.fence.catalog).is_some() && type_of(&c.last_fire.catalog).is_some() {
        Ok(TableShape::Full)
    } else {
        Ok(TableShape::ShedLockOnly)
    }
}

/// The digits of a second a `timestamp` column keeps, from its `format_type` spelling:
/// `timestamp(3) without time zone` keeps 3, `timestamp without time zone` PostgreSQL's
/// default of 6.
fn timestamp_precision(ty: &str) -> u32 {
    ty.strip_prefix("timestamp(")
        .and_then(|rest| rest.split(')').next())
        .and_then(|digits| digits.parse().ok())
        .unwrap_or(6)
}

/// What a losing acquire's row says (the acquire statement's columns `locked_by`, `lock_until`,
/// `last_fire`, `held`, the server's now and `too_late`), for any driver: refused as decided
/// after the sender's `give_up_at`, as held, as a slot that already ran, or as a slot too far
/// ahead of the server's now. A row free in the statement's
/// snapshot yet not granted was taken by another instance after the snapshot: what it shows is
/// stale, so only the reason is reported.
#[allow(clippy::too_many_arguments)] // One per column of the refusal's row.
pub fn refusal(
    request: &lock_core::LockRequest,
    locked_by: Option<String>,
    lock_until: Option<chrono::NaiveDateTime>,
    last_fire: Option<chrono::NaiveDateTime>,
    held: bool,
    database_now: chrono::DateTime<chrono::Utc>,
    too_late: bool,
) -> lock_core::Refusal {
    use lock_core::{Refusal, RefusalReason};
    if request.slot_too_far_ahead(database_now) {
        return Refusal::slot_in_future(database_now);
    }
    if too_late {
        return Refusal::too_late(database_now);
    }
    let slot = request.slot.map(|s| s.instant().naive_utc());
    let slot_run = matches!((last_fire, slot), (Some(last), Some(slot)) if last >= slot);
    let known = |reason| Refusal {
        reason,
        locked_by,
        lock_until: lock_until.map(|at| at.and_utc()),
        last_fire: last_fire.map(|at| at.and_utc()),
        database_now: Some(database_now),
    };
    if held {
        known(RefusalReason::Held)
    } else if slot_run {
        known(RefusalReason::SlotAlreadyRun)
    } else {
        Refusal::new(RefusalReason::Held)
    }
}

/// The refusal of an acquire that lost a race, from the lock row read again after it.
///
/// The acquire's UPDATE waited for a concurrent winner's row lock and then saw the winner's row
/// (so it refused), but its SELECT read the statement's snapshot, taken before the winner
/// committed: a free row whose slot had not run, which [`refusal`] can only call held, with no
/// details. The row read again says who won and which slot it ran, so a fire that asked ahead of
/// its slot learns that the slot was taken instead of asking once more at the slot. Whether a
/// refusal is such a one: its `database_now` is `None` (every other refusal has it).
pub fn refusal_as_committed(
    request: &lock_core::LockRequest,
    row: lock_core::LockRecord,
    database_now: chrono::DateTime<chrono::Utc>,
) -> lock_core::Refusal {
    refusal(
        request,
        Some(row.locked_by),
        Some(row.lock_until.naive_utc()),
        row.last_fire.map(|at| at.naive_utc()),
        row.held,
        database_now,
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::timestamp_precision;

    #[test]
    fn precision_of_a_timestamp_column() {
        assert_eq!(timestamp_precision("timestamp(0) without time zone"), 0);
        assert_eq!(timestamp_precision("timestamp(3) without time zone"), 3);
        assert_eq!(timestamp_precision("timestamp without time zone"), 6);
    }
}
