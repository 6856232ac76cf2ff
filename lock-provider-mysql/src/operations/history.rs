//! The run history in batches: the starts (or ends) of the runs one instance coalesced, as one
//! transaction of single-row statements in one text query (the kit's
//! [`HistoryBatchStatements`]), each start's id read from its `INSERT`'s OK packet.
//!
//! Decisions, and why:
//!
//! - **A failed batch is rolled back before the connection goes back to the pool**: the server
//!   stops at the failing statement, inside the transaction the text started, and the pool does
//!   not reset connections (`session.rs`), so without the `ROLLBACK` the next user of the
//!   connection would write into that transaction.
//! - **A call cut off midway closes its connection** (a deadline drops the future while the
//!   server may still be inside the transaction): closing it is the one way to be sure the
//!   transaction ends without committing half a batch that failed.

use lock_cluster::{RunEnd, RunStart};
use lock_core::LockError;
use lock_sql::sql::mysql::HistoryBatchStatements;
use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Row};

use super::MySqlOperations;

/// The most rows one history call writes: as for lock batches (and PostgreSQL's history).
pub(super) const MAX_HISTORY_BATCH: usize = 1000;

/// A connection while a batch's texts run; dropped before [`finish`](Self::finish) (the call
/// was cut off), it is closed instead of going back to the pool.
struct InTransaction(Option<Conn>);

impl InTransaction {
    fn conn(&mut self) -> &mut Conn {
        self.0
            .as_mut()
            .expect("the connection until the batch finishes")
    }

    /// The batch has finished (committed, or rolled back): the connection may be reused.
    fn finish(mut self) {
        drop(self.0.take());
    }
}

impl Drop for InTransaction {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                let _ = conn.disconnect().await;
            });
        }
    }
}

/// Sends `texts` in order on `conn` and returns the `last_insert_id` of every statement's OK
/// packet, in order. After an error the transaction is rolled back.
async fn send(conn: Conn, texts: Vec<String>) -> Result<Vec<Option<u64>>, mysql_async::Error> {
    let mut conn = InTransaction(Some(conn));
    let sent = async {
        let mut packets = Vec::new();
        for text in texts {
            let mut result = conn.conn().query_iter(text).await?;
            loop {
                packets.push(result.last_insert_id());
                if result.is_empty() {
                    break;
                }
                // Reads the next statement's answer (none of them has rows).
                result.collect::<Row>().await?;
            }
            // A statement that failed ends the text and leaves `is_empty()` true with its
            // error still pending: this returns it.
            result.drop_result().await?;
        }
        Ok::<_, mysql_async::Error>(packets)
    }
    .await;
    if sent.is_err() && conn.conn().query_drop("ROLLBACK").await.is_err() {
        // Closed when `conn` drops.
        return sent;
    }
    conn.finish();
    sent
}

impl MySqlOperations {
    pub(super) async fn start_batch(
        &self,
        sql: &HistoryBatchStatements,
        runs: &[RunStart],
    ) -> Result<Vec<i64>, LockError> {
        let texts = sql.runs_started(runs);
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let label = runs.first().map_or("", |r| r.job.as_str());
        let conn = self.conn("history").await?;
        let packets = send(conn, texts)
            .await
            .map_err(|e| self.error("history", label, e))?;
        sql.started_ids(runs.len(), &packets).map_err(|e| {
            LockError::provider(
                "history",
                label,
                self.describe(),
                format!("unexpected answer to a batched start of runs: {e}"),
            )
        })
    }

    pub(super) async fn end_batch(
        &self,
        sql: &HistoryBatchStatements,
        ends: &[RunEnd],
    ) -> Result<(), LockError> {
        let texts = sql.runs_ended(ends);
        if texts.is_empty() {
            return Ok(());
        }
        let conn = self.conn("history").await?;
        send(conn, texts)
            .await
            .map(drop)
            .map_err(|e| self.error("history", "", e))
    }
}
