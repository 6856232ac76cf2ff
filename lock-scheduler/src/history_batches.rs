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
//! - **Only for stores that batch** (`max_history_batch() > 1`) and with batching on (a zero
//!   window writes every row on its own, as before).
//! - **Shutdown loses nothing**: a batch is sent by its own task when its window ends, and the
//!   scheduler's job loops await each run's end row before they finish.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use lock_cluster::{Cluster, ClusterProvider, RunEnd, RunStart};
use lock_core::LockError;
use lock_core::batching::{Batched, Coalescer, MAX_WINDOWS, RELEASE_WINDOWS, later};

/// The start row of one run, keyed by its job's name (two of one name never share a batch).
pub(crate) struct HistoryStart(pub(crate) RunStart, pub(crate) Arc<str>);

/// The end row of one run.
/// The end row of one run, and until when it may wait for the others of its burst.
pub(crate) struct HistoryEnd(
    pub(crate) RunEnd,
    pub(crate) Arc<str>,
    pub(crate) Option<Instant>,
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
        Box::pin(async move { store(provider.as_ref())?.run_started(&item.0).await })
    }
    fn send_many(
        provider: Arc<dyn ClusterProvider>,
        items: Vec<Self>,
    ) -> BoxFuture<'static, Result<Vec<i64>, LockError>> {
        Box::pin(async move {
            let runs: Vec<RunStart> = items.into_iter().map(|i| i.0).collect();
            store(provider.as_ref())?.runs_started(&runs).await
        })
    }
    const OPERATION: &'static str = "run_started";
    fn deadline(&self, now: Instant, window: Duration) -> Instant {
        later(now, window.saturating_mul(MAX_WINDOWS))
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
        Box::pin(async move { store(provider.as_ref())?.run_ended(&item.0).await })
    }
    fn send_many(
        provider: Arc<dyn ClusterProvider>,
        items: Vec<Self>,
    ) -> BoxFuture<'static, Result<Vec<()>, LockError>> {
        Box::pin(async move {
            let count = items.len();
            let ends: Vec<RunEnd> = items.into_iter().map(|i| i.0).collect();
            store(provider.as_ref())?.runs_ended(&ends).await?;
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
}

impl HistoryBatches {
    /// Coalescers on `provider` for `window` (the acquire window), or `None` when its store
    /// does not batch or the window is zero.
    pub(crate) fn new(provider: &Arc<dyn ClusterProvider>, window: Duration) -> Option<Arc<Self>> {
        let window = window.saturating_mul(RELEASE_WINDOWS);
        Some(Arc::new(HistoryBatches {
            starts: Coalescer::new(provider, window)?,
            ends: Coalescer::new(provider, window)?,
        }))
    }

    /// Writes `run`'s start row with the others of its window: it joins the batch now; the
    /// returned future gives its id. Inside a tokio runtime.
    pub(crate) fn started(
        &self,
        run: RunStart,
        job: Arc<str>,
    ) -> impl Future<Output = Result<i64, LockError>> + Send + 'static {
        self.starts.enqueue(HistoryStart(run, job))
    }

    /// Writes a run's end row with the others of its window.
    pub(crate) async fn ended(
        &self,
        end: RunEnd,
        job: Arc<str>,
        linger_until: Option<Instant>,
    ) -> Result<(), LockError> {
        self.ends.submit(HistoryEnd(end, job, linger_until)).await
    }
}
