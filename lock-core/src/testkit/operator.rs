//! What an operator sees and does: `list_locks` and `force_unlock`.

use std::time::Duration;

use chrono::{TimeDelta, Utc};

use super::support::{LONG, must_acquire, release, request, unique_name};
use crate::{FireSlot, LockProvider};

/// `list_locks` shows a held lock with its holder and fence, `read_lock` reads that same row
/// (and `None` for a name without one); `force_unlock` frees it and keeps the fence and last
/// slot.
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
    assert_eq!(
        provider
            .read_lock(&name)
            .await
            .expect("read_lock failed")
            .as_ref(),
        Some(record),
        "read_lock: not the row list_locks shows"
    );
    assert_eq!(
        provider
            .read_lock(&unique_name("never"))
            .await
            .expect("read_lock of a missing name failed"),
        None,
        "read_lock: a row for a name never locked"
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
