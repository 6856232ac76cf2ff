//! Batches on MySQL and MariaDB: the kit's text query
//! ([`Statements::acquire_batch`](lock_sql::sql::mysql::Statements::acquire_batch), the very
//! text `lock-provider-mysql` sends): `START TRANSACTION`, the single acquire (or release)
//! statement of each request with its parameters as literals, in name order, `COMMIT`, in one
//! round trip. Each request is decided by exactly the statement that decides it alone, and its
//! outcome read from that statement's OK packet as alone; name order makes two instances'
//! batches lock their rows in one order, so they cannot deadlock.

use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt;
use lock_core::{AcquireOutcome, Lease, LockError, LockRequest};
use lock_sql::sql::mysql::{BATCH_EXTRA_PACKETS, Statements};
use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, MySql};

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
    /// Sends `text` and returns `(last_insert_id, affected_rows)` of each statement's OK
    /// packet. An error stops the text at its statement with the transaction open: it is
    /// rolled back, so that no row lock outlives the call.
    async fn ok_packets(&mut self, text: String) -> Result<Vec<(u64, u64)>, sqlx::Error> {
        let sent = async {
            let mut results = sqlx::raw_sql(AssertSqlSafe(text)).execute_many(&mut *self.conn);
            let mut packets = Vec::new();
            while let Some(done) = results.try_next().await? {
                packets.push((done.last_insert_id(), done.rows_affected()));
            }
            Ok(packets)
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
        let (packets, statements) = self
            .send_batch("acquire", label, |s| s.acquire_batch(&sorted))
            .await?;
        if packets.len() != requests.len() + BATCH_EXTRA_PACKETS {
            return Err(self.unexpected_batch("acquire", label, packets.len(), requests.len()));
        }
        let mut outcomes: Vec<Option<AcquireOutcome>> = vec![None; requests.len()];
        for (k, &at) in order.iter().enumerate() {
            // Packet 0 is `START TRANSACTION`'s.
            let (id, affected) = packets[k + 1];
            let request = &requests[at];
            // Decoded with the statements that ran: the cached ones may change meanwhile.
            let outcome = statements
                .acquire_outcome(request, id, affected)
                .ok_or_else(|| {
                    LockError::provider(
                        "acquire",
                        &*request.name,
                        self.describe(),
                        format!(
                            "unexpected answer to a batched acquire statement (last_insert_id \
                             {id}, affected rows {affected}); the lock was not taken"
                        ),
                    )
                })?;
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
        let (packets, _) = self
            .send_batch("release", label, |s| s.release_batch(&sorted))
            .await?;
        if packets.len() != leases.len() + BATCH_EXTRA_PACKETS {
            return Err(self.unexpected_batch("release", label, packets.len(), leases.len()));
        }
        let mut released = vec![false; leases.len()];
        for (k, &at) in order.iter().enumerate() {
            // `last_insert_id` 1: the row was still the lease's.
            released[at] = packets[k + 1].0 == 1;
        }
        Ok(released)
    }

    /// Sends the text `text` builds from the current statements on a connection of its own,
    /// again on a fresh connection when the connection died (see [`RETRIES`]: a batch that did
    /// commit makes the retry see its rows held, as a single acquire's retry does). Returns
    /// the OK packets and the statements the text was built from.
    async fn send_batch(
        &self,
        operation: &'static str,
        label: &str,
        text: impl Fn(&Statements) -> String,
    ) -> Result<(Vec<(u64, u64)>, Arc<Statements>), LockError> {
        let mut retries = 0;
        loop {
            let statements = self.statements(operation, label).await?;
            let attempt = async {
                let conn = self.pool.acquire().await?;
                let mut conn = BatchConnection { conn, ended: false };
                conn.ok_packets(text(&statements)).await
            }
            .await;
            match attempt {
                Ok(packets) => return Ok((packets, statements)),
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
        packets: usize,
        requests: usize,
    ) -> LockError {
        LockError::provider(
            operation,
            label,
            self.describe(),
            format!(
                "a batch of {requests} answered {packets} OK packets, not {}",
                requests + BATCH_EXTRA_PACKETS
            ),
        )
    }
}
