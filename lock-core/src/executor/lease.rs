//! Holding the lock: the guard that releases the lease on every path, and keep-alive.

use std::sync::Arc;
use std::time::Duration;

use crate::metrics::LockMetrics;
use crate::{JobContext, Lease, LockConfiguration, LockProvider};

use super::batch::{Coalescer, Release};
use super::recover::HeldLeases;
use super::{bounded, later};

pub(super) enum Never {}

/// Extends the lease every `at_most / 2`, counted from when the acquire was requested, until
/// the lease is lost; then resolves the context's cancellation and waits forever (the body
/// decides when to stop).
pub(super) fn keep_alive(
    provider: Arc<dyn LockProvider>,
    ctx: JobContext,
    config: &LockConfiguration,
    guard: &LeaseGuard,
) -> impl Future<Output = Never> + Send + 'static {
    let at_most = config.lock_at_most_for();
    let metrics = config.metrics().clone();
    let requested_at = guard.requested_at;
    let timeout = guard.operation_timeout;
    async move {
        extend_until_lost(provider.as_ref(), &ctx, at_most, requested_at, timeout).await;
        metrics.lost();
        ctx.cancel_token().cancel();
        std::future::pending().await
    }
}

/// How much of the lease is kept in hand when giving up on it: `cancelled()` resolves this
/// long before the lease's end by this process's clock (5 % of `lock_at_most_for`), which
/// covers timer lateness and a database clock running a little faster than ours.
fn safety_margin(at_most: Duration) -> Duration {
    at_most / 20
}

/// The pause before retrying a failed extension: a tenth of the period, between 10 ms and 2 s.
fn retry_pause(period: Duration) -> Duration {
    (period / 10).clamp(Duration::from_millis(10), Duration::from_secs(2))
}

/// Extends the lease every `at_most / 2`; returns when the lease is lost: an extension was
/// refused (the lease expired or was taken over), or none succeeded before the lease's end.
///
/// Every time is counted from when a request was SENT, never from when it was answered: the
/// lease granted by an acquire sent at `requested_at` ends at the latest at `requested_at +
/// at_most` by this process's clock, however long the answer took. A failed extension is
/// retried while the lease lasts; only when its end (less [`safety_margin`]) comes without a
/// successful extension is the lease given up, so `cancelled()` resolves before another
/// instance can take over.
async fn extend_until_lost(
    provider: &dyn LockProvider,
    ctx: &JobContext,
    at_most: Duration,
    requested_at: tokio::time::Instant,
    timeout: Duration,
) {
    let period = at_most / 2;
    let lease = ctx.lease();
    // When the lease may end, less the margin: past this point it counts as lost.
    let mut give_up_at = later(requested_at, at_most - safety_margin(at_most));
    let mut next = later(requested_at, period);
    let mut failed = false;
    loop {
        tokio::time::sleep_until(next).await;
        let sent = tokio::time::Instant::now();
        if failed && sent >= give_up_at {
            tracing::warn!(
                lock = lease.name(),
                fence = lease.fence(),
                "lock lost: extending the lease failed until the lease's end; cancelling the body"
            );
            return;
        }
        // While the lease may still hold, an unanswered extension must not outlive it. Past that
        // (this process was paused or starved), ask anyway: the database's refusal is the
        // proof that the lease is gone, and its grant that it is not.
        let deadline = if give_up_at > sent {
            give_up_at.min(later(sent, timeout))
        } else {
            later(sent, timeout)
        };
        let result = bounded(
            "extend",
            lease.name(),
            sent,
            deadline,
            provider.extend(lease, at_most),
        )
        .await;
        match result {
            Ok(true) => {
                tracing::debug!(lock = lease.name(), fence = lease.fence(), "lock extended");
                give_up_at = later(sent, at_most - safety_margin(at_most));
                next = later(sent, period);
                failed = false;
            }
            Ok(false) => {
                tracing::warn!(
                    lock = lease.name(),
                    fence = lease.fence(),
                    "lock lost: the lease expired or was taken over; cancelling the body"
                );
                return;
            }
            Err(error) => {
                let now = tokio::time::Instant::now();
                if now >= give_up_at {
                    tracing::warn!(
                        lock = lease.name(),
                        fence = lease.fence(),
                        error = &error as &dyn std::error::Error,
                        "lock lost: extending the lease failed until the lease's end; cancelling the body"
                    );
                    return;
                }
                tracing::warn!(
                    lock = lease.name(),
                    fence = lease.fence(),
                    error = &error as &dyn std::error::Error,
                    remaining = ?give_up_at - now,
                    "extending the lease failed; retrying while it lasts"
                );
                failed = true;
                next = later(now, retry_pause(period)).min(give_up_at);
            }
        }
    }
}

/// Releases the lease on every path: awaited normally, spawned if the future is dropped.
pub(super) struct LeaseGuard {
    pub(super) provider: Arc<dyn LockProvider>,
    /// Releases sent with others of the batch window, when batching is on.
    pub(super) releases: Option<Arc<Coalescer<Release>>>,
    pub(super) lease: Option<Lease>,
    pub(super) lock_at_least_for: Duration,
    pub(super) metrics: LockMetrics,
    pub(super) started: tokio::time::Instant,
    /// When the acquire was sent: the lease cannot end later than this + `lock_at_most_for`.
    pub(super) requested_at: tokio::time::Instant,
    pub(super) operation_timeout: Duration,
    /// Until when the release may wait for others of its burst (a scheduled fire's slot plus
    /// the lock's release linger); none: one batch window.
    pub(super) linger_until: Option<tokio::time::Instant>,
}

impl LeaseGuard {
    pub(super) async fn release(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.metrics.finished(self.started.elapsed());
            release(
                self.provider.as_ref(),
                self.releases.as_ref(),
                lease,
                (self.lock_at_least_for, self.requested_at, self.linger_until),
                self.operation_timeout,
            )
            .await;
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let Some(lease) = self.lease.take() else {
            return;
        };
        self.metrics.finished(self.started.elapsed());
        let provider = self.provider.clone();
        let releases = self.releases.clone();
        // Dropped, not released in order (a cancelled fire): no lingering.
        let at_least = (self.lock_at_least_for, self.requested_at, None);
        let timeout = self.operation_timeout;
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    release(
                        provider.as_ref(),
                        releases.as_ref(),
                        lease,
                        at_least,
                        timeout,
                    )
                    .await
                });
            }
            Err(_) => {
                HeldLeases::let_go(&lease);
                tracing::warn!(
                    lock = lease.name(),
                    "locked body dropped outside a runtime; the lease ends at lock_at_most_for"
                )
            }
        }
    }
}

async fn release(
    provider: &dyn LockProvider,
    releases: Option<&Arc<Coalescer<Release>>>,
    lease: Lease,
    (at_least, requested_at, linger_until): (
        Duration,
        tokio::time::Instant,
        Option<tokio::time::Instant>,
    ),
    timeout: Duration,
) {
    let sent = tokio::time::Instant::now();
    let (name, fence) = (lease.shared_name().clone(), lease.fence());
    let lease_key = lease.clone();
    let call = async {
        match releases {
            // Slotted fires only: a direct call's release goes at once, as its acquire did.
            Some(batch) if lease.slot().is_some() => {
                batch
                    .submit(Release(lease, at_least, requested_at, linger_until))
                    .await
            }
            _ => provider.release(&lease, at_least).await,
        }
    };
    let result = bounded("release", &name, sent, later(sent, timeout), call).await;
    // Only now: until the release is decided, no sibling may take the lease for an orphan.
    HeldLeases::let_go(&lease_key);
    match result {
        Ok(true) => tracing::debug!(lock = &*name, fence, "lock released"),
        Ok(false) => tracing::warn!(
            lock = &*name,
            fence,
            "lock release found the lease already expired and taken over; nothing released"
        ),
        Err(error) => tracing::error!(
            lock = &*name,
            fence,
            error = &error as &dyn std::error::Error,
            "lock release failed; the lease ends at lock_at_most_for"
        ),
    }
}
