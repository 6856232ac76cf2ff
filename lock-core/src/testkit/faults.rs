//! A provider with injected faults: replies that arrive late or never (the grant committed,
//! the answer lost), extensions that fail. The executor's own guarantees (adopting a lost
//! grant, keep-alive timing) are checked through it against every real provider.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::Fixture;
use crate::{AcquireOutcome, Lease, LockError, LockProvider, LockRecord, LockRequest};

/// Which faults [`FaultyProvider`] injects; all off by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// After the store answered an acquire (the grant is committed), hold the reply this long:
    /// past the executor's operation timeout, the reply is lost.
    pub acquire_reply_delay: Duration,
    /// Ask the store twice and answer with the second reply, as a driver that retries a
    /// statement after its connection died: the first grant's reply is lost.
    pub acquire_retried: bool,
    /// After the store answered an extend, hold the reply this long (a slow database).
    pub extend_reply_delay: Duration,
    /// The next this many extends fail without reaching the store (`u32::MAX`: all of them).
    pub failing_extends: u32,
    /// Hold each acquire this long before it reaches the store (a stalled link or server): the
    /// store decides it that much later, also when the sender has given up meanwhile (the
    /// request is on its way and is not taken back).
    pub acquire_request_delay: Duration,
    /// The next this many releases (single or batched) fail without reaching the store
    /// (`u32::MAX`: all of them), as when the database goes away between a body's end and its
    /// release.
    pub failing_releases: u32,
}

/// Wraps a provider (or a [`Fixture`]) and injects [`Faults`], which can be changed at any time.
///
/// ```
/// use lock_core::testkit::{FaultyProvider, Faults};
/// use lock_core::{InMemoryLockProvider, LockProvider};
/// use std::{sync::Arc, time::Duration};
///
/// let faulty = FaultyProvider::new(Arc::new(InMemoryLockProvider::new()));
/// faulty.set(Faults { failing_extends: 1, ..Faults::default() });
/// assert_eq!(faulty.faults().failing_extends, 1);
/// ```
pub struct FaultyProvider {
    inner: Arc<dyn Fixture>,
    faults: Mutex<Faults>,
    /// How many acquires the store has answered (before any injected delay).
    answered: Arc<tokio::sync::watch::Sender<u32>>,
}

impl FaultyProvider {
    /// `inner`, with no fault injected yet.
    pub fn new(inner: Arc<dyn Fixture>) -> Self {
        FaultyProvider {
            inner,
            faults: Mutex::new(Faults::default()),
            answered: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Replaces the faults injected from now on.
    pub fn set(&self, faults: Faults) {
        *self.lock() = faults;
    }

    /// The faults injected now.
    pub fn faults(&self) -> Faults {
        *self.lock()
    }

    /// Waits until the store has answered `count` acquires in all, counted when its answer
    /// arrives, before any [`Faults::acquire_reply_delay`]: a test that needs "the first
    /// grant is committed" waits for that instead of guessing a time.
    pub async fn acquires_answered(&self, count: u32) {
        let mut answered = self.answered.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = answered.wait_for(|n| *n >= count).await;
    }

    /// The acquire, sent after [`Faults::acquire_request_delay`] by a task of its own that
    /// outlives the caller: a sender that gives up does not take back what it sent.
    async fn delayed_acquire(
        &self,
        request: &LockRequest,
        faults: Faults,
    ) -> Result<AcquireOutcome, LockError> {
        let (inner, request) = (self.inner.clone(), request.clone());
        let answered = self.answered.clone();
        let (tell, answer) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            tokio::time::sleep(faults.acquire_request_delay).await;
            let outcome = inner.provider().acquire(&request).await;
            answered.send_modify(|n| *n += 1);
            tokio::time::sleep(faults.acquire_reply_delay).await;
            let _ = tell.send(outcome);
        });
        answer.await.unwrap_or_else(|_| {
            Err(LockError::provider(
                "acquire",
                "",
                self.describe(),
                "injected fault: the delayed acquire's task ended without an answer",
            ))
        })
    }

    /// How many acquires the store has answered so far (each request of a batch counts).
    pub fn acquires(&self) -> u32 {
        *self.answered.borrow()
    }

    /// Spends one of [`Faults::failing_releases`]: the error of a release that did not reach
    /// the store.
    fn release_fault(&self, name: &str) -> Result<(), LockError> {
        let mut faults = self.lock();
        if faults.failing_releases == 0 {
            return Ok(());
        }
        if faults.failing_releases != u32::MAX {
            faults.failing_releases -= 1;
        }
        Err(LockError::provider(
            "release",
            name,
            self.describe(),
            "injected fault: the release did not reach the store",
        ))
    }

    fn lock(&self) -> MutexGuard<'_, Faults> {
        self.faults.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn inner(&self) -> &dyn LockProvider {
        self.inner.provider()
    }
}

#[async_trait]
impl LockProvider for FaultyProvider {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        let faults = self.faults();
        if !faults.acquire_request_delay.is_zero() {
            return self.delayed_acquire(request, faults).await;
        }
        if faults.acquire_retried {
            // The first answer is lost with its connection.
            let _ = self.inner().acquire(request).await;
        }
        let outcome = self.inner().acquire(request).await;
        self.answered.send_modify(|n| *n += 1);
        tokio::time::sleep(faults.acquire_reply_delay).await;
        outcome
    }

    async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        let faults = self.faults();
        if faults.acquire_retried {
            let _ = self.inner().acquire_many(requests).await;
        }
        let outcomes = self.inner().acquire_many(requests).await;
        let answered = u32::try_from(requests.len()).unwrap_or(u32::MAX);
        self.answered
            .send_modify(|n| *n = n.saturating_add(answered));
        tokio::time::sleep(faults.acquire_reply_delay).await;
        outcomes
    }

    async fn release_many(&self, leases: &[(Lease, Duration)]) -> Result<Vec<bool>, LockError> {
        let name = leases.first().map_or("", |(lease, _)| lease.name());
        self.release_fault(name)?;
        self.inner().release_many(leases).await
    }

    fn max_batch(&self) -> usize {
        self.inner().max_batch()
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        let faults = {
            let mut faults = self.lock();
            let now = *faults;
            if faults.failing_extends != 0 && faults.failing_extends != u32::MAX {
                faults.failing_extends -= 1;
            }
            now
        };
        if faults.failing_extends != 0 {
            return Err(LockError::provider(
                "extend",
                lease.name(),
                self.describe(),
                "injected fault: the extend did not reach the store",
            ));
        }
        let extended = self.inner().extend(lease, lock_at_most_for).await;
        tokio::time::sleep(faults.extend_reply_delay).await;
        extended
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        self.release_fault(lease.name())?;
        self.inner().release(lease, lock_at_least_for).await
    }

    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.inner().list_locks().await
    }

    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner().read_lock(name).await
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner().force_unlock(name).await
    }

    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner().reset_slot(name).await
    }

    async fn database_time(&self) -> Result<chrono::DateTime<chrono::Utc>, LockError> {
        self.inner().database_time().await
    }

    async fn check_once_per_slot(&self) -> Result<(), LockError> {
        self.inner().check_once_per_slot().await
    }

    async fn confirm_grant(&self, lease: &Lease) -> Result<(), LockError> {
        self.inner().confirm_grant(lease).await
    }

    async fn names_sharing_a_row(
        &self,
        names: &[&str],
    ) -> Result<Vec<(String, String)>, LockError> {
        self.inner().names_sharing_a_row(names).await
    }

    fn describe(&self) -> String {
        format!("{} with injected faults", self.inner().describe())
    }
}
