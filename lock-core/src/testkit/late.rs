//! No late grant: an acquire the provider decides after its sender gave up
//! ([`LockRequest::give_up_at`](crate::LockRequest::give_up_at)) is refused and writes nothing.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::support::{LONG, must_acquire, release, request, unique_name};
use crate::{AcquireOutcome, FireSlot, LockProvider, LockRecord, LockRequest, RefusalReason};

/// A request whose `give_up_at` is already past on the provider's clock is refused with
/// [`RefusalReason::TooLate`] and leaves the row as it was (not held, `fence` and `last_fire`
/// unchanged; a missing row stays missing or free), alone or in a batch; a request whose
/// `give_up_at` is in the future is granted.
pub async fn refuses_past_give_up_at(provider: &dyn LockProvider) {
    let name = unique_name("too-late");
    let db_now = database_time(provider).await;
    // A minute either way: far beyond any skew between `database_time` and the statement.
    let past = Some(db_now - TimeDelta::minutes(1));
    let future = Some(db_now + TimeDelta::minutes(1));
    let slot = |s: i64| Some(FireSlot::new(db_now + TimeDelta::seconds(s)));
    let late = |slot: Option<FireSlot>| LockRequest {
        give_up_at: past,
        ..request(&name, "instance-late", LONG, slot)
    };

    // A new name: nothing is created.
    must_be_too_late(provider, &late(slot(0)), "too late: a new name").await;
    if let Some(record) = read(provider, &name).await {
        assert!(
            !record.held && record.last_fire.is_none(),
            "too late: a refused acquire of a new name wrote a lease: {record:?}"
        );
    }

    // An existing free row whose slot 0 ran: slot 1 and a slot-less call, both too late.
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", LONG, slot(0)),
        "too late: set-up",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
    let before = read(provider, &name).await.expect("too late: the row");
    must_be_too_late(provider, &late(slot(1)), "too late: the next slot").await;
    must_be_too_late(provider, &late(None), "too late: a slot-less call").await;
    assert_unchanged(provider, &before, "too late: a single acquire").await;

    // In a batch, each request is decided on its own deadline.
    let other = unique_name("too-late-batch");
    let batch = [
        late(slot(1)),
        LockRequest {
            give_up_at: future,
            ..request(&other, "instance-late", LONG, slot(1))
        },
    ];
    let outcomes = provider
        .acquire_many(&batch)
        .await
        .unwrap_or_else(|e| panic!("too late: acquire_many failed: {e:?}"));
    match &outcomes[..] {
        [
            AcquireOutcome::Refused(refusal),
            AcquireOutcome::Acquired(lease),
        ] => {
            assert_eq!(
                refusal.reason,
                RefusalReason::TooLate,
                "too late: the batch's late request"
            );
            release(provider, lease, Duration::ZERO).await;
        }
        other => panic!("too late: a batch of a late and a timely request answered {other:?}"),
    }
    assert_unchanged(provider, &before, "too late: a batched acquire").await;

    // In time: granted, and the slot is spent.
    let timely = LockRequest {
        give_up_at: future,
        ..request(&name, "instance-late", LONG, slot(1))
    };
    let lease = must_acquire(provider, &timely, "too late: a give_up_at in the future").await;
    let record = read(provider, &name).await.expect("too late: the row");
    assert_eq!(record.last_fire, slot(1).map(FireSlot::instant));
    release(provider, &lease, Duration::ZERO).await;
}

async fn must_be_too_late(provider: &dyn LockProvider, request: &LockRequest, why: &str) {
    match provider.acquire(request).await {
        Ok(AcquireOutcome::Refused(refusal)) => assert_eq!(
            refusal.reason,
            RefusalReason::TooLate,
            "{why}: refused for another reason: {refusal:?}"
        ),
        Ok(AcquireOutcome::Acquired(lease)) => panic!(
            "{why}: granted (fence {}) although decided after the request's give_up_at",
            lease.fence()
        ),
        Err(e) => panic!("{why}: acquire failed: {e:?}"),
    }
}

async fn assert_unchanged(provider: &dyn LockProvider, before: &LockRecord, why: &str) {
    let after = read(provider, &before.name).await.expect("the row");
    assert!(!after.held, "{why}: the row is held: {after:?}");
    assert_eq!(
        (
            after.fence,
            after.last_fire,
            &after.locked_by,
            after.lock_until
        ),
        (
            before.fence,
            before.last_fire,
            &before.locked_by,
            before.lock_until
        ),
        "{why}: a refused acquire changed the row"
    );
}

async fn database_time(provider: &dyn LockProvider) -> DateTime<Utc> {
    provider
        .database_time()
        .await
        .unwrap_or_else(|e| panic!("database_time failed: {e:?}"))
}

async fn read(provider: &dyn LockProvider, name: &str) -> Option<LockRecord> {
    provider
        .read_lock(name)
        .await
        .unwrap_or_else(|e| panic!("read_lock of {name:?} failed: {e:?}"))
}
