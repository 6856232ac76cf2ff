//! Holding the lock: the guard that releases the lease on every path, and keep-alive.

use std::sync::Arc;
use std::time::Duration;

use crate::metrics::LockMetrics;
use crate::{JobContext, Lease, LockConfiguration, LockProvider};

use super::bounded;

pub(super) enum Never {}

/// Extends the lease every `at_most / 2` until the lease is lost; then resolves the context's
/// cancellation and waits forever (the body decides when to stop).
pub(super) fn keep_alive(
    provider: Arc<dyn LockProvider>,
    ctx: JobContext,
    config: &LockConfiguration,
    guard: &LeaseGuard,
) -> impl Future<Output = Never> + Send + 'static {
    let at_most = config.lock_at_most_for();
    let metrics = config.metrics().clone();
    let lease_end = guard.requested_at + at_most;
    let timeout = guard.operation_timeout;
    async move {
        extend_until_lost(provider.as_ref(), &ctx, at_most, lease_end, timeout).await;
        metrics.lost();
        ctx.cancel_token().cancel();
        std::future::pending().await
    }
}

/// Extends the lease every `at_most / 2`; returns when an extension fails or is refused.
///
/// `lease_end` is the latest the lease can end by this process's clock (the previous request's
/// send time + `at_most`): an extension still unanswered then may no longer hold anything, so
/// it counts as lost even if the database never answers.
async fn extend_until_lost(
    provider: &dyn LockProvider,
    ctx: &JobContext,
    at_most: Duration,
    mut lease_end: tokio::time::Instant,
    timeout: Duration,
) {
    let period = at_most / 2;
    let lease = ctx.lease();
    let mut next = tokio::time::Instant::now() + period;
    loop {
        tokio::time::sleep_until(next).await;
        let sent = tokio::time::Instant::now();
        // While the lease may still hold, an unanswered extension must not outlive it. Past that
        // (this process was paused or starved), ask anyway: the database's refusal is the
        // proof that the lease is gone, and its grant that it is not.
        let deadline = if lease_end > sent {
            lease_end.min(sent + timeout)
        } else {
            sent + timeout
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
                lease_end = sent + at_most;
                next += period;
            }
            Ok(false) => {
                tracing::warn!(
                    lock = lease.name(),
                    fence = lease.fence(),
                    "lock lost: the lease expired or was taken over; cancelling the body"
                );
                break;
            }
            Err(error) => {
                tracing::warn!(
                    lock = lease.name(),
                    fence = lease.fence(),
                    error = &error as &dyn std::error::Error,
                    "lock lost: extending the lease failed; cancelling the body"
                );
                break;
            }
        }
    }
}

/// Releases the lease on every path: awaited normally, spawned if the future is dropped.
pub(super) struct LeaseGuard {
    pub(super) provider: Arc<dyn LockProvider>,
    pub(super) lease: Option<Lease>,
    pub(super) lock_at_least_for: Duration,
    pub(super) metrics: LockMetrics,
    pub(super) started: tokio::time::Instant,
    /// When the acquire was sent: the lease cannot end later than this + `lock_at_most_for`.
    pub(super) requested_at: tokio::time::Instant,
    pub(super) operation_timeout: Duration,
}

impl LeaseGuard {
    pub(super) async fn release(&mut self) {
        if let Some(lease) = self.lease.take() {
            self.metrics.finished(self.started.elapsed());
            release(
                self.provider.as_ref(),
                &lease,
                self.lock_at_least_for,
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
        let at_least = self.lock_at_least_for;
        let timeout = self.operation_timeout;
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(
                    async move { release(provider.as_ref(), &lease, at_least, timeout).await },
                );
            }
            Err(_) => tracing::warn!(
                lock = lease.name(),
                "locked body dropped outside a runtime; the lease ends at lock_at_most_for"
            ),
        }
    }
}

async fn release(
    provider: &dyn LockProvider,
    lease: &Lease,
    at_least: Duration,
    timeout: Duration,
) {
    let sent = tokio::time::Instant::now();
    let result = bounded(
        "release",
        lease.name(),
        sent,
        sent + timeout,
        provider.release(lease, at_least),
    )
    .await;
    match result {
        Ok(true) => tracing::debug!(lock = lease.name(), fence = lease.fence(), "lock released"),
        Ok(false) => tracing::warn!(
            lock = lease.name(),
            fence = lease.fence(),
            "lock release found the lease already expired and taken over; nothing released"
        ),
        Err(error) => tracing::error!(
            lock = lease.name(),
            fence = lease.fence(),
            error = &error as &dyn std::error::Error,
            "lock release failed; the lease ends at lock_at_most_for"
        ),
    }
}
