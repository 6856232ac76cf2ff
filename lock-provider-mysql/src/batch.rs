//! Batches: many acquires (or releases) in one text query and one transaction, decided by a
//! few set-based statements; the text and the reading of its rows are the provider kit's
//! ([`lock_sql::sql::mysql`], `Statements::acquire_batch`).

use std::time::Duration;

use lock_core::{AcquireOutcome, Lease, LockError, LockRequest, validate_lock_name};
use lock_sql::sql::mysql::UnexpectedBatchAnswer;
use mysql_async::Conn;
use mysql_async::prelude::Queryable;

use crate::MySqlLockProvider;

/// The most requests one batch carries: its text stays within a few hundred kilobytes, well
/// within the default `max_allowed_packet` (16 MB on MariaDB, 64 MB on MySQL).
pub(crate) const MAX_BATCH: usize = 1000;

/// Sends `text` and returns the rows `(ordinal, value)` of its one `SELECT`. After an error
/// the transaction is rolled back, so that no row lock outlives the call on a pooled
/// connection.
async fn answer_rows(conn: &mut Conn, text: String) -> Result<Vec<(i64, i64)>, mysql_async::Error> {
    let sent = async {
        let mut result = conn.query_iter(text).await?;
        let mut rows = Vec::new();
        // One result per statement; only the SELECT's has rows.
        while !result.is_empty() {
            rows.extend(result.collect::<(i64, i64)>().await?);
        }
        // A statement that failed ends the text and leaves `is_empty()` true with its error
        // still pending: without this the batch would pass for done, its transaction open.
        result.drop_result().await?;
        Ok::<_, mysql_async::Error>(rows)
    }
    .await;
    if sent.is_err() {
        let _ = conn.query_drop("ROLLBACK").await;
    }
    sent
}

impl MySqlLockProvider {
    pub(crate) async fn acquire_batch(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        for request in requests {
            validate_lock_name(&request.name)?;
        }
        // Name order: every batch locks its rows in the same order.
        let mut order: Vec<usize> = (0..requests.len()).collect();
        order.sort_by(|&a, &b| requests[a].name.cmp(&requests[b].name));
        let label = requests.first().map_or("", |r| &*r.name);
        let sorted: Vec<&LockRequest> = order.iter().map(|&i| &requests[i]).collect();
        let (rows, statements) = self
            .session
            .run("acquire", label, |mut conn, statements| {
                let text = statements.acquire_batch(&sorted);
                Box::pin(async move {
                    let rows = answer_rows(&mut conn, text).await?;
                    Ok((rows, statements))
                })
            })
            .await?;
        // Decoded with the statements that ran: the cached ones may change meanwhile.
        let decided = statements
            .acquire_batch_outcomes(&sorted, &rows)
            .map_err(|e| self.unexpected_batch("acquire", label, e))?;
        let mut outcomes: Vec<Option<AcquireOutcome>> = vec![None; requests.len()];
        for (outcome, &at) in decided.into_iter().zip(&order) {
            outcomes[at] = Some(outcome);
        }
        Ok(outcomes.into_iter().flatten().collect())
    }

    pub(crate) async fn release_batch(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Result<Vec<bool>, LockError> {
        let mut order: Vec<usize> = (0..leases.len()).collect();
        order.sort_by(|&a, &b| leases[a].0.name().cmp(leases[b].0.name()));
        let label = leases.first().map_or("", |(l, _)| l.name());
        let sorted: Vec<(&Lease, Duration)> =
            order.iter().map(|&i| (&leases[i].0, leases[i].1)).collect();
        let (rows, statements) = self
            .session
            .run("release", label, |mut conn, statements| {
                let text = statements.release_batch(&sorted);
                Box::pin(async move {
                    let rows = answer_rows(&mut conn, text).await?;
                    Ok((rows, statements))
                })
            })
            .await?;
        let decided = statements
            .release_batch_outcomes(leases.len(), &rows)
            .map_err(|e| self.unexpected_batch("release", label, e))?;
        let mut released = vec![false; leases.len()];
        for (was_held, &at) in decided.into_iter().zip(&order) {
            released[at] = was_held;
        }
        Ok(released)
    }

    fn unexpected_batch(
        &self,
        operation: &'static str,
        label: &str,
        error: UnexpectedBatchAnswer,
    ) -> LockError {
        LockError::provider(
            operation,
            label,
            self.session.describe(),
            format!(
                "unexpected answer to a batched {operation}: {error}; no lock was taken as granted"
            ),
        )
    }
}
