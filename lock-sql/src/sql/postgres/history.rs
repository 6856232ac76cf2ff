//! The run-history batch statements of PostgreSQL
//! ([`ClusterStore::runs_started`](lock_cluster::ClusterStore::runs_started) and
//! [`runs_ended`](lock_cluster::ClusterStore::runs_ended)): the single statements'
//! columns and clock, over arrays.

use super::NOW_MS;
use crate::{IdentifierStyle, ResolvedTable};

/// The batched start and end of runs in `<lock table>_runs`.
///
/// ```
/// use lock_sql::{IdentifierStyle, LockTableConfig};
/// use lock_sql::sql::postgres::HistoryBatchStatements;
/// let table = LockTableConfig::default().with_table("ops.shedlock").resolve(IdentifierStyle::POSTGRES)?;
/// let sql = HistoryBatchStatements::new(&table);
/// assert!(sql.runs_started.contains(r#"INSERT INTO "ops"."shedlock_runs""#));
/// assert!(sql.runs_ended.starts_with(r#"UPDATE "ops"."shedlock_runs""#));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct HistoryBatchStatements {
    /// `$1` jobs (`text[]`), `$2` slots (`timestamp[]`, NULL for none), `$3` fire kinds
    /// (`text[]`), `$4` instance ids (`text[]`), `$5` fences (`int8[]`), `$6` attempts
    /// (`int4[]`), `$7` params (`text[]`, NULL for none), `$8` start times (`timestamp[]`,
    /// NULL for the server's now; a time past now is written as now): one start row per
    /// element, inserted in array order, returning `(ord, id)` (`ord` from 1).
    pub runs_started: String,
    /// `$1` ids (`int8[]`), `$2` outcomes (`text[]`), `$3` error texts (`text[]`, NULL for
    /// none), `$4` cancel requested (`bool[]`), `$5` log lines (`text[]`, NULL for none), `$6`
    /// end times (`timestamp[]`, NULL for the server's now; never before the row's start nor
    /// past now): the end of each run.
    pub runs_ended: String,
}

impl HistoryBatchStatements {
    /// The statements for the runs table beside `lock_table`.
    pub fn new(lock_table: &ResolvedTable) -> Self {
        let style = IdentifierStyle::POSTGRES;
        let bare = format!("{}_runs", lock_table.name);
        let runs = match &lock_table.schema {
            Some(schema) => format!("{}.{}", style.quote(schema), style.quote(&bare)),
            None => style.quote(&bare),
        };
        // RETURNING promises no order, so each new row is matched back to its request by
        // its job name: the scheduler never puts two rows of one job in one batch.
        let runs_started = format!(
            "WITH r AS (SELECT * FROM unnest($1::text[], $2::timestamp[], $3::text[], \
             $4::text[], $5::int8[], $6::int4[], $7::text[], $8::timestamp[]) WITH ORDINALITY \
             AS r(job, slot, kind, instance, fence, attempt, params, started, ord)), \
             ins AS (INSERT INTO {runs} (job_name, slot_at, fire_kind, instance_id, fence, \
             attempt, params, started_at, outcome) \
             SELECT job, slot, kind, instance, fence, attempt, params, \
             LEAST(COALESCE(started, {NOW_MS}), {NOW_MS}), 'running' \
             FROM r ORDER BY ord \
             RETURNING id, job_name, fence, instance_id) \
             SELECT r.ord, ins.id FROM ins JOIN r ON ins.job_name = r.job \
             AND ins.fence = r.fence AND ins.instance_id = r.instance"
        );
        let runs_ended = format!(
            "UPDATE {runs} AS t SET \
             ended_at = GREATEST(LEAST(COALESCE(r.ended, {NOW_MS}), {NOW_MS}), t.started_at), \
             outcome = r.outcome, error_text = r.error, \
             cancel_requested = r.cancel_requested, logs = r.logs \
             FROM unnest($1::int8[], $2::text[], $3::text[], $4::bool[], $5::text[], \
             $6::timestamp[]) AS r(id, outcome, error, cancel_requested, logs, ended) \
             WHERE t.id = r.id"
        );
        HistoryBatchStatements {
            runs_started,
            runs_ended,
        }
    }
}
