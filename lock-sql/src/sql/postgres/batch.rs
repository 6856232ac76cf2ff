//! The batch statements of [`LockStatements`](super::LockStatements): the same decisions as
//! `acquire`, `create` and `release`, over arrays.

use super::{DECIDED_AT, NOW, NOW_MS};
use crate::ResolvedTable;

/// `acquire_many`, `acquire_many_wait`, `create_many` and `release_many` for one table.
pub(super) struct BatchStatements {
    pub(super) acquire_many: String,
    pub(super) acquire_many_wait: String,
    pub(super) create_many: String,
    pub(super) release_many: String,
}

impl BatchStatements {
    /// The batch statements for `t`; `full` when the table has `fence` and `last_fire`.
    pub(super) fn new(t: &ResolvedTable, full: bool) -> Self {
        let table = &t.qualified;
        let c = &t.columns;
        let (name, until, at, by) = (&c.name, &c.lock_until, &c.locked_at, &c.locked_by);
        let (fence, last_fire) = (&c.fence, &c.last_fire);
        let (insert_cols, granted_fence, created_fence, cur_last_fire) = if full {
            (
                format!(", {fence}, {last_fire}"),
                format!("t.{fence}"),
                format!("{fence}"),
                format!("t.{last_fire}"),
            )
        } else {
            (
                String::new(),
                "0::int8".to_owned(),
                "0::int8".to_owned(),
                "NULL::timestamp".to_owned(),
            )
        };
        // Batches: the same decisions as `acquire`, `create` and `release`, over arrays.
        let batch_free = if full {
            format!(
                " AND (r.slot IS NULL OR ((t.{last_fire} IS NULL OR t.{last_fire} < r.slot) \
                 AND r.slot <= {NOW} + r.lead * interval '1 millisecond'))"
            )
        } else {
            String::new()
        };
        // No late grant, per request: past its `give_up_at` by the clock at the decision, a row
        // is neither locked (the first statement), nor written, nor created.
        let in_time = format!(" AND (r.give_up_at IS NULL OR {DECIDED_AT} <= r.give_up_at)");
        let too_late = format!("COALESCE(r.give_up_at < {DECIDED_AT}, false) AS too_late");
        let batch_set = if full {
            format!(", {fence} = t.{fence} + 1, {last_fire} = COALESCE(r.slot, t.{last_fire})")
        } else {
            String::new()
        };
        let requests = "SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::timestamp[], \
             $5::int8[], $6::timestamp[]) WITH ORDINALITY \
             AS r(name, at_most, locked_by, slot, lead, give_up_at, ord)";
        // The batch runs in two autocommitted statements ([`LockStatements::acquire_many`],
        // then [`LockStatements::acquire_many_wait`] over the names the first skipped). They
        // differ in how they lock: the first the rows free in its snapshot, SKIP LOCKED; the
        // second every row it is given, waiting, in name order.
        //
        // No lost slot: a row is refused without a wait only when the statement's snapshot
        // shows it held or its slot run, exactly as the single `acquire` refuses it. A row
        // free in the snapshot that the first statement did not grant (locked by another
        // transaction: another instance's batch, a release, an operator's unlock; or changed
        // since the snapshot) is reported `skipped` and decided again by the waiting statement,
        // which waits for that transaction's commit and re-checks the row as it then is (today's
        // single-statement semantics). So skipping never turns into a refusal by itself.
        //
        // No deadlock: the first statement never waits for a row lock (SKIP LOCKED; its UPDATE
        // touches only the rows it has just locked), so it cannot be part of a wait cycle, and it
        // commits (releasing its locks) before the second statement starts: the second holds no
        // row lock when it begins and then locks in name order, like every other batch's second
        // statement, and single-row statements hold one row each. A loser writes nothing in the
        // first statement (a refused row is neither locked nor updated); the second, for the
        // few rows another transaction was changing, locks them but updates only those it
        // grants.
        //
        // `granted`: the UPDATE of both, over the rows its statement has locked (the CTE
        // `locked`, with a `name` column), re-checked as they are now.
        let granted = |locked: &str| {
            format!(
                "granted AS (\
                    UPDATE {table} t SET {until} = {NOW_MS} + r.at_most * interval '1 millisecond', \
                        {at} = {NOW_MS}, {by} = r.locked_by{batch_set} \
                    FROM {locked} l, r WHERE t.{name} = l.name AND r.name = t.{name} \
                        AND t.{until} <= {NOW}{batch_free}{in_time} \
                    RETURNING r.ord, {granted_fence} AS fence)"
            )
        };
        let skipped_if = format!(
            "g.ord IS NULL AND t.{name} IS NOT NULL AND t.{until} <= {NOW}{batch_free}{in_time}"
        );
        let acquire_many = format!(
            "WITH r AS ({requests}), \
            free AS (\
                SELECT t.{name} AS name FROM {table} t JOIN r ON t.{name} = r.name \
                WHERE t.{until} <= {NOW}{batch_free}{in_time} \
                ORDER BY t.{name} FOR UPDATE OF t SKIP LOCKED), \
            {granted} \
            SELECT r.ord, g.fence AS granted, \
                t.{by}::text AS locked_by, t.{until} AS lock_until, {cur_last_fire} AS last_fire, \
                COALESCE(t.{until} > {NOW}, false) AS held, t.{name} IS NOT NULL AS present, \
                {NOW} AS db_now, COALESCE({skipped_if}, false) AS skipped, {too_late} \
            FROM r LEFT JOIN granted g ON g.ord = r.ord \
                LEFT JOIN {table} t ON t.{name} = r.name ORDER BY r.ord",
            granted = granted("free"),
        );
        // The waiting statement locks every row it is given (few: those the first skipped),
        // not only the free ones, and explains a refusal from the locked rows: after the wait
        // a row lock reads the row as the transaction it waited for left it, where the
        // statement's snapshot would show it as it was before (free, its slot not run). A
        // refusal then says who holds the row and which slot last ran, and a fire that asked
        // ahead of its slot can tell "this slot was taken" (final) from "a lease still held"
        // (ask again at the slot) without a second statement.
        let acquire_many_wait = format!(
            "WITH r AS ({requests}), \
            locked AS (\
                SELECT t.{name} AS name, t.{until} AS lock_until, t.{by}::text AS locked_by, \
                    {cur_last_fire} AS last_fire \
                FROM {table} t JOIN r ON t.{name} = r.name \
                ORDER BY t.{name} FOR UPDATE OF t), \
            {granted} \
            SELECT r.ord, g.fence AS granted, l.locked_by, l.lock_until, l.last_fire, \
                COALESCE(l.lock_until > {NOW}, false) AS held, l.name IS NOT NULL AS present, \
                {NOW} AS db_now, false AS skipped, {too_late} \
            FROM r LEFT JOIN granted g ON g.ord = r.ord \
                LEFT JOIN locked l ON l.name = r.name ORDER BY r.ord",
            granted = granted("locked"),
        );
        let (batch_insert_vals, batch_create_guard) = if full {
            (
                ", 1, r.slot".to_owned(),
                format!(
                    " WHERE (r.slot IS NULL OR r.slot <= {NOW} + r.lead * interval '1 millisecond'){in_time}"
                ),
            )
        } else {
            (String::new(), format!(" WHERE true{in_time}"))
        };
        let create_many = format!(
            "WITH r AS ({requests}), \
            created AS (\
                INSERT INTO {table} ({name}, {until}, {at}, {by}{insert_cols}) \
                SELECT r.name, {NOW_MS} + r.at_most * interval '1 millisecond', {NOW_MS}, \
                    r.locked_by{batch_insert_vals} FROM r{batch_create_guard} ORDER BY r.name \
                ON CONFLICT ({name}) DO NOTHING \
                RETURNING {name} AS name, {created_fence} AS fence) \
            SELECT r.ord, (SELECT c.fence FROM created c WHERE c.name = r.name) AS granted, \
                {NOW} AS db_now, {too_late} \
            FROM r ORDER BY r.ord"
        );
        let batch_owner = if full {
            format!(" AND t.{fence} = r.fence")
        } else {
            String::new()
        };
        let release_many = format!(
            "WITH r AS (SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[]) \
                WITH ORDINALITY AS r(name, locked_by, fence, at_least, ord)), \
            mine AS (\
                SELECT t.{name} AS name FROM {table} t JOIN r ON t.{name} = r.name \
                WHERE t.{by} = r.locked_by{batch_owner} \
                ORDER BY t.{name} FOR UPDATE OF t) \
            UPDATE {table} t SET {until} = GREATEST({NOW_MS}, t.{at} + r.at_least * interval '1 millisecond') \
            FROM mine m, r, (SELECT set_config('synchronous_commit', 'off', true)) AS async_commit \
            WHERE t.{name} = m.name AND r.name = t.{name} AND t.{by} = r.locked_by{batch_owner} \
            RETURNING r.ord"
        );
        BatchStatements {
            acquire_many,
            acquire_many_wait,
            create_many,
            release_many,
        }
    }
}
