//! Batches on PostgreSQL: the kit's statements over arrays
//! ([`LockStatements::acquire_many`], `acquire_many_wait`, `create_many`, `release_many`), the
//! very text and steps of `lock-provider-postgres`, on the pool.
//!
//! Decisions, and why (the same as the native provider's; the argument for the two statements
//! is in `lock_sql::sql::postgres`'s batch module):
//! - Two autocommitted statements: the first decides every row it can lock at once (`SKIP
//!   LOCKED`) and commits; the rows another transaction held are decided by a second, waiting
//!   one. A batch never waits behind another instance's batch for the rows it could take, and
//!   two batches on overlapping names cannot deadlock.
//! - The first statement's outcomes are told before the second is sent
//!   ([`LockProvider::acquire_many_each`](lock_core::LockProvider::acquire_many_each)): their
//!   bodies do not wait for other instances' transactions.
//! - Sent unnamed ([`Plan::EachExecution`]), so the server plans each batch for its arrays.

use chrono::NaiveDateTime;
use lock_core::{AcquireOutcome, Lease, LockError, LockRequest, Refusal, RefusalReason};
use lock_sql::sql::postgres::{LockStatements, refusal};
use lock_sql::{at_least_millis, fence_from_sql, fence_to_sql, lease_millis};
use sqlx::Row;
use sqlx::postgres::PgRow;

use super::{PgBackend, PgQuery, Plan, Reply, utc};

/// What one row of a batch statement says about its request.
enum Said {
    Decided(AcquireOutcome),
    /// No row for this name: created by `create_many`.
    Missing,
    /// Free in the first statement's snapshot but locked by another transaction: decided by
    /// the waiting statement.
    Skipped,
}

impl PgBackend {
    /// Decides `requests` (at least two, names distinct and valid) in up to three statements
    /// and tells each outcome to `decided` as soon as its statement has answered: the first
    /// statement's, then the waited-for rows', then the created rows'.
    pub(crate) async fn acquire_batch(
        &self,
        requests: &[LockRequest],
        decided: &(dyn Fn(usize, AcquireOutcome) + Send + Sync),
    ) -> Result<(), LockError> {
        let mut outcomes: Vec<Option<AcquireOutcome>> = vec![None; requests.len()];
        let mut missing = Vec::new();
        let tell = |outcomes: &mut [Option<AcquireOutcome>]| {
            for (at, outcome) in outcomes.iter_mut().enumerate() {
                if let Some(outcome) = outcome.take() {
                    decided(at, outcome);
                }
            }
        };
        let skipped = self
            .decide(requests, false, &mut outcomes, &mut missing, None)
            .await?;
        tell(&mut outcomes);
        if !skipped.is_empty() {
            // In a statement (and transaction) of its own, after the first committed: it then
            // holds no row lock when it starts waiting.
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

    /// [`acquire_batch`](Self::acquire_batch), every outcome at once, in the requests' order.
    pub(crate) async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        let outcomes = std::sync::Mutex::new(vec![None; requests.len()]);
        self.acquire_batch(requests, &|at, outcome| {
            outcomes.lock().unwrap_or_else(|p| p.into_inner())[at] = Some(outcome);
        })
        .await?;
        outcomes
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .into_iter()
            .zip(requests)
            .map(|(outcome, request)| {
                outcome.ok_or_else(|| {
                    self.unexpected(
                        "acquire",
                        &request.name,
                        "the batch statement returned no row for this name",
                    )
                })
            })
            .collect()
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
        let pick: fn(&LockStatements) -> &String = if wait {
            |s| &s.acquire_many_wait
        } else {
            |s| &s.acquire_many
        };
        let rows = self
            .batch_rows("acquire", label, pick, &|q| columns.bind(q))
            .await?;
        let mut skipped = Vec::new();
        for row in &rows {
            let (at, said) = said(requests, row).map_err(|e| self.error("acquire", label, e))?;
            let Some(said) = said else { continue };
            let place = places.map_or(at, |places| places[at]);
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
        let rows = self
            .batch_rows("acquire", label, |s| &s.create_many, &|q| columns.bind(q))
            .await?;
        let mut outcomes: Vec<Option<AcquireOutcome>> = vec![None; requests.len()];
        for row in &rows {
            type Created = (i64, Option<i64>, NaiveDateTime, bool);
            let parse = || -> Result<Created, sqlx::Error> {
                Ok((
                    row.try_get(0)?,
                    row.try_get(1)?,
                    row.try_get(2)?,
                    row.try_get(3)?,
                ))
            };
            let (ord, granted, db_now, too_late) =
                parse().map_err(|e| self.error("acquire", label, e))?;
            let at = index(ord);
            let Some(request) = requests.get(at) else {
                continue;
            };
            let db_now = utc(db_now);
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
                    self.unexpected("acquire", label, "the create statement returned no row")
                })
            })
            .collect()
    }

    /// Releases `leases` (names distinct) in one statement: `true` for each that was still
    /// the holder's.
    pub(crate) async fn release_batch(
        &self,
        leases: &[(Lease, std::time::Duration)],
    ) -> Result<Vec<bool>, LockError> {
        let label = leases.first().map_or("", |(l, _)| l.name());
        let names: Vec<String> = leases.iter().map(|(l, _)| l.name().to_owned()).collect();
        let owners: Vec<String> = leases
            .iter()
            .map(|(l, _)| l.locked_by().to_owned())
            .collect();
        let fences: Vec<i64> = leases.iter().map(|(l, _)| fence_to_sql(l)).collect();
        let at_least: Vec<i64> = leases.iter().map(|(_, d)| at_least_millis(*d)).collect();
        let bind = |q: PgQuery| {
            q.bind(names.clone())
                .bind(owners.clone())
                .bind(fences.clone())
                .bind(at_least.clone())
        };
        let rows = self
            .batch_rows("release", label, |s| &s.release_many, &bind)
            .await?;
        let mut released = vec![false; leases.len()];
        for row in &rows {
            let ord: i64 = row
                .try_get(0)
                .map_err(|e| self.error("release", label, e))?;
            if let Some(done) = released.get_mut(index(ord)) {
                *done = true;
            }
        }
        Ok(released)
    }

    /// The rows of the batch statement `pick` chooses, sent unnamed.
    async fn batch_rows(
        &self,
        operation: &'static str,
        label: &str,
        pick: fn(&LockStatements) -> &String,
        bind: &(dyn Fn(PgQuery) -> PgQuery + Send + Sync),
    ) -> Result<Vec<PgRow>, LockError> {
        match self
            .run_planned(operation, label, pick, bind, false, Plan::EachExecution)
            .await?
        {
            Reply::Rows(rows) => Ok(rows),
            Reply::Changed(_) => unreachable!("rows were asked for"),
        }
    }

    /// An answer no statement of ours can give.
    fn unexpected(&self, operation: &'static str, lock: &str, what: &str) -> LockError {
        LockError::provider(operation, lock, self.describe(), what.to_owned())
    }
}

/// What one row of `acquire_many` or `acquire_many_wait` says, with its request's index
/// (`None` for an index out of the batch, which no statement of ours returns).
fn said(requests: &[LockRequest], row: &PgRow) -> Result<(usize, Option<Said>), sqlx::Error> {
    let at = index(row.try_get::<i64, _>(0)?);
    let Some(request) = requests.get(at) else {
        return Ok((at, None));
    };
    if let Some(fence) = row.try_get::<Option<i64>, _>(1)? {
        let lease = Lease::granted(request, fence_from_sql(fence));
        return Ok((at, Some(Said::Decided(AcquireOutcome::Acquired(lease)))));
    }
    if !row.try_get::<bool, _>(6)? {
        return Ok((at, Some(Said::Missing)));
    }
    if row.try_get::<bool, _>(8)? {
        return Ok((at, Some(Said::Skipped)));
    }
    let db_now = utc(row.try_get::<NaiveDateTime, _>(7)?);
    let refused = refusal(
        request,
        row.try_get(2)?,
        row.try_get(3)?,
        row.try_get(4)?,
        row.try_get(5)?,
        db_now,
        row.try_get(9)?,
    );
    Ok((at, Some(Said::Decided(AcquireOutcome::Refused(refused)))))
}

/// The 0-based index of a 1-based `WITH ORDINALITY` number.
fn index(ord: i64) -> usize {
    usize::try_from(ord.saturating_sub(1)).unwrap_or(usize::MAX)
}

/// A batch's requests as the six arrays the batch statements take (`$1`..`$6`).
struct Columns {
    names: Vec<String>,
    at_most: Vec<i64>,
    owners: Vec<String>,
    slots: Vec<Option<NaiveDateTime>>,
    leads: Vec<i64>,
    give_up_at: Vec<Option<NaiveDateTime>>,
}

impl Columns {
    fn of(requests: &[LockRequest]) -> Self {
        Columns {
            names: requests.iter().map(|r| r.name.to_string()).collect(),
            at_most: requests
                .iter()
                .map(|r| lease_millis(r.lock_at_most_for))
                .collect(),
            owners: requests.iter().map(|r| r.locked_by.to_string()).collect(),
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

    /// Binds the six arrays (cloned: an attempt after a lost connection binds them again).
    fn bind(&self, query: PgQuery) -> PgQuery {
        query
            .bind(self.names.clone())
            .bind(self.at_most.clone())
            .bind(self.owners.clone())
            .bind(self.slots.clone())
            .bind(self.leads.clone())
            .bind(self.give_up_at.clone())
    }
}
