//! Coalesced run-history writes: the start rows (and the end rows) of the runs of one instance
//! that come within the batch window go to the operations store in one
//! [`runs_started`](lock_cluster::ClusterStore::runs_started) (or
//! [`runs_ended`](lock_cluster::ClusterStore::runs_ended)) call, through the same
//! coalescer as the executor's acquires and releases (`lock_core::batching::Coalescer`).
//!
//! Decisions, and why:
//! - **The window is the release window** (5 acquire windows, 5 ms at the default): the runs of
//!   one burst start and end over tens of milliseconds on a busy host, and a history row a few
//!   milliseconds late changes nothing anyone reads. A start row joins a batch for at most
//!   the acquire's 50 windows while others keep joining.
//! - **Rows carry the times the scheduler saw**, where the store writes given times
//!   ([`takes_run_times`](lock_cluster::ClusterStore::takes_run_times), PostgreSQL): a run's
//!   start and end are the database's clock (the scheduler's estimate) when its body started
//!   and ended, not when its row was written. The end row is written after the lock's
//!   release, which may linger until the slot plus 250 ms; written with the store's clock,
//!   every run of a job due every second lasted about 250 ms in the history.
//! - **A burst's start rows wait for its bodies to start**, where the store writes given
//!   times: a scheduled fire's start row is sent no sooner than half its release linger
//!   after the slot (125 ms for a job of every second or slower), unless its batch fills up.
//!   Written as the bodies started, the database's inserts took the CPU the rest of the
//!   burst was starting on (4 instances x 10,000 jobs on 2 cores, lag p99 59-85 ms against
//!   41-55 ms held). A reader of the history sees a running run that much later; nothing else
//!   waits for the row but the run's end row, which waits for the release's linger anyway.
//! - **Only for stores that batch** (`max_history_batch() > 1`) and with batching on (a zero
//!   window writes every row on its own, as before).
//! - **Shutdown loses nothing**: a batch is sent by its own task when its window ends, and the
//!   scheduler's job loops await each run's end row before they finish.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use tokio::time::Instant;

use lock_cluster::{Cluster, ClusterProvider, RunEnd, RunStart};
use lock_core::LockError;
use lock_core::batching::{Batched, Coalescer, MAX_WINDOWS, RELEASE_WINDOWS, later};

/// The start row of one run, keyed by its job's name (two of one name never share a batch),
/// the earliest its batch is sent (a scheduled fire's: after its burst's bodies started), and
/// when the body started by the database's clock (the scheduler's estimate).
pub(crate) struct HistoryStart(
    pub(crate) RunStart,
    pub(crate) Arc<str>,
    pub(crate) Option<Instant>,
    pub(crate) DateTime<Utc>,
);

/// The end row of one run, until when it may wait for the others of its burst, and when the
/// body ended by the database's clock (the scheduler's estimate).
pub(crate) struct HistoryEnd(
    pub(crate) RunEnd,
    pub(crate) Arc<str>,
    pub(crate) Option<Instant>,
    pub(crate) DateTime<Utc>,
);

fn store(provider: &dyn ClusterProvider) -> Result<&dyn Cluster, LockError> {
    provider.cluster().ok_or_else(|| {
        LockError::InvalidConfiguration(format!(
            "{} keeps no run history (no operations tables)",
            provider.describe()
        ))
    })
}

fn max(provider: &dyn ClusterProvider) -> usize {
    provider.cluster().map_or(1, |ops| ops.max_history_batch())
}

impl Batched for HistoryStart {
    type Target = dyn ClusterProvider;
    type Out = i64;
    fn name(&self) -> &Arc<str> {
        &self.1
    }
    fn send_one(
        provider: Arc<dyn ClusterProvider>,
        item: Self,
    ) -> BoxFuture<'static, Result<i64, LockError>> {
        Box::pin(async move {
            // A store that does not take run times writes its clock (the trait's default).
            let ids = store(provider.as_ref())?
                .runs_started_at(&[item.0], &[item.3])
                .await?;
            ids.first().copied().ok_or_else(|| {
                LockError::provider(
                    "history",
                    &*item.1,
                    provider.describe(),
                    "the start of a run returned no id",
                )
            })
        })
    }
    fn send_many(
        provider: Arc<dyn ClusterProvider>,
        items: Vec<Self>,
    ) -> BoxFuture<'static, Result<Vec<i64>, LockError>> {
        Box::pin(async move {
            let (runs, at): (Vec<RunStart>, Vec<DateTime<Utc>>) =
                items.into_iter().map(|i| (i.0, i.3)).unzip();
            store(provider.as_ref())?.runs_started_at(&runs, &at).await
        })
    }
    const OPERATION: &'static str = "run_started";
    fn deadline(&self, now: Instant, window: Duration) -> Instant {
        let deadline = later(now, window.saturating_mul(MAX_WINDOWS));
        self.2.map_or(deadline, |hold| deadline.max(hold))
    }
    fn not_before(&self) -> Option<Instant> {
        self.2
    }
    fn max(provider: &dyn ClusterProvider) -> usize {
        max(provider)
    }
    fn describe(provider: &dyn ClusterProvider) -> String {
        provider.describe()
    }
}

impl Batched for HistoryEnd {
    type Target = dyn ClusterProvider;
    type Out = ();
    fn name(&self) -> &Arc<str> {
        &self.1
    }
    fn send_one(
        provider: Arc<dyn ClusterProvider>,
        item: Self,
    ) -> BoxFuture<'static, Result<(), LockError>> {
        Box::pin(async move {
            store(provider.as_ref())?
                .runs_ended_at(&[item.0], &[item.3])
                .await
        })
    }
    fn send_many(
        provider: Arc<dyn ClusterProvider>,
        items: Vec<Self>,
    ) -> BoxFuture<'static, Result<Vec<()>, LockError>> {
        Box::pin(async move {
            let count = items.len();
            let (ends, at): (Vec<RunEnd>, Vec<DateTime<Utc>>) =
                items.into_iter().map(|i| (i.0, i.3)).unzip();
            store(provider.as_ref())?.runs_ended_at(&ends, &at).await?;
            Ok(vec![(); count])
        })
    }
    const OPERATION: &'static str = "run_ended";
    fn deadline(&self, now: Instant, window: Duration) -> Instant {
        let deadline = later(now, window);
        self.2.map_or(deadline, |linger| deadline.max(linger))
    }
    fn max(provider: &dyn ClusterProvider) -> usize {
        max(provider)
    }
    fn describe(provider: &dyn ClusterProvider) -> String {
        provider.describe()
    }
}

/// The two coalescers of one executor's history writes.
pub(crate) struct HistoryBatches {
    starts: Arc<Coalescer<HistoryStart>>,
    ends: Arc<Coalescer<HistoryEnd>>,
    /// The store writes the times it is given: start rows may be held back.
    takes_times: bool,
}

impl HistoryBatches {
    /// Coalescers on `provider` for `window` (the acquire window), or `None` when its store
    /// does not batch or the window is zero.
    pub(crate) fn new(provider: &Arc<dyn ClusterProvider>, window: Duration) -> Option<Arc<Self>> {
        let window = window.saturating_mul(RELEASE_WINDOWS);
        Some(Arc::new(HistoryBatches {
            starts: Coalescer::new(provider, window)?,
            ends: Coalescer::new(provider, window)?,
            takes_times: provider.cluster().is_some_and(|s| s.takes_run_times()),
        }))
    }

    /// Writes `run`'s start row (its body started `at`, by the database's clock) with the
    /// others of its window, not before `hold` (unless the batch fills up) where the store
    /// writes the time it is given: it joins the batch now; the returned future gives its id.
    /// Inside a tokio runtime.
    pub(crate) fn started(
        &self,
        run: RunStart,
        job: Arc<str>,
        hold: Option<Instant>,
        at: DateTime<Utc>,
    ) -> impl Future<Output = Result<i64, LockError>> + Send + 'static {
        let hold = hold.filter(|_| self.takes_times);
        self.starts.enqueue(HistoryStart(run, job, hold, at))
    }

    /// Writes a run's end row (its body ended `at`, by the database's clock) with the others
    /// of its window.
    pub(crate) async fn ended(
        &self,
        end: RunEnd,
        job: Arc<str>,
        linger_until: Option<Instant>,
        at: DateTime<Utc>,
    ) -> Result<(), LockError> {
        self.ends
            .submit(HistoryEnd(end, job, linger_until, at))
            .await
    }
}
