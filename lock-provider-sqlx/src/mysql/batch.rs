//! Batches on MySQL and MariaDB: the kit's text query
//! ([`Statements::acquire_batch`](lock_sql::sql::mysql::Statements::acquire_batch), the very
//! text `lock-provider-mysql` sends), a few set-based statements in one round trip and one
//! transaction: the rows locked in name order, then each request decided by the single acquire
//! statement's own expression, its outcome read from the one `SELECT`'s rows. Name order makes
//! two instances' batches lock their rows in one order, so they cannot deadlock.

use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt;
use lock_core::{AcquireOutcome, Lease, LockError, LockRequest};
use lock_sql::sql::mysql::{Statements, UnexpectedBatchAnswer};
use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, Either, MySql, Row};

use super::{MySqlBackend, RETRIES, connection_lost};

/// A pooled connection carrying a batch's transaction: closed when dropped (which ends the
/// transaction on the server) unless the batch ended on it, committed or rolled back.
///
/// A batch cut off mid-way (its future dropped at the caller's timeout, or a `ROLLBACK` that
/// failed) may leave `START TRANSACTION` open with its row locks; back in the pool, the
/// connection would run the next user's statements inside it. sqlx's own transactions queue a
/// rollback when dropped, but it does not know about one begun in a text query.
struct BatchConnection {
    conn: PoolConnection<MySql>,
    ended: bool,
}

impl Drop for BatchConnection {
    fn drop(&mut self) {
        if !self.ended {
            self.conn.close_on_drop();
        }
    }
}

impl BatchConnection {
    /// Sends `text` and returns the rows `(ordinal, value)` of its one `SELECT`. An error stops
    /// the text at its statement with the transaction open: it is rolled back, so that no row
    /// lock outlives the call.
    async fn answer_rows(&mut self, text: String) -> Result<Vec<(i64, i64)>, sqlx::Error> {
        let sent = async {
            let mut results = sqlx::raw_sql(AssertSqlSafe(text)).fetch_many(&mut *self.conn);
            let mut rows = Vec::new();
            while let Some(result) = results.try_next().await? {
                if let Either::Right(row) = result {
                    rows.push((row.try_get(0)?, row.try_get(1)?));
                }
            }
            Ok(rows)
        }
        .await;
        self.ended = match &sent {
            Ok(_) => true,
            Err(_) => sqlx::raw_sql("ROLLBACK")
                .execute(&mut *self.conn)
                .await
                .is_ok(),
        };
        sent
    }
}

impl MySqlBackend {
    /// Decides `requests` (at least two, names distinct and valid) in one text query and one
    /// transaction; one outcome per request, in the order given.
    pub(crate) async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        // Name order (bytes): every batch locks its rows in the same order.
        let mut order: Vec<usize> = (0..requests.len()).collect();
        order.sort_by(|&a, &b| requests[a].name.cmp(&requests[b].name));
        let sorted: Vec<&LockRequest> = order.iter().map(|&at| &requests[at]).collect();
        let label = requests.first().map_or("", |r| &*r.name);
        let (rows, statements) = self
            .send_batch("acquire", label, |s| s.acquire_batch(&sorted))
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

    /// Releases `leases` in one text query and one transaction: `true` for each that was still
    /// the holder's.
    pub(crate) async fn release_batch(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Result<Vec<bool>, LockError> {
        let mut order: Vec<usize> = (0..leases.len()).collect();
        order.sort_by(|&a, &b| leases[a].0.name().cmp(leases[b].0.name()));
        let sorted: Vec<(&Lease, Duration)> = order
            .iter()
            .map(|&at| (&leases[at].0, leases[at].1))
            .collect();
        let label = leases.first().map_or("", |(l, _)| l.name());
        let (rows, statements) = self
            .send_batch("release", label, |s| s.release_batch(&sorted))
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

    /// Sends the text `text` builds from the current statements on a connection of its own,
    /// again on a fresh connection when the connection died (see [`RETRIES`]: a batch that did
    /// commit makes the retry see its rows held, as a single acquire's retry does). Returns
    /// the rows of its `SELECT` and the statements the text was built from.
    async fn send_batch(
        &self,
        operation: &'static str,
        label: &str,
        text: impl Fn(&Statements) -> String,
    ) -> Result<(Vec<(i64, i64)>, Arc<Statements>), LockError> {
        let mut retries = 0;
        loop {
            let statements = self.statements(operation, label).await?;
            let attempt = async {
                let conn = self.pool.acquire().await?;
                let mut conn = BatchConnection { conn, ended: false };
                conn.answer_rows(text(&statements)).await
            }
            .await;
            match attempt {
                Ok(rows) => return Ok((rows, statements)),
                Err(e) if connection_lost(&e) && retries < RETRIES => {
                    retries += 1;
                    tracing::debug!(operation, lock = label, error = %e, "mysql (sqlx): connection lost, retrying the batch");
                }
                Err(e) => return Err(self.error(operation, label, e)),
            }
        }
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
            self.describe(),
            format!(
                "unexpected answer to a batched {operation}: {error}; no lock was taken as granted"
            ),
        )
    }
}
