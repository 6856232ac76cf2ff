//! Batches on SQLite, as `lock-provider-sqlite` decides them: many acquires (or releases) on
//! one pooled connection and in one write transaction (one commit), each request decided by
//! exactly the statements that decide it alone. Losers settle on a plain read first, without
//! the write lock, as alone. SQLite has one writer per database, so batches cannot deadlock;
//! the requests still go in name order, like every provider's.

use std::time::Duration;

use chrono::Utc;
use lock_core::{AcquireOutcome, Lease, LockError, LockRequest, Refusal, RefusalReason};
use lock_sql::sql::sqlite::slot_text;
use lock_sql::{at_least_millis, fence_to_sql};

use super::SqliteBackend;

impl SqliteBackend {
    /// Decides `requests` (at least two, names distinct and valid); one outcome per request,
    /// in the order given.
    pub(crate) async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        let label = requests.first().map_or("", |r| &*r.name);
        let now = Utc::now();
        let mut outcomes: Vec<Option<AcquireOutcome>> = vec![None; requests.len()];
        let mut asked = Vec::with_capacity(requests.len());
        for (at, request) in requests.iter().enumerate() {
            let slot = request.slot.map(|s| slot_text(s.instant())).transpose()?;
            // SQLite's clock is this host's: as alone, a slot too far ahead is refused without
            // a statement.
            if request.slot_too_far_ahead(now) {
                outcomes[at] = Some(AcquireOutcome::Refused(Refusal::slot_in_future(now)));
                continue;
            }
            asked.push((at, request, slot));
        }
        asked.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        let run = async {
            let mut conn = self.pool.acquire().await?;
            let mut candidates = Vec::with_capacity(asked.len());
            for (at, request, slot) in asked {
                let seen = self
                    .refusal(&mut conn, &request.name, slot.as_deref())
                    .await?;
                match seen.filter(|r| r.reason != RefusalReason::Unknown) {
                    Some(refusal) => outcomes[at] = Some(AcquireOutcome::Refused(refusal)),
                    None => candidates.push((at, request, slot)),
                }
            }
            if candidates.is_empty() {
                return Ok(());
            }
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            for (at, request, slot) in candidates {
                outcomes[at] = Some(self.decide(&mut tx, request, slot.as_deref()).await?);
            }
            tx.commit().await
        };
        run.await.map_err(|e| self.error("acquire", label, e))?;
        outcomes
            .into_iter()
            .zip(requests)
            .map(|(outcome, request)| {
                outcome.ok_or_else(|| {
                    LockError::provider(
                        "acquire",
                        &*request.name,
                        self.describe(),
                        "the batch decided nothing for this name",
                    )
                })
            })
            .collect()
    }

    /// Releases `leases` in one write transaction: `true` for each that was still the
    /// holder's.
    pub(crate) async fn release_batch(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Result<Vec<bool>, LockError> {
        let mut order: Vec<usize> = (0..leases.len()).collect();
        order.sort_by(|&a, &b| leases[a].0.name().cmp(leases[b].0.name()));
        let label = leases.first().map_or("", |(l, _)| l.name());
        let run = async {
            let mut released = vec![false; leases.len()];
            let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
            for at in order {
                let (lease, at_least) = &leases[at];
                let done = self
                    .query(&self.statements.release)
                    .bind(lease.name().to_owned())
                    .bind(lease.locked_by().to_owned())
                    .bind(fence_to_sql(lease))
                    .bind(at_least_millis(*at_least))
                    .execute(&mut *tx)
                    .await?;
                released[at] = done.rows_affected() == 1;
            }
            tx.commit().await?;
            Ok::<_, sqlx::Error>(released)
        };
        run.await.map_err(|e| self.error("release", label, e))
    }
}
