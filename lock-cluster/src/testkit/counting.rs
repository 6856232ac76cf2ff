//! [`CountingProvider`]: a provider that counts the lock rows it is asked to decide.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_core::{AcquireOutcome, Lease, LockError, LockProvider, LockRecord, LockRequest};

use crate::{Cluster, ClusterProvider};

/// Wraps a provider and counts the acquire requests sent through it, one per lock row the
/// database decides (a batch of 100 counts 100): what a test or benchmark compares with the
/// runs made, to measure row decisions per execution. Everything else is passed through.
///
/// ```
/// use lock_cluster::testkit::CountingProvider;
/// use lock_core::{InMemoryLockProvider, LockProvider, testkit::request};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let provider = CountingProvider::new(InMemoryLockProvider::new());
/// let name = "job".into();
/// provider.acquire(&request(&name, "i-1", Duration::from_secs(60), None)).await.unwrap();
/// assert_eq!(provider.asked(), 1);
/// # });
/// ```
pub struct CountingProvider<P> {
    inner: P,
    asked: AtomicUsize,
}

impl<P> CountingProvider<P> {
    /// Counts what is asked of `inner`.
    pub fn new(inner: P) -> Self {
        CountingProvider {
            inner,
            asked: AtomicUsize::new(0),
        }
    }

    /// The acquire requests sent so far.
    pub fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }

    fn count(&self, requests: usize) {
        self.asked.fetch_add(requests, Ordering::Relaxed);
    }
}

impl<P: ClusterProvider> ClusterProvider for CountingProvider<P> {
    fn cluster(&self) -> Option<&dyn Cluster> {
        self.inner.cluster()
    }
}

#[async_trait]
impl<P: LockProvider> LockProvider for CountingProvider<P> {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        self.count(1);
        self.inner.acquire(request).await
    }
    async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        self.count(requests.len());
        self.inner.acquire_many(requests).await
    }
    async fn acquire_many_each(
        &self,
        requests: &[LockRequest],
        decided: &(dyn Fn(usize, AcquireOutcome) + Send + Sync),
    ) -> Result<(), LockError> {
        self.count(requests.len());
        self.inner.acquire_many_each(requests, decided).await
    }
    async fn release_many(&self, leases: &[(Lease, Duration)]) -> Result<Vec<bool>, LockError> {
        self.inner.release_many(leases).await
    }
    fn max_batch(&self) -> usize {
        self.inner.max_batch()
    }
    async fn extend(&self, lease: &Lease, at_most: Duration) -> Result<bool, LockError> {
        self.inner.extend(lease, at_most).await
    }
    async fn release(&self, lease: &Lease, at_least: Duration) -> Result<bool, LockError> {
        self.inner.release(lease, at_least).await
    }
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.inner.list_locks().await
    }
    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner.read_lock(name).await
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner.force_unlock(name).await
    }
    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner.reset_slot(name).await
    }
    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        self.inner.database_time().await
    }
    async fn check_once_per_slot(&self) -> Result<(), LockError> {
        self.inner.check_once_per_slot().await
    }
    async fn confirm_grant(&self, lease: &Lease) -> Result<(), LockError> {
        self.inner.confirm_grant(lease).await
    }
    async fn names_sharing_a_row(
        &self,
        names: &[&str],
    ) -> Result<Vec<(String, String)>, LockError> {
        self.inner.names_sharing_a_row(names).await
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
}
