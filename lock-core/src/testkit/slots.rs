//! Once per slot: a scheduled fire's slot runs at most once under a name, in order.

use std::time::Duration;

use chrono::{TimeDelta, Utc};

use super::support::{LONG, must_acquire, must_refuse, release, request, unique_name};
use crate::{FireSlot, LockProvider, RefusalReason};

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
