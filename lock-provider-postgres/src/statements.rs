//! The SQL text of every statement, built once per table and table shape from validated names.
//!
//! Conventions shared by all statements:
//! - "now" is always `timezone('utc', CURRENT_TIMESTAMP)` ([`NOW`], and [`NOW_MS`] where it is
//!   stored): the database's clock, UTC wall time, as ShedLock writes it into zone-less
//!   `TIMESTAMP(3)` columns. The client's clock is never compared with anything.
//! - Durations arrive as whole milliseconds (`bigint`) and become intervals in SQL
//!   (`$n * interval '1 millisecond'`).
//! - Every statement of both shapes takes the same typed parameters (see [`ACQUIRE_TYPES`] and
//!   friends), so callers bind the same values whatever the table looks like; a shape that
//!   does not need a parameter simply does not reference it.

use lock_core::kit::ResolvedTable;
use tokio_postgres::types::Type;

use crate::table::TableShape;

/// The database's clock, UTC, as a zone-less timestamp: what every comparison uses. A column
/// value on the millisecond grid is `<=` this exactly when it is `<=` [`NOW_MS`].
const NOW: &str = "timezone('utc', CURRENT_TIMESTAMP)";

/// The same instant truncated to the columns' millisecond precision: what every stored value
/// uses. Truncated, not left to the column's rounding: a release that stores "now" rounded up
/// by half a millisecond would keep the lock held that long against an acquire that follows at
/// once.
const NOW_MS: &str = "date_trunc('milliseconds', timezone('utc', CURRENT_TIMESTAMP))";

/// `$1` name, `$2` lock_at_most_for (ms), `$3` locked_by, `$4` slot (NULL for none), `$5` the
/// slot's greatest lead over the database's now (ms).
pub(crate) const ACQUIRE_TYPES: &[Type] = &[
    Type::TEXT,
    Type::INT8,
    Type::TEXT,
    Type::TIMESTAMP,
    Type::INT8,
];
/// `$1` name, `$2` locked_by, `$3` fence, `$4` lock_at_least_for (ms).
pub(crate) const RELEASE_TYPES: &[Type] = &[Type::TEXT, Type::TEXT, Type::INT8, Type::INT8];
/// `$1` name, `$2` locked_by, `$3` fence, `$4` lock_at_most_for (ms).
pub(crate) const EXTEND_TYPES: &[Type] = &[Type::TEXT, Type::TEXT, Type::INT8, Type::INT8];
/// `$1` name.
pub(crate) const UNLOCK_TYPES: &[Type] = &[Type::TEXT];

/// The exact SQL the provider runs on its table, for operators (to `EXPLAIN` it, or to grant
/// precisely what it needs) and for benchmarks that issue the same statements by hand.
///
/// Parameters: acquire `$1` name (text), `$2` lock_at_most_for in ms (int8), `$3` locked_by
/// (text), `$4` slot (timestamp, UTC, or NULL), `$5` max slot lead in ms (int8); release `$1` name, `$2` locked_by, `$3` fence
/// (int8), `$4` lock_at_least_for in ms; extend like release with `$4` lock_at_most_for in ms;
/// force unlock and reset slot `$1` name; list and now none.
///
/// ```no_run
/// # async fn run(provider: lock_provider_postgres::PostgresLockProvider) -> Result<(), lock_core::LockError> {
/// let statements = provider.statements().await?;
/// println!("{}\n{}", statements.acquire, statements.release);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockStatements {
    /// The shape of the table these statements were built for.
    pub shape: TableShape,
    /// Acquire: one row while the lock's row exists (`granted` fence or NULL, then the row as
    /// it was, then the database's now), none when it does not.
    pub acquire: String,
    /// Create the missing row (same parameters as `acquire`); returns one row: the fence (NULL
    /// when another instance created it first or the slot is too far ahead) and the database's
    /// now.
    pub create: String,
    /// Release, with asynchronous commit of its own transaction.
    pub release: String,
    /// Extend.
    pub extend: String,
    /// Every row, sorted by name.
    pub list: String,
    /// Force unlock, returning the row as it was.
    pub force_unlock: String,
    /// Reset a poisoned `last_fire` to `LEAST(last_fire, now)`, returning the row as it was.
    pub reset_slot: String,
    /// The database's now: the expression every statement compares with.
    pub now: String,
}

/// The statements for one table in one shape.
#[derive(Debug)]
pub(crate) struct Statements {
    pub(crate) shape: TableShape,
    /// Returns one row when the lock's row exists: `granted` (the new fence, or NULL), then
    /// the row as it was before (`locked_by`, `lock_until`, `last_fire`, `held`); no row when
    /// it does not exist.
    pub(crate) acquire: String,
    /// Inserts a missing row, same parameters as `acquire`; returns the fence, or no row when
    /// another instance created it first.
    pub(crate) create: String,
    pub(crate) release: String,
    pub(crate) extend: String,
    /// Returns the record columns: name, lock_until, locked_at, locked_by, fence, last_fire,
    /// held.
    pub(crate) list: String,
    /// Returns the record columns of the row as it was before the unlock.
    pub(crate) force_unlock: String,
    /// Returns the record columns of the row as it was before the reset.
    pub(crate) reset_slot: String,
    /// Returns the database's now (one zone-less timestamp, UTC).
    pub(crate) now: String,
}

impl Statements {
    pub(crate) fn new(t: &ResolvedTable, shape: TableShape) -> Self {
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
        let acquire = format!(
            "WITH granted AS (\
                UPDATE {table} t SET {until} = {NOW_MS} + {at_most}, {at} = {NOW_MS}, {by} = $3{set_slot} \
                WHERE t.{name} = $1 AND t.{until} <= {NOW}{slot_ok} \
                RETURNING {granted_fence} AS fence) \
            SELECT (SELECT fence FROM granted) AS granted, t.{by}::text AS locked_by, \
                t.{until} AS lock_until, {cur_last_fire} AS last_fire, t.{until} > {NOW} AS held, \
                {NOW} AS db_now \
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
            format!(" WHERE $4 IS NULL OR $4 <= {NOW} + $5 * interval '1 millisecond'")
        } else {
            String::new()
        };
        let create = format!(
            "WITH created AS (\
                INSERT INTO {table} ({name}, {until}, {at}, {by}{insert_cols}) \
                SELECT $1, {NOW_MS} + {at_most}, {NOW_MS}, $3{insert_vals}{create_guard} \
                ON CONFLICT ({name}) DO NOTHING \
                RETURNING {created_fence} AS fence) \
            SELECT (SELECT fence FROM created) AS granted, {NOW} AS db_now"
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
            format!(
                "SELECT t.{name}::text, t.{until}, t.{at}, t.{by}::text, {list_fence}, \
                    {list_last_fire}, t.{until} > {NOW} FROM {table} t WHERE t.{name} = $1"
            )
        };
        let now = format!("SELECT {NOW}");

        Statements {
            shape,
            acquire,
            create,
            release,
            extend,
            list,
            force_unlock,
            reset_slot,
            now,
        }
    }

    /// The public copy of these statements.
    pub(crate) fn public(&self) -> LockStatements {
        LockStatements {
            shape: self.shape,
            acquire: self.acquire.clone(),
            create: self.create.clone(),
            release: self.release.clone(),
            extend: self.extend.clone(),
            list: self.list.clone(),
            force_unlock: self.force_unlock.clone(),
            reset_slot: self.reset_slot.clone(),
            now: self.now.clone(),
        }
    }
}
