//! Only this lease's holder: release and extend are checked against the owner and the fence,
//! and every grant's fence is greater than all earlier ones.

use std::time::Duration;

use super::support::{
    LONG, PAST_SHORT, SHORT, must_acquire, must_refuse, release, request, unique_name,
};
use crate::{Lease, LockProvider};

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
