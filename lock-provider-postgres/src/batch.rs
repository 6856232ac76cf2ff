//! Batches: many acquires (or releases) in one statement over arrays
//! ([`LockProvider::acquire_many`](lock_core::LockProvider::acquire_many)); the SQL text is the
//! provider kit's ([`lock_sql::sql::postgres::LockStatements::acquire_many`]).

use chrono::NaiveDateTime;
use lock_core::{
    AcquireOutcome, Lease, LockError, LockRequest, Refusal, RefusalReason, validate_lock_name,
};
use lock_sql::{at_least_millis, fence_from_sql, fence_to_sql, lease_millis};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::PostgresLockProvider;
use crate::session::Plan;
use crate::statements as sql;

/// The most requests one batch statement carries: 2,500 names, about a hundred kilobytes of
/// array parameters (no bind-parameter limit applies to arrays), one plan. Fewer, larger
/// statements cost PostgreSQL less per row: 4 instances x 2,500 every-second jobs each (the
/// `burst` bench's 4 x 10,000 shared) decide each kind of a second's work in one statement per
/// instance instead of three, and in three interleaved runs against 1,000 the fire lag's p99
/// fell from 312-494 ms to 174-246 ms and the commits from 73-93 to 41-51 a second, with no
/// change at 4 x 1,000 or 8 x 1,250 (BENCHMARKS.md).
pub(crate) const MAX_BATCH: usize = 2500;

impl PostgresLockProvider {
    /// Decides `requests` in up to three statements and tells each outcome to `decided` as
    /// soon as its statement has answered: the first statement's grants and refusals before
    /// the second waits for the rows other transactions held (their bodies need not wait for
    /// those transactions), then the waited-for rows, then the created ones.
    pub(crate) async fn acquire_batch(
        &self,
        requests: &[LockRequest],
        decided: &(dyn Fn(usize, AcquireOutcome) + Send + Sync),
    ) -> Result<(), LockError> {
        for request in requests {
            validate_lock_name(&request.name)?;
        }
        let mut outcomes: Vec<Option<AcquireOutcome>> = vec![None; requests.len()];
        let mut missing = Vec::new();
        let tell = |outcomes: &mut [Option<AcquireOutcome>]| {
            for (at, outcome) in outcomes.iter_mut().enumerate() {
                if let Some(outcome) = outcome.take() {
                    decided(at, outcome);
                }
            }
        };
        // First statement: decides every row it can lock at once (SKIP LOCKED) and commits;
        // the rows another transaction held are decided by the second, waiting statement, in a
        // transaction of its own (see `LockStatements::acquire_many`).
        let skipped = self
            .decide(requests, false, &mut outcomes, &mut missing, None)
            .await?;
        tell(&mut outcomes);
        if !skipped.is_empty() {
            let subset: Vec<LockRequest> = skipped.iter().map(|&at| requests[at].clone()).collect();
            self.decide(&subset, true, &mut outcomes, &mut missing, Some(&skipped))
                .await?;
            tell(&mut outcomes);
        }
        if !missing.is_empty() {
            // No row for these names (their first fire, or deleted by hand): created in one
            // more statement, as `acquire` does for one name.
            missing.sort_unstable();
            let subset: Vec<LockRequest> = missing.iter().map(|&at| requests[at].clone()).collect();
            for (at, outcome) in missing.iter().zip(self.create_batch(&subset).await?) {
                decided(*at, outcome);
            }
        }
        Ok(())
    }

    /// Runs `acquire_many` (or, with `wait`, `acquire_many_wait`) over `requests` and writes
    /// each decided outcome at its place in `outcomes` (`places[i]` for the i-th request, or
    /// `i` itself without `places`); the places of missing rows go to `missing`. Returns the
    /// places of the rows the statement skipped.
    async fn decide(
        &self,
        requests: &[LockRequest],
        wait: bool,
        outcomes: &mut [Option<AcquireOutcome>],
        missing: &mut Vec<usize>,
        places: Option<&[usize]>,
    ) -> Result<Vec<usize>, LockError> {
        let label = requests.first().map_or("", |r| &*r.name);
        let columns = Columns::of(requests);
        let params = columns.params();
        let rows: Vec<Row> = self
            .session
            .run_planned(
                "acquire",
                label,
                if wait {
                    |s: &sql::Statements| &s.acquire_many_wait
                } else {
                    |s: &sql::Statements| &s.acquire_many
                },
                sql::ACQUIRE_MANY_TYPES,
                &params,
                Plan::EachExecution,
            )
            .await?;
        let mut skipped = Vec::new();
        for row in &rows {
            // What one row says: decided, missing, or skipped (to be decided by the waiting
            // statement).
            enum Said {
                Decided(AcquireOutcome),
                Missing,
                Skipped,
            }
            let parse = || -> Result<(usize, Option<Said>), tokio_postgres::Error> {
                let at = index(row.try_get::<_, i64>(0)?);
                let Some(request) = requests.get(at) else {
                    return Ok((at, None));
                };
                if let Some(fence) = row.try_get::<_, Option<i64>>(1)? {
                    let lease = Lease::granted(request, fence_from_sql(fence));
                    return Ok((at, Some(Said::Decided(AcquireOutcome::Acquired(lease)))));
                }
                if !row.try_get::<_, bool>(6)? {
                    return Ok((at, Some(Said::Missing)));
                }
                if row.try_get::<_, bool>(8)? {
                    return Ok((at, Some(Said::Skipped)));
                }
                let db_now = row.try_get::<_, NaiveDateTime>(7)?.and_utc();
                let refusal = lock_sql::sql::postgres::refusal(
                    request,
                    row.try_get(2)?,
                    row.try_get(3)?,
                    row.try_get(4)?,
                    row.try_get(5)?,
                    db_now,
                    row.try_get(9)?,
                );
                Ok((at, Some(Said::Decided(AcquireOutcome::Refused(refusal)))))
            };
            let (at, said) = parse().map_err(|e| self.session.row_error("acquire", label, e))?;
            let Some(said) = said else { continue };
            let place = match places {
                Some(places) => places[at],
                None => at,
            };
            match said {
                Said::Decided(outcome) => outcomes[place] = Some(outcome),
                Said::Missing => missing.push(place),
                Said::Skipped => skipped.push(place),
            }
        }
        Ok(skipped)
    }

    async fn create_batch(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        let label = requests.first().map_or("", |r| &*r.name);
        let columns = Columns::of(requests);
        let params = columns.params();
        let rows: Vec<Row> = self
            .session
            .run_planned(
                "acquire",
                label,
                |s| &s.create_many,
                sql::ACQUIRE_MANY_TYPES,
                &params,
                Plan::EachExecution,
            )
            .await?;
        let mut outcomes: Vec<Option<AcquireOutcome>> = vec![None; requests.len()];
        for row in &rows {
            type Created = (usize, Option<i64>, NaiveDateTime, bool);
            let parse = || -> Result<Created, tokio_postgres::Error> {
                Ok((
                    index(row.try_get(0)?),
                    row.try_get(1)?,
                    row.try_get(2)?,
                    row.try_get(3)?,
                ))
            };
            let (at, granted, db_now, too_late) =
                parse().map_err(|e| self.session.row_error("acquire", label, e))?;
            let Some(request) = requests.get(at) else {
                continue;
            };
            let db_now = db_now.and_utc();
            outcomes[at] = Some(match granted {
                Some(fence) => {
                    AcquireOutcome::Acquired(Lease::granted(request, fence_from_sql(fence)))
                }
                None if too_late => AcquireOutcome::Refused(Refusal::too_late(db_now)),
                None if request.slot_too_far_ahead(db_now) => {
                    AcquireOutcome::Refused(Refusal::slot_in_future(db_now))
                }
                // Another instance created it between our two statements: it holds the lock.
                None => AcquireOutcome::Refused(Refusal::new(RefusalReason::Held)),
            });
        }
        outcomes
            .into_iter()
            .map(|o| {
                o.ok_or_else(|| {
                    self.session.unexpected(
                        "acquire",
                        label,
                        "the create statement returned no row",
                    )
                })
            })
            .collect()
    }

    pub(crate) async fn release_batch(
        &self,
        leases: &[(Lease, std::time::Duration)],
    ) -> Result<Vec<bool>, LockError> {
        let label = leases.first().map_or("", |(l, _)| l.name());
        let names: Vec<&str> = leases.iter().map(|(l, _)| l.name()).collect();
        let owners: Vec<&str> = leases.iter().map(|(l, _)| l.locked_by()).collect();
        let fences: Vec<i64> = leases.iter().map(|(l, _)| fence_to_sql(l)).collect();
        let at_least: Vec<i64> = leases.iter().map(|(_, d)| at_least_millis(*d)).collect();
        let params: [&(dyn ToSql + Sync); 4] = [&names, &owners, &fences, &at_least];
        let rows: Vec<Row> = self
            .session
            .run_planned(
                "release",
                label,
                |s| &s.release_many,
                sql::RELEASE_MANY_TYPES,
                &params,
                Plan::EachExecution,
            )
            .await?;
        let mut released = vec![false; leases.len()];
        for row in &rows {
            let at = index(
                row.try_get::<_, i64>(0)
                    .map_err(|e| self.session.row_error("release", label, e))?,
            );
            if let Some(done) = released.get_mut(at) {
                *done = true;
            }
        }
        Ok(released)
    }
}

/// The 0-based index of a 1-based `WITH ORDINALITY` number.
fn index(ord: i64) -> usize {
    usize::try_from(ord.saturating_sub(1)).unwrap_or(usize::MAX)
}

/// A batch's requests as the six arrays the batch statements take (`$1`..`$6`).
struct Columns<'a> {
    names: Vec<&'a str>,
    at_most: Vec<i64>,
    owners: Vec<&'a str>,
    slots: Vec<Option<NaiveDateTime>>,
    leads: Vec<i64>,
    give_up_at: Vec<Option<NaiveDateTime>>,
}

impl<'a> Columns<'a> {
    fn of(requests: &'a [LockRequest]) -> Self {
        Columns {
            names: requests.iter().map(|r| &*r.name).collect(),
            at_most: requests
                .iter()
                .map(|r| lease_millis(r.lock_at_most_for))
                .collect(),
            owners: requests.iter().map(|r| &*r.locked_by).collect(),
            slots: requests
                .iter()
                .map(|r| r.slot.map(|s| s.instant().naive_utc()))
                .collect(),
            leads: requests
                .iter()
                .map(|r| lease_millis(r.max_slot_lead))
                .collect(),
            give_up_at: requests
                .iter()
                .map(|r| r.give_up_at.map(|at| at.naive_utc()))
                .collect(),
        }
    }

    fn params(&self) -> [&(dyn ToSql + Sync); 6] {
        [
            &self.names,
            &self.at_most,
            &self.owners,
            &self.slots,
            &self.leads,
            &self.give_up_at,
        ]
    }
}
