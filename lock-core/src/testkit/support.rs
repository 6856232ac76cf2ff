//! What every guarantee's check is made of: lease lengths, unique names, requests, and
//! acquire/release steps that panic with the guarantee's name when the provider errs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::{
    AcquireOutcome, FireSlot, Lease, LockProvider, LockRequest, MAX_LOCK_NAME_LEN, RefusalReason,
};

/// A lease long enough never to expire during a test.
pub(super) const LONG: Duration = Duration::from_secs(300);
/// A short lease, for expiry tests.
pub(super) const SHORT: Duration = Duration::from_millis(1000);
/// How long to wait for a `SHORT` lease to have expired by the provider's clock.
pub(super) const PAST_SHORT: Duration = Duration::from_millis(1300);

static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// A lock name unique to this run and call, tagged with the test's name.
pub fn unique_name(test: &str) -> Arc<str> {
    let n = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let random: u32 = rand::random();
    let mut name = format!("tk-{test}-{random:08x}-{n}");
    name.truncate(MAX_LOCK_NAME_LEN);
    name.into()
}

/// A request for `name` by `owner`.
pub fn request(
    name: &Arc<str>,
    owner: &str,
    at_most: Duration,
    slot: Option<FireSlot>,
) -> LockRequest {
    LockRequest {
        name: name.clone(),
        locked_by: owner.into(),
        lock_at_most_for: at_most,
        slot,
        max_slot_lead: crate::DEFAULT_MAX_SLOT_LEAD,
    }
}

pub(super) async fn try_acquire(
    provider: &dyn LockProvider,
    request: &LockRequest,
) -> Option<Lease> {
    match provider.acquire(request).await {
        Ok(AcquireOutcome::Acquired(lease)) => Some(lease),
        Ok(AcquireOutcome::Refused(_)) => None,
        Err(e) => panic!("acquire of {:?} failed: {e:?}", request.name),
    }
}

pub(super) async fn must_acquire(
    provider: &dyn LockProvider,
    request: &LockRequest,
    why: &str,
) -> Lease {
    try_acquire(provider, request).await.unwrap_or_else(|| {
        panic!(
            "{why}: acquire of {:?} by {:?} was refused",
            request.name, request.locked_by
        )
    })
}

pub(super) async fn must_refuse(
    provider: &dyn LockProvider,
    request: &LockRequest,
    why: &str,
) -> RefusalReason {
    match provider.acquire(request).await {
        Ok(AcquireOutcome::Refused(r)) => r.reason,
        Ok(AcquireOutcome::Acquired(lease)) => panic!(
            "{why}: acquire of {:?} by {:?} was granted (fence {})",
            request.name,
            request.locked_by,
            lease.fence()
        ),
        Err(e) => panic!("{why}: acquire of {:?} failed: {e:?}", request.name),
    }
}

pub(super) async fn release(
    provider: &dyn LockProvider,
    lease: &Lease,
    at_least: Duration,
) -> bool {
    provider
        .release(lease, at_least)
        .await
        .unwrap_or_else(|e| panic!("release of {:?} failed: {e:?}", lease.name()))
}
