//! The run history in batches: the starts (or ends) of the runs one instance coalesced, in one
//! statement over arrays (the kit's [`HistoryBatchStatements`]).

use chrono::{DateTime, NaiveDateTime, Utc};
use lock_cluster::{RunEnd, RunStart};
use lock_core::LockError;
use lock_sql::sql::postgres::HistoryBatchStatements;
use tokio_postgres::types::Type;

use super::{PgOperations, naive, slot};

/// The most rows one history statement carries, as for lock batches
/// ([`MAX_BATCH`](crate::batch::MAX_BATCH)).
pub(super) const MAX_HISTORY_BATCH: usize = crate::batch::MAX_BATCH;

impl PgOperations {
    pub(super) async fn start_batch(
        &self,
        sql: &HistoryBatchStatements,
        runs: &[RunStart],
        at: Option<&[DateTime<Utc>]>,
    ) -> Result<Vec<i64>, LockError> {
        let jobs: Vec<&str> = runs.iter().map(|r| r.job.as_str()).collect();
        let slots: Vec<_> = runs.iter().map(|r| r.slot.map(naive)).collect();
        let kinds: Vec<&str> = runs.iter().map(|r| r.fire_kind.as_str()).collect();
        let instances: Vec<&str> = runs.iter().map(|r| r.instance_id.as_str()).collect();
        let fences: Vec<i64> = runs
            .iter()
            .map(|r| i64::try_from(r.fence).unwrap_or(-1))
            .collect();
        let attempts: Vec<i32> = runs
            .iter()
            .map(|r| i32::try_from(r.attempt).unwrap_or(i32::MAX))
            .collect();
        let params: Vec<Option<String>> = runs
            .iter()
            .map(|r| lock_sql::operations_sql::stored_params(&r.params))
            .collect();
        let started = times(at, runs.len());
        let label = jobs.first().copied().unwrap_or("");
        let rows = self
            .query(
                "history",
                label,
                &sql.runs_started,
                &[
                    (&jobs, Type::TEXT_ARRAY),
                    (&slots, Type::TIMESTAMP_ARRAY),
                    (&kinds, Type::TEXT_ARRAY),
                    (&instances, Type::TEXT_ARRAY),
                    (&fences, Type::INT8_ARRAY),
                    (&attempts, Type::INT4_ARRAY),
                    (&params, Type::TEXT_ARRAY),
                    (&started, Type::TIMESTAMP_ARRAY),
                ],
            )
            .await?;
        let mut ids: Vec<Option<i64>> = vec![None; runs.len()];
        for row in &rows {
            let (ord, id): (i64, i64) =
                self.decode("history", || Ok((row.try_get(0)?, row.try_get(1)?)))?;
            if let Some(place) = usize::try_from(ord - 1).ok().and_then(|at| ids.get_mut(at)) {
                *place = Some(id);
            }
        }
        ids.into_iter()
            .map(|id| {
                id.ok_or_else(|| {
                    LockError::provider(
                        "history",
                        label,
                        self.describe(),
                        "the batched start of runs returned no id for a run",
                    )
                })
            })
            .collect()
    }

    pub(super) async fn end_batch(
        &self,
        sql: &HistoryBatchStatements,
        ends: &[RunEnd],
        at: Option<&[DateTime<Utc>]>,
    ) -> Result<(), LockError> {
        let ids: Vec<i64> = ends.iter().map(|e| e.id).collect();
        let outcomes: Vec<&str> = ends.iter().map(|e| e.outcome.as_str()).collect();
        let errors: Vec<Option<&str>> = ends.iter().map(|e| e.error.as_deref()).collect();
        let cancels: Vec<bool> = ends.iter().map(|e| e.cancel_requested).collect();
        let logs: Vec<Option<&str>> = ends
            .iter()
            .map(|e| e.logs.as_ref().map(|l| l.as_stored()))
            .collect();
        self.execute(
            "history",
            "",
            &sql.runs_ended,
            &[
                (&ids, Type::INT8_ARRAY),
                (&outcomes, Type::TEXT_ARRAY),
                (&errors, Type::TEXT_ARRAY),
                (&cancels, Type::BOOL_ARRAY),
                (&logs, Type::TEXT_ARRAY),
                (&times(at, ends.len()), Type::TIMESTAMP_ARRAY),
            ],
        )
        .await
        .map(drop)
    }
}

/// The times given for `len` rows, to the millisecond as the table keeps them; NULL (the
/// server's now) for each when none were given.
fn times(at: Option<&[DateTime<Utc>]>, len: usize) -> Vec<Option<NaiveDateTime>> {
    match at {
        Some(at) => at.iter().map(|&t| Some(slot(t))).collect(),
        None => vec![None; len],
    }
}
