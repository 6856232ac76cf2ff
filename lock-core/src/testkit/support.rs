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
        give_up_at: None,
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

/// One whole lock cycle on a fresh name, for a provider reached some new way (TLS, a pooler):
/// acquire (with a fence), refused while held, extend, release, and free again. Panics with
/// the step that failed.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_core::testkit::lock_cycle(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn lock_cycle(provider: &dyn LockProvider) {
    let name = unique_name("cycle");
    let request = request(&name, "cycle-test", Duration::from_secs(30), None);
    let lease = match provider.acquire(&request).await.expect("acquire") {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("a fresh lock was refused: {refused:?}"),
    };
    assert!(lease.fence() > 0, "a granted lease carries a fence");
    assert!(
        matches!(
            provider
                .acquire(&request)
                .await
                .expect("acquire while held"),
            AcquireOutcome::Refused(_)
        ),
        "a held lock is refused"
    );
    assert!(
        provider
            .extend(&lease, Duration::from_secs(60))
            .await
            .expect("extend"),
        "the holder extends its lease"
    );
    assert!(
        provider
            .release(&lease, Duration::ZERO)
            .await
            .expect("release"),
        "the holder releases its lease"
    );
    assert!(
        matches!(
            provider.acquire(&request).await.expect("acquire again"),
            AcquireOutcome::Acquired(_)
        ),
        "released, so free again"
    );
}
