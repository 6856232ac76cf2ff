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

/// A refusal of a held lock whose slot already ran carries the row's `last_fire` (at least the
/// slot asked), so that a fire that asked ahead of its slot knows the slot was taken and does
/// not ask again at the slot.
pub async fn held_refusal_carries_last_fire(provider: &dyn LockProvider) {
    let name = unique_name("held-last-fire");
    let slot = Some(FireSlot::new(Utc::now() - TimeDelta::seconds(10)));
    let lease = must_acquire(
        provider,
        &request(&name, "instance-a", LONG, slot),
        "held last_fire: the winner",
    )
    .await;
    let refusal = must_refuse_with(
        provider,
        &request(&name, "instance-b", LONG, slot),
        "held last_fire: the loser",
    )
    .await;
    assert_eq!(
        refusal.reason,
        RefusalReason::Held,
        "held last_fire: reason"
    );
    assert!(
        refusal
            .last_fire
            .is_some_and(|last| Some(last) >= slot.map(FireSlot::instant)),
        "held last_fire: the refusal of a held lock whose slot ran must carry its last_fire, \
         got {refusal:?}"
    );
    release(provider, &lease, Duration::ZERO).await;
}

/// A slot more than the request's lead ahead of the provider's clock is refused with
/// [`RefusalReason::SlotInFuture`] and writes no `last_fire`, whether the row exists or not; a
/// slot within the lead is granted; the lead is the request's. `database_time` is the clock
/// the statements use: a grant's `locked_at` lies between two readings of it.
pub async fn future_slot_refused(provider: &dyn LockProvider) {
    let name = unique_name("future-slot");
    let db_now = database_time(provider).await;
    let hour_ahead = Some(FireSlot::new(db_now + TimeDelta::hours(1)));
    let refusal = must_refuse_with(
        provider,
        &request(&name, "instance-fast", LONG, hour_ahead),
        "future slot: a new name, a slot an hour ahead",
    )
    .await;
    assert_eq!(
        refusal.reason,
        RefusalReason::SlotInFuture,
        "future slot: reason for a new name"
    );
    let seen = refusal
        .database_now
        .expect("future slot: a SlotInFuture refusal carries the provider's now");
    assert!(
        (seen - db_now).abs() < TimeDelta::seconds(60),
        "future slot: the refusal's database_now {seen} is far from database_time {db_now}"
    );
    if let Some(record) = read(provider, &name).await {
        assert_eq!(
            record.last_fire, None,
            "future slot: a refused slot was written to last_fire"
        );
    }

    // Within the lead: granted; and locked_at comes from the clock database_time reports.
    let before = database_time(provider).await;
    let near = Some(FireSlot::new(before + TimeDelta::seconds(1)));
    let lease = must_acquire(
        provider,
        &request(&name, "instance-true", LONG, near),
        "future slot: a slot a second ahead",
    )
    .await;
    let after = database_time(provider).await;
    let record = read(provider, &name).await.expect("future slot: the row");
    let slack = TimeDelta::milliseconds(1);
    assert!(
        record.locked_at >= before - slack && record.locked_at <= after + slack,
        "future slot: locked_at {} is not between two readings of database_time ({before}, \
         {after}): database_time must read the clock the statements use",
        record.locked_at
    );
    release(provider, &lease, Duration::ZERO).await;

    // The row exists now: still refused, and last_fire keeps the slot that ran.
    let refusal = must_refuse_with(
        provider,
        &request(&name, "instance-fast", LONG, hour_ahead),
        "future slot: an existing row",
    )
    .await;
    assert_eq!(
        refusal.reason,
        RefusalReason::SlotInFuture,
        "future slot: reason for an existing row"
    );
    let record = read(provider, &name).await.expect("future slot: the row");
    assert_eq!(
        record.last_fire,
        near.map(FireSlot::instant),
        "future slot: a refused slot changed last_fire"
    );

    // The lead is the request's: two hours of lead admit the slot an hour ahead.
    let mut generous = request(&name, "instance-fast", LONG, hour_ahead);
    generous.max_slot_lead = Duration::from_secs(2 * 3600);
    let lease = must_acquire(provider, &generous, "future slot: within a longer lead").await;
    release(provider, &lease, Duration::ZERO).await;
}

async fn database_time(provider: &dyn LockProvider) -> chrono::DateTime<Utc> {
    provider
        .database_time()
        .await
        .unwrap_or_else(|e| panic!("database_time failed: {e:?}"))
}

async fn read(provider: &dyn LockProvider, name: &str) -> Option<crate::LockRecord> {
    provider
        .read_lock(name)
        .await
        .unwrap_or_else(|e| panic!("read_lock of {name:?} failed: {e:?}"))
}

async fn must_refuse_with(
    provider: &dyn LockProvider,
    request: &crate::LockRequest,
    why: &str,
) -> crate::Refusal {
    match provider.acquire(request).await {
        Ok(crate::AcquireOutcome::Refused(refusal)) => refusal,
        Ok(crate::AcquireOutcome::Acquired(lease)) => {
            panic!("{why}: granted (fence {})", lease.fence())
        }
        Err(e) => panic!("{why}: acquire failed: {e:?}"),
    }
}

/// `reset_slot` repairs a `last_fire` in the future (sets it to the provider's now, returning
/// the row as it was), leaves one in the past alone, and answers `None` for a missing lock.
pub async fn reset_slot_repairs_a_future_last_fire(provider: &dyn LockProvider) {
    let name = unique_name("reset-slot");
    let db_now = database_time(provider).await;
    // Poison it as an older version on a fast host would have: a slot a day ahead.
    let day_ahead = FireSlot::new(db_now + TimeDelta::days(1));
    let mut poison = request(&name, "instance-fast", LONG, Some(day_ahead));
    poison.max_slot_lead = Duration::from_secs(2 * 86_400);
    let lease = must_acquire(provider, &poison, "reset slot: poisoning").await;
    release(provider, &lease, Duration::ZERO).await;
    let next = Some(FireSlot::new(
        database_time(provider).await + TimeDelta::seconds(1),
    ));
    must_refuse(
        provider,
        &request(&name, "instance-true", LONG, next),
        "reset slot: poisoned",
    )
    .await;

    let before = provider
        .reset_slot(&name)
        .await
        .unwrap_or_else(|e| panic!("reset_slot failed: {e:?}"))
        .expect("reset slot: the row");
    assert_eq!(
        before.last_fire,
        Some(day_ahead.instant()),
        "reset slot: the row as it was"
    );
    let repaired = read(provider, &name).await.expect("reset slot: the row");
    let last = repaired.last_fire.expect("reset slot: last_fire stays set");
    let after = database_time(provider).await;
    assert!(
        last <= after && last >= db_now - TimeDelta::seconds(1),
        "reset slot: last_fire {last} should be the provider's now (about {after})"
    );
    assert_eq!(
        repaired.fence, before.fence,
        "reset slot: the fence is kept"
    );
    let lease = must_acquire(
        provider,
        &request(&name, "instance-true", LONG, next),
        "reset slot: the next slot after the repair",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;

    // A past last_fire is kept: no slot that ran can run again.
    let past_name = unique_name("reset-slot-past");
    let past = Some(FireSlot::new(db_now - TimeDelta::seconds(10)));
    let lease = must_acquire(
        provider,
        &request(&past_name, "instance-true", LONG, past),
        "reset slot: a past slot",
    )
    .await;
    release(provider, &lease, Duration::ZERO).await;
    provider.reset_slot(&past_name).await.expect("reset_slot");
    let kept = read(provider, &past_name)
        .await
        .expect("reset slot: the row");
    assert_eq!(
        kept.last_fire,
        past.map(FireSlot::instant),
        "reset slot: a past last_fire is kept"
    );
    assert_eq!(
        provider
            .reset_slot(&unique_name("reset-slot-missing"))
            .await
            .expect("reset_slot of a missing lock"),
        None
    );
}
