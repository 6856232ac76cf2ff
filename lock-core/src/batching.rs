//! What the batching providers share about a batch of acquires: when one statement may decide
//! it, and the one-by-one fallback (the trait's default) when it may not.

use std::collections::HashSet;

use crate::{AcquireOutcome, LockError, LockProvider, LockRequest};

/// The coalescer the executor batches acquires and releases with, for stores above this crate
/// that batch their own writes the same way (the scheduler's run history).
pub use crate::executor::batch::{Batched, Coalescer, MAX_WINDOWS, RELEASE_WINDOWS, Tell};
pub use crate::executor::later;

/// Whether one batch statement may decide `requests`: at least two (one goes through the
/// plain acquire), at most `max`, and no name twice (a statement deciding a row twice would
/// read its own first write; the executor never sends that, the contract allows it).
///
/// ```
/// use lock_core::batching::batchable;
/// use lock_core::{DEFAULT_MAX_SLOT_LEAD, LockRequest};
/// use std::time::Duration;
///
/// let request = |name: &str| LockRequest {
///     name: name.into(),
///     locked_by: "a".into(),
///     lock_at_most_for: Duration::from_secs(30),
///     slot: None,
///     max_slot_lead: DEFAULT_MAX_SLOT_LEAD,
///     give_up_at: None,
/// };
/// assert!(batchable(&[request("x"), request("y")], 1000));
/// assert!(!batchable(&[request("x"), request("x")], 1000));
/// assert!(!batchable(&[request("x")], 1000));
/// assert!(!batchable(&[request("x"), request("y"), request("z")], 2));
/// ```
pub fn batchable(requests: &[LockRequest], max: usize) -> bool {
    if requests.len() < 2 || requests.len() > max {
        return false;
    }
    let mut names = HashSet::with_capacity(requests.len());
    requests.iter().all(|r| names.insert(&*r.name))
}

/// Decides each request with its own [`acquire`](LockProvider::acquire), in order: what
/// [`LockProvider::acquire_many`] does by default, and a batching provider's answer to what
/// [`batchable`] refuses.
///
/// ```
/// use lock_core::batching::acquire_each;
/// use lock_core::{AcquireOutcome, DEFAULT_MAX_SLOT_LEAD, InMemoryLockProvider, LockRequest};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let request = LockRequest {
///     name: "report".into(),
///     locked_by: "a".into(),
///     lock_at_most_for: Duration::from_secs(30),
///     slot: None,
///     max_slot_lead: DEFAULT_MAX_SLOT_LEAD,
///     give_up_at: None,
/// };
/// let outcomes = acquire_each(&InMemoryLockProvider::new(), &[request.clone(), request]).await?;
/// assert!(matches!(outcomes[..], [AcquireOutcome::Acquired(_), AcquireOutcome::Refused(_)]));
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
pub async fn acquire_each<P: LockProvider + ?Sized>(
    provider: &P,
    requests: &[LockRequest],
) -> Result<Vec<AcquireOutcome>, LockError> {
    let mut outcomes = Vec::with_capacity(requests.len());
    for request in requests {
        outcomes.push(provider.acquire(request).await?);
    }
    Ok(outcomes)
}
