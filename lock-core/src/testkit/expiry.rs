//! How long a lease lasts: `lock_at_most_for` when nobody releases it, `lock_at_least_for`
//! after an early release, and extension by its holder while (and only while) it holds.

use std::time::Duration;

use super::support::{
    LONG, PAST_SHORT, SHORT, must_acquire, must_refuse, release, request, unique_name,
};
use crate::LockProvider;

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

/// Durations beyond [`MAX_DURATION`](crate::MAX_DURATION) (up to `Duration::MAX`) are cut to
/// it, never a panic or an error: acquire, extend and release all hold the lock about as long
/// as asked, and an operator can still end it.
pub async fn durations_beyond_the_cap(provider: &dyn LockProvider) {
    let name = unique_name("cap");
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", Duration::MAX, None),
        "cap: acquire for Duration::MAX",
    )
    .await;
    must_refuse(
        provider,
        &request(&name, "instance-b", LONG, None),
        "cap: held for Duration::MAX",
    )
    .await;
    assert!(
        provider
            .extend(&lease, Duration::MAX)
            .await
            .unwrap_or_else(|e| panic!("cap: extend for Duration::MAX failed: {e:?}")),
        "cap: extend for Duration::MAX"
    );
    assert!(
        release(provider, &lease, Duration::MAX).await,
        "cap: release with lock_at_least_for = Duration::MAX"
    );
    must_refuse(
        provider,
        &request(&name, "instance-b", LONG, None),
        "cap: still held after a release with lock_at_least_for = Duration::MAX",
    )
    .await;
    provider
        .force_unlock(&name)
        .await
        .unwrap_or_else(|e| panic!("cap: force_unlock failed: {e:?}"));
    let lease = must_acquire(
        provider,
        &request(&name, "instance-b", LONG, None),
        "cap: after force_unlock",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
}
