//! Batches: many acquires (or releases) in one hop to the blocking pool and one write
//! transaction (one `fsync`), each request decided by exactly the statements that decide it
//! alone. SQLite has one writer per database, so batches cannot deadlock; the requests still go
//! in name order, like every provider's.

use std::time::Duration;

use chrono::Utc;
use lock_core::{
    AcquireOutcome, Lease, LockError, LockRequest, Refusal, RefusalReason, validate_lock_name,
};
use lock_sql::{at_least_millis, fence_from_sql, fence_to_sql, lease_millis};
use rusqlite::{OptionalExtension, params};

use crate::SqliteLockProvider;
use crate::session::{in_immediate_transaction, relaxed_commit};
use crate::statements::{instant_text, read_refusal, slot_text};

/// The most requests one batch carries.
pub(crate) const MAX_BATCH: usize = 1000;

impl SqliteLockProvider {
    pub(crate) async fn acquire_batch(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        let now = Utc::now();
        let mut outcomes: Vec<Option<AcquireOutcome>> = vec![None; requests.len()];
        let mut asked = Vec::with_capacity(requests.len());
        for (at, request) in requests.iter().enumerate() {
            validate_lock_name(&request.name)?;
            let slot = request.slot.map(|s| slot_text(s.instant())).transpose()?;
            // SQLite's clock is this host's: as alone, a slot too far ahead is refused without
            // a statement.
            if request.slot_too_far_ahead(now) {
                outcomes[at] = Some(AcquireOutcome::Refused(Refusal::slot_in_future(now)));
                continue;
            }
            asked.push((at, request.clone(), slot));
        }
        asked.sort_by(|a, b| a.1.name.cmp(&b.1.name));
        let label = requests.first().map_or("", |r| &*r.name);
        let decided = self
            .run("acquire", label, move |connection, sql| {
                let mut decided = Vec::with_capacity(asked.len());
                let mut candidates = Vec::new();
                // Losers settle on a plain read, without the write lock, as alone.
                for (at, request, slot) in asked {
                    let seen = read_refusal(connection, sql, &request.name, slot.as_deref())?;
                    match seen.filter(|r| r.reason != RefusalReason::Unknown) {
                        Some(refusal) => decided.push((at, AcquireOutcome::Refused(refusal))),
                        None => candidates.push((at, request, slot)),
                    }
                }
                if candidates.is_empty() {
                    return Ok(decided);
                }
                in_immediate_transaction(connection, |connection| {
                    for (at, request, slot) in &candidates {
                        let granted: Option<i64> = connection
                            .prepare_cached(&sql.acquire)?
                            .query_row(
                                params![
                                    request.name,
                                    request.locked_by,
                                    lease_millis(request.lock_at_most_for),
                                    slot,
                                    lease_millis(request.max_slot_lead),
                                    request.give_up_at.map(instant_text)
                                ],
                                |row| row.get(0),
                            )
                            .optional()?;
                        let now = Utc::now();
                        let outcome = match granted {
                            Some(fence) => AcquireOutcome::Acquired(Lease::granted(
                                request,
                                fence_from_sql(fence),
                            )),
                            None if request.too_late(now) => {
                                AcquireOutcome::Refused(Refusal::too_late(now))
                            }
                            None => AcquireOutcome::Refused(
                                read_refusal(connection, sql, &request.name, slot.as_deref())?
                                    .unwrap_or_else(|| Refusal::new(RefusalReason::Unknown)),
                            ),
                        };
                        decided.push((*at, outcome));
                    }
                    Ok(decided)
                })
            })
            .await?;
        for (at, outcome) in decided {
            outcomes[at] = Some(outcome);
        }
        Ok(outcomes.into_iter().flatten().collect())
    }

    pub(crate) async fn release_batch(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Result<Vec<bool>, LockError> {
        let mut owned: Vec<(usize, Lease, i64)> = leases
            .iter()
            .enumerate()
            .map(|(at, (lease, at_least))| (at, lease.clone(), at_least_millis(*at_least)))
            .collect();
        owned.sort_by(|a, b| a.1.name().cmp(b.1.name()));
        let count = leases.len();
        let label = leases.first().map_or("", |(l, _)| l.name());
        self.run("release", label, move |connection, sql| {
            relaxed_commit(connection, |connection| {
                in_immediate_transaction(connection, |connection| {
                    let mut released = vec![false; count];
                    for (at, lease, at_least) in &owned {
                        let changed = connection.prepare_cached(&sql.release)?.execute(params![
                            lease.name(),
                            lease.locked_by(),
                            fence_to_sql(lease),
                            at_least
                        ])?;
                        released[*at] = changed == 1;
                    }
                    Ok(released)
                })
            })
        })
        .await
    }
}
