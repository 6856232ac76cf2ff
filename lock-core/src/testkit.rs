//! The provider conformance suite: one `pub async fn` per guarantee of [`LockProvider`].
//!
//! Every provider crate calls every function here from its own tests, against a real store.
//! Each function uses fresh, random lock names (so suites may run in parallel on one table),
//! releases every lease it takes, and panics with a message naming the broken guarantee.
//!
//! ```
//! use lock_core::{testkit, InMemoryLockProvider};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let provider = InMemoryLockProvider::new();
//! testkit::exclusion(&provider).await;
//! testkit::fence_strictly_increasing(&provider).await;
//! # });
//! ```
//!
//! Time-based checks use leases of about a second and wait a little longer than that, because
//! the provider's clock (the database server's) is the only one that counts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{TimeDelta, Utc};

use crate::{
    AcquireOutcome, FireSlot, Lease, LockError, LockProvider, LockRequest, MAX_LOCK_NAME_LEN,
    RefusalReason,
};

/// A lease long enough never to expire during a test.
const LONG: Duration = Duration::from_secs(300);
/// A short lease, for expiry tests.
const SHORT: Duration = Duration::from_millis(1000);
/// How long to wait for a `SHORT` lease to have expired by the provider's clock.
const PAST_SHORT: Duration = Duration::from_millis(1300);

/// What a provider's test set-up hands to the suite: the provider itself, or the provider with
/// something that must live as long as it (a temporary directory, a container handle).
pub trait Fixture: Send + Sync {
    /// The provider under test.
    fn provider(&self) -> &dyn LockProvider;
}

impl<P: LockProvider> Fixture for P {
    fn provider(&self) -> &dyn LockProvider {
        self
    }
}

impl<D: Send + Sync, P: LockProvider> Fixture for (D, P) {
    fn provider(&self) -> &dyn LockProvider {
        &self.1
    }
}

/// Generates one `#[tokio::test]` per function of the suite, plus one running the whole suite
/// through `&dyn LockProvider`, so every provider runs every guarantee, including ones added
/// later, without keeping its own list.
///
/// The argument is an `async` expression evaluated afresh in each test, giving
/// `Option<impl Fixture>`: `None` skips the test (for a database that cannot be reached outside
/// CI; the set-up should panic instead when `CI` is set). The calling crate needs `tokio` with
/// the `macros` and `rt-multi-thread` features.
///
/// ```
/// // tests/conformance.rs of a provider crate; a database provider's set-up connects (and
/// // returns None to skip when the server is unreachable outside CI).
/// lock_core::conformance_tests!(async { Some(lock_core::InMemoryLockProvider::new()) });
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($setup:expr) => {
        $crate::__conformance_tests!($setup;
            exclusion,
            independent_names,
            at_most_expiry,
            at_least_hold,
            release_only_by_owner,
            extend_only_by_owner,
            extend_pushes_expiry,
            extend_of_expired_refused,
            stale_lease_cannot_release_new_one,
            fence_strictly_increasing,
            once_per_slot,
            slot_refused_while_held,
            fuzz,
            name_too_long,
            list_and_force_unlock,
        );

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn whole_suite_through_a_dyn_provider() {
            if let ::std::option::Option::Some(fixture) = $setup.await {
                $crate::testkit::run_all($crate::testkit::Fixture::provider(&fixture)).await;
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_tests {
    ($setup:expr; $($test:ident),* $(,)?) => {$(
        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            if let ::std::option::Option::Some(fixture) = $setup.await {
                $crate::testkit::$test($crate::testkit::Fixture::provider(&fixture)).await;
            }
        }
    )*};
}

/// Runs every function of the suite, one after another.
pub async fn run_all(provider: &dyn LockProvider) {
    exclusion(provider).await;
    independent_names(provider).await;
    at_most_expiry(provider).await;
    at_least_hold(provider).await;
    release_only_by_owner(provider).await;
    extend_only_by_owner(provider).await;
    extend_pushes_expiry(provider).await;
    extend_of_expired_refused(provider).await;
    stale_lease_cannot_release_new_one(provider).await;
    fence_strictly_increasing(provider).await;
    once_per_slot(provider).await;
    slot_refused_while_held(provider).await;
    fuzz(provider).await;
    name_too_long(provider).await;
    list_and_force_unlock(provider).await;
}

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
    }
}

async fn try_acquire(provider: &dyn LockProvider, request: &LockRequest) -> Option<Lease> {
    match provider.acquire(request).await {
        Ok(AcquireOutcome::Acquired(lease)) => Some(lease),
        Ok(AcquireOutcome::Refused(_)) => None,
        Err(e) => panic!("acquire of {:?} failed: {e:?}", request.name),
    }
}

async fn must_acquire(provider: &dyn LockProvider, request: &LockRequest, why: &str) -> Lease {
    try_acquire(provider, request).await.unwrap_or_else(|| {
        panic!(
            "{why}: acquire of {:?} by {:?} was refused",
            request.name, request.locked_by
        )
    })
}

async fn must_refuse(
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

async fn release(provider: &dyn LockProvider, lease: &Lease, at_least: Duration) -> bool {
    provider
        .release(lease, at_least)
        .await
        .unwrap_or_else(|e| panic!("release of {:?} failed: {e:?}", lease.name()))
}

/// A held lock is refused to every other instance and to the holder itself.
pub async fn exclusion(provider: &dyn LockProvider) {
    let name = unique_name("exclusion");
    let a = request(&name, "instance-a", LONG, None);
    let b = request(&name, "instance-b", LONG, None);
    let lease = must_acquire(provider, &a, "exclusion: a free lock").await;
    let reason = must_refuse(provider, &b, "exclusion: another instance while held").await;
    assert!(
        matches!(reason, RefusalReason::Held | RefusalReason::Unknown),
        "exclusion: refusal reason {reason:?}"
    );
    must_refuse(provider, &a, "exclusion: the holder itself while held").await;
    assert!(
        release(provider, &lease, Duration::ZERO).await,
        "exclusion: the holder's release"
    );
    let lease = must_acquire(provider, &b, "exclusion: after release").await;
    release(provider, &lease, Duration::ZERO).await;
}

/// Two names are two locks: holding one never blocks the other.
pub async fn independent_names(provider: &dyn LockProvider) {
    let first = unique_name("names-1");
    let second = unique_name("names-2");
    let l1 = must_acquire(
        provider,
        &request(&first, "instance-a", LONG, None),
        "independent names: first",
    )
    .await;
    let l2 = must_acquire(
        provider,
        &request(&second, "instance-b", LONG, None),
        "independent names: second while first is held",
    )
    .await;
    release(provider, &l1, Duration::ZERO).await;
    release(provider, &l2, Duration::ZERO).await;
}

/// A lease nobody releases ends `lock_at_most_for` after it was taken.
pub async fn at_most_expiry(provider: &dyn LockProvider) {
    let name = unique_name("at-most");
    let _abandoned = must_acquire(
        provider,
        &request(&name, "instance-dead", SHORT, None),
        "at-most: first",
    )
    .await;
    must_refuse(
        provider,
        &request(&name, "instance-b", LONG, None),
        "at-most: before expiry",
    )
    .await;
    tokio::time::sleep(PAST_SHORT).await;
    let lease = must_acquire(
        provider,
        &request(&name, "instance-b", LONG, None),
        "at-most: after lock_at_most_for",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
}

/// A lease released early is still held until `locked_at + lock_at_least_for`, then free.
pub async fn at_least_hold(provider: &dyn LockProvider) {
    let name = unique_name("at-least");
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", LONG, None),
        "at-least: first",
    )
    .await;
    assert!(release(provider, &lease, SHORT).await, "at-least: release");
    must_refuse(
        provider,
        &request(&name, "instance-b", LONG, None),
        "at-least: right after an early release",
    )
    .await;
    tokio::time::sleep(PAST_SHORT).await;
    let lease = must_acquire(
        provider,
        &request(&name, "instance-b", LONG, None),
        "at-least: after lock_at_least_for",
    )
    .await;
    // Released after at_least has passed: free at once.
    assert!(release(provider, &lease, Duration::ZERO).await);
    let lease = must_acquire(
        provider,
        &request(&name, "instance-c", LONG, None),
        "at-least: after a late release",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
}

/// Only the holder can release: another instance's release changes nothing.
pub async fn release_only_by_owner(provider: &dyn LockProvider) {
    let name = unique_name("release-owner");
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", LONG, None),
        "release owner: first",
    )
    .await;
    let forged = Lease::granted(&request(&name, "instance-b", LONG, None), lease.fence());
    assert!(
        !release(provider, &forged, Duration::ZERO).await,
        "release owner: a non-owner's release reported success"
    );
    must_refuse(
        provider,
        &request(&name, "instance-b", LONG, None),
        "release owner: after a non-owner's release",
    )
    .await;
    assert!(release(provider, &lease, Duration::ZERO).await);
}

/// Only the holder can extend: another instance's extend changes nothing.
pub async fn extend_only_by_owner(provider: &dyn LockProvider) {
    let name = unique_name("extend-owner");
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", SHORT, None),
        "extend owner: first",
    )
    .await;
    let forged = Lease::granted(&request(&name, "instance-b", SHORT, None), lease.fence());
    let extended = provider
        .extend(&forged, LONG)
        .await
        .expect("extend by a non-owner errored");
    assert!(
        !extended,
        "extend owner: a non-owner's extend reported success"
    );
    tokio::time::sleep(PAST_SHORT).await;
    // Had the forged extend worked, the lease would still be held.
    let lease = must_acquire(
        provider,
        &request(&name, "instance-b", LONG, None),
        "extend owner: after expiry",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
}

/// The holder's extend moves the end of the lease to `now + lock_at_most_for`.
pub async fn extend_pushes_expiry(provider: &dyn LockProvider) {
    let name = unique_name("extend");
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", SHORT, None),
        "extend: first",
    )
    .await;
    assert!(
        provider.extend(&lease, LONG).await.expect("extend errored"),
        "extend: the holder's extend was refused"
    );
    tokio::time::sleep(PAST_SHORT).await;
    must_refuse(
        provider,
        &request(&name, "instance-b", LONG, None),
        "extend: after the original expiry of an extended lease",
    )
    .await;
    assert!(release(provider, &lease, Duration::ZERO).await);
}

/// An expired lease cannot be extended, even by its former holder and even if nobody took it.
pub async fn extend_of_expired_refused(provider: &dyn LockProvider) {
    let name = unique_name("extend-expired");
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", SHORT, None),
        "extend expired: first",
    )
    .await;
    tokio::time::sleep(PAST_SHORT).await;
    let extended = provider.extend(&lease, LONG).await.expect("extend errored");
    assert!(!extended, "extend expired: an expired lease was extended");
    let lease = must_acquire(
        provider,
        &request(&name, "instance-b", LONG, None),
        "extend expired: after the refused extend",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
}

/// A holder whose lease expired and was taken again, even by the same instance, cannot release
/// or extend the new lease (the fence differs).
pub async fn stale_lease_cannot_release_new_one(provider: &dyn LockProvider) {
    let name = unique_name("stale");
    let stale = must_acquire(
        provider,
        &request(&name, "instance-a", SHORT, None),
        "stale: first",
    )
    .await;
    tokio::time::sleep(PAST_SHORT).await;
    let fresh = must_acquire(
        provider,
        &request(&name, "instance-a", LONG, None),
        "stale: same instance after expiry",
    )
    .await;
    assert!(
        fresh.fence() > stale.fence(),
        "stale: fence did not increase ({} then {})",
        stale.fence(),
        fresh.fence()
    );
    assert!(
        !provider.extend(&stale, LONG).await.expect("extend errored"),
        "stale: the old lease extended the new one"
    );
    assert!(
        !release(provider, &stale, Duration::ZERO).await,
        "stale: the old lease released the new one"
    );
    must_refuse(
        provider,
        &request(&name, "instance-b", LONG, None),
        "stale: after the stale release",
    )
    .await;
    assert!(release(provider, &fresh, Duration::ZERO).await);
}

/// Every grant returns a fence strictly greater than all earlier ones for that name, whoever
/// takes it.
pub async fn fence_strictly_increasing(provider: &dyn LockProvider) {
    let name = unique_name("fence");
    let mut last = 0u64;
    for i in 0..10 {
        let owner = if i % 2 == 0 {
            "instance-a"
        } else {
            "instance-b"
        };
        let lease = must_acquire(provider, &request(&name, owner, LONG, None), "fence").await;
        assert!(
            lease.fence() > last,
            "fence: grant {i} returned {} after {last}",
            lease.fence()
        );
        last = lease.fence();
        release(provider, &lease, Duration::ZERO).await;
    }
    assert!(last >= 10, "fence: ten grants ended at fence {last}");
}

/// A slot runs once: refused after release, later slot accepted, earlier slot refused.
pub async fn once_per_slot(provider: &dyn LockProvider) {
    let name = unique_name("slot");
    let base = Utc::now();
    let slot = |s: i64| Some(FireSlot::new(base + TimeDelta::seconds(s)));
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", LONG, slot(0)),
        "slot: first fire",
    )
    .await;
    assert_eq!(lease.slot(), slot(0));
    release(provider, &lease, Duration::ZERO).await;
    let reason = must_refuse(
        provider,
        &request(&name, "instance-b", LONG, slot(0)),
        "slot: same slot after release",
    )
    .await;
    assert!(
        matches!(
            reason,
            RefusalReason::SlotAlreadyRun | RefusalReason::Unknown
        ),
        "slot: reason {reason:?}"
    );
    let lease = must_acquire(
        provider,
        &request(&name, "instance-b", LONG, slot(1)),
        "slot: next slot",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
    must_refuse(
        provider,
        &request(&name, "instance-c", LONG, slot(0)),
        "slot: an earlier slot after a later one",
    )
    .await;
    // A slot-less request (a direct call) is plain mutual exclusion and keeps last_fire.
    let lease = must_acquire(
        provider,
        &request(&name, "instance-c", LONG, None),
        "slot: a slot-less call",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
    must_refuse(
        provider,
        &request(&name, "instance-c", LONG, slot(1)),
        "slot: a slot-less call must not reset last_fire",
    )
    .await;
    let lease = must_acquire(
        provider,
        &request(&name, "instance-c", LONG, slot(2)),
        "slot: a later slot",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
}

/// A new slot is still refused while an earlier slot's lease is held.
pub async fn slot_refused_while_held(provider: &dyn LockProvider) {
    let name = unique_name("slot-held");
    let base = Utc::now();
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", LONG, Some(FireSlot::new(base))),
        "slot held: first",
    )
    .await;
    let next = Some(FireSlot::new(base + TimeDelta::seconds(1)));
    must_refuse(
        provider,
        &request(&name, "instance-b", LONG, next),
        "slot held: a new slot while held",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
    let lease = must_acquire(
        provider,
        &request(&name, "instance-b", LONG, next),
        "slot held: after release",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
}

/// ShedLock's fuzz scenario: 8 concurrent workers x 100 iterations, even workers on one name
/// and odd on another, each incrementing a shared counter non-atomically (read, yield, write)
/// while holding the lock. The counters must equal the number of granted runs exactly.
pub async fn fuzz(provider: &dyn LockProvider) {
    const WORKERS: usize = 8;
    const ITERATIONS: usize = 100;
    let names = [unique_name("fuzz-even"), unique_name("fuzz-odd")];
    let counters = [AtomicU64::new(0), AtomicU64::new(0)];
    let runs = [AtomicU64::new(0), AtomicU64::new(0)];
    let workers = (0..WORKERS).map(|w| {
        let which = w % 2;
        let req = request(&names[which], &format!("fuzz-worker-{w}"), LONG, None);
        let (counter, runs) = (&counters[which], &runs[which]);
        async move {
            for _ in 0..ITERATIONS {
                if let Some(lease) = try_acquire(provider, &req).await {
                    let seen = counter.load(Ordering::SeqCst);
                    tokio::task::yield_now().await;
                    tokio::task::yield_now().await;
                    counter.store(seen + 1, Ordering::SeqCst);
                    runs.fetch_add(1, Ordering::SeqCst);
                    assert!(
                        release(provider, &lease, Duration::ZERO).await,
                        "fuzz: release of a held lease failed"
                    );
                }
                tokio::task::yield_now().await;
            }
        }
    });
    futures_util::future::join_all(workers).await;
    for which in 0..2 {
        let (count, granted) = (
            counters[which].load(Ordering::SeqCst),
            runs[which].load(Ordering::SeqCst),
        );
        assert_eq!(
            count, granted,
            "fuzz: counter {which} is {count} after {granted} granted runs: two holders overlapped"
        );
        assert!(
            granted > 0,
            "fuzz: no worker on name {which} ever got the lock"
        );
    }
}

/// A name over 64 bytes is a [`LockError`] at acquire, never a panic, a truncated row or a
/// silent refusal.
pub async fn name_too_long(provider: &dyn LockProvider) {
    let name: Arc<str> = "n".repeat(MAX_LOCK_NAME_LEN + 1).into();
    match provider
        .acquire(&request(&name, "instance-a", LONG, None))
        .await
    {
        Err(LockError::InvalidLockName { .. }) => {}
        other => panic!("name too long: expected LockError::InvalidLockName, got {other:?}"),
    }
    let max: Arc<str> = unique_name("max")
        .to_string()
        .chars()
        .chain(std::iter::repeat('x'))
        .take(MAX_LOCK_NAME_LEN)
        .collect::<String>()
        .into();
    let lease = must_acquire(
        provider,
        &request(&max, "instance-a", LONG, None),
        "a name of exactly 64 bytes",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
}

/// `list_locks` shows a held lock with its holder and fence; `force_unlock` frees it and keeps
/// the fence and last slot.
pub async fn list_and_force_unlock(provider: &dyn LockProvider) {
    let name = unique_name("list");
    let slot = Some(FireSlot::new(Utc::now()));
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", LONG, slot),
        "list: first",
    )
    .await;
    let records = provider.list_locks().await.expect("list_locks failed");
    let record = records
        .iter()
        .find(|r| *r.name == *name)
        .expect("list: held lock missing from list_locks");
    assert!(record.held, "list: a held lock listed as free");
    assert_eq!(record.locked_by, "instance-a");
    assert_eq!(record.fence, lease.fence());
    assert_eq!(record.last_fire, slot.map(FireSlot::instant));
    assert!(
        record.lock_until > record.locked_at,
        "list: lock_until not after locked_at"
    );
    assert!(
        records.windows(2).all(|w| w[0].name <= w[1].name),
        "list: not sorted by name"
    );

    let before = provider
        .force_unlock(&name)
        .await
        .expect("force_unlock failed")
        .expect("force_unlock: lock not found");
    assert!(before.held && before.locked_by == "instance-a");
    let next = slot.map(|s| FireSlot::new(s.instant() + TimeDelta::seconds(1)));
    let lease2 = must_acquire(
        provider,
        &request(&name, "instance-b", LONG, next),
        "force unlock: after unlock",
    )
    .await;
    assert!(
        lease2.fence() > lease.fence(),
        "force unlock: fence went back"
    );
    // The old holder's release must not touch the new lease.
    assert!(!release(provider, &lease, Duration::ZERO).await);
    release(provider, &lease2, Duration::ZERO).await;
    assert!(
        provider
            .force_unlock(&unique_name("absent"))
            .await
            .expect("force_unlock failed")
            .is_none()
    );
}
