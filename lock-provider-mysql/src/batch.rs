//! Batches: many acquires (or releases) in one text query and one transaction; the text is the
//! provider kit's ([`lock_sql::sql::mysql`], `Statements::acquire_batch`).

use std::time::Duration;

use lock_core::{AcquireOutcome, Lease, LockError, LockRequest, validate_lock_name};
use lock_sql::sql::mysql::BATCH_EXTRA_PACKETS;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use crate::MySqlLockProvider;

/// The most requests one batch carries: a thousand statements of under a kilobyte each, well
/// within the default `max_allowed_packet` (16 MB on MariaDB, 64 MB on MySQL).
pub(crate) const MAX_BATCH: usize = 1000;

/// Sends `text` and returns `(last_insert_id, affected_rows)` of each statement's OK packet.
/// After an error the transaction is rolled back, so that no row lock outlives the call on a
/// pooled connection.
async fn ok_packets(conn: &mut Conn, text: String) -> Result<Vec<(u64, u64)>, mysql_async::Error> {
    let sent = async {
        let mut result = conn.query_iter(text).await?;
        let mut packets = vec![(result.last_insert_id().unwrap_or(0), result.affected_rows())];
        while !result.is_empty() {
            let _: Vec<Row> = result.collect().await?;
            packets.push((result.last_insert_id().unwrap_or(0), result.affected_rows()));
        }
        Ok::<_, mysql_async::Error>(packets)
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
        let packets = self
            .session
            .run("acquire", label, |mut conn, statements| {
                let sorted: Vec<&LockRequest> = order.iter().map(|&i| &requests[i]).collect();
                Box::pin(async move {
                    let text = statements.acquire_batch(&sorted);
                    let packets = ok_packets(&mut conn, text).await?;
                    Ok((packets, statements))
                })
            })
            .await?;
        let (packets, statements) = packets;
        if packets.len() != requests.len() + BATCH_EXTRA_PACKETS {
            return Err(self.unexpected_batch("acquire", label, packets.len(), requests.len()));
        }
        let mut outcomes: Vec<Option<AcquireOutcome>> = vec![None; requests.len()];
        for (k, &at) in order.iter().enumerate() {
            let (id, affected) = packets[k + 1];
            let request = &requests[at];
            outcomes[at] = Some(
                statements
                    .acquire_outcome(request, id, affected)
                    .ok_or_else(|| {
                        LockError::provider(
                            "acquire",
                            &*request.name,
                            self.session.describe(),
                            format!(
                                "unexpected answer to a batched acquire statement (last_insert_id \
                             {id}, affected rows {affected}); the lock was not taken"
                            ),
                        )
                    })?,
            );
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
        let packets = self
            .session
            .run("release", label, |mut conn, statements| {
                let sorted: Vec<(&Lease, Duration)> =
                    order.iter().map(|&i| (&leases[i].0, leases[i].1)).collect();
                Box::pin(async move {
                    let text = statements.release_batch(&sorted);
                    ok_packets(&mut conn, text).await
                })
            })
            .await?;
        if packets.len() != leases.len() + BATCH_EXTRA_PACKETS {
            return Err(self.unexpected_batch("release", label, packets.len(), leases.len()));
        }
        let mut released = vec![false; leases.len()];
        for (k, &at) in order.iter().enumerate() {
            released[at] = packets[k + 1].0 == 1;
        }
        Ok(released)
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
            self.session.describe(),
            format!(
                "a batch of {requests} answered {packets} OK packets, not {}",
                requests + BATCH_EXTRA_PACKETS
            ),
        )
    }
}
