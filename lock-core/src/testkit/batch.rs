//! Batches: [`LockProvider::acquire_many`] and [`LockProvider::release_many`] decide each
//! request exactly as its own acquire or release would, and concurrent batches of several
//! instances on overlapping names neither overlap holders, nor run a slot twice, nor deadlock.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{TimeDelta, Utc};

use super::support::{LONG, must_acquire, release, request, unique_name};
use crate::{AcquireOutcome, FireSlot, Lease, LockProvider, LockRequest, RefusalReason};

async fn acquire_many_or_panic(
    provider: &dyn LockProvider,
    requests: &[LockRequest],
    why: &str,
) -> Vec<AcquireOutcome> {
    let outcomes = provider
        .acquire_many(requests)
        .await
        .unwrap_or_else(|e| panic!("{why}: acquire_many failed: {e:?}"));
    assert_eq!(
        outcomes.len(),
        requests.len(),
        "{why}: acquire_many must answer one outcome per request"
    );
    outcomes
}

/// One batch with every outcome at once, each as its own acquire would decide it: a free row
/// granted with the next fence, a held row refused (and its holder's row untouched: a loser
/// writes nothing), a slot that already ran refused, an earlier slot refused, a slot too far
/// ahead refused without creating its row, a missing row created and granted. Then
/// `release_many` releases the granted leases and refuses a stale one.
pub async fn batch_mixed_outcomes(provider: &dyn LockProvider) {
    let me = "batch-instance-a";
    let base = Utc::now();
    let slot = |s: i64| Some(FireSlot::new(base + TimeDelta::seconds(s)));

    // free: a row that exists and is free.
    let free = unique_name("batch-free");
    let prior = must_acquire(
        provider,
        &request(&free, "other", LONG, None),
        "batch: set-up free",
    )
    .await;
    release(provider, &prior, Duration::ZERO).await;
    // held: a row held by another instance.
    let held = unique_name("batch-held");
    let holder = must_acquire(
        provider,
        &request(&held, "other", LONG, None),
        "batch: set-up held",
    )
    .await;
    let held_before = provider
        .read_lock(&held)
        .await
        .expect("read_lock")
        .expect("held row");
    // ran: slot 0 already ran (released).
    let ran = unique_name("batch-ran");
    let done = must_acquire(
        provider,
        &request(&ran, "other", LONG, slot(0)),
        "batch: set-up ran",
    )
    .await;
    release(provider, &done, Duration::ZERO).await;
    // earlier: slot 5 ran, the batch asks slot 0.
    let earlier = unique_name("batch-earlier");
    let done = must_acquire(
        provider,
        &request(&earlier, "other", LONG, slot(5)),
        "batch: set-up earlier",
    )
    .await;
    release(provider, &done, Duration::ZERO).await;
    // future: no row, a slot an hour ahead.
    let future = unique_name("batch-future");
    // missing: no row at all.
    let missing = unique_name("batch-missing");
    // slotted: a free row and a new slot.
    let slotted = unique_name("batch-slotted");
    let done = must_acquire(
        provider,
        &request(&slotted, "other", LONG, slot(0)),
        "batch: set-up slotted",
    )
    .await;
    release(provider, &done, Duration::ZERO).await;

    let requests = [
        request(&free, me, LONG, None),
        request(&held, me, LONG, None),
        request(&ran, me, LONG, slot(0)),
        request(&earlier, me, LONG, slot(0)),
        request(&future, me, LONG, slot(3600)),
        request(&missing, me, LONG, slot(0)),
        request(&slotted, me, LONG, slot(1)),
    ];
    let outcomes = acquire_many_or_panic(provider, &requests, "batch mixed").await;
    let lease = |at: usize, what: &str| -> Lease {
        match &outcomes[at] {
            AcquireOutcome::Acquired(lease) => {
                assert_eq!(
                    lease.name(),
                    &*requests[at].name,
                    "batch: {what}: the lease's name"
                );
                assert_eq!(lease.locked_by(), me, "batch: {what}: the lease's owner");
                lease.clone()
            }
            refused => panic!("batch: {what} must be granted, got {refused:?}"),
        }
    };
    let reason = |at: usize, what: &str| -> RefusalReason {
        match &outcomes[at] {
            AcquireOutcome::Refused(refusal) => refusal.reason,
            AcquireOutcome::Acquired(lease) => {
                panic!(
                    "batch: {what} must be refused, was granted fence {}",
                    lease.fence()
                )
            }
        }
    };
    let free_lease = lease(0, "a free row");
    assert!(
        free_lease.fence() > prior.fence(),
        "batch: a free row's fence must increase ({} after {})",
        free_lease.fence(),
        prior.fence()
    );
    let r = reason(1, "a held row");
    assert!(
        matches!(r, RefusalReason::Held | RefusalReason::Unknown),
        "batch: held row: {r:?}"
    );
    let r = reason(2, "a slot that already ran");
    assert!(
        matches!(r, RefusalReason::SlotAlreadyRun | RefusalReason::Unknown),
        "batch: slot already run: {r:?}"
    );
    let r = reason(3, "an earlier slot");
    assert!(
        matches!(r, RefusalReason::SlotAlreadyRun | RefusalReason::Unknown),
        "batch: earlier slot: {r:?}"
    );
    assert_eq!(
        reason(4, "a slot an hour ahead"),
        RefusalReason::SlotInFuture
    );
    let missing_lease = lease(5, "a missing row");
    assert!(
        missing_lease.fence() > 0,
        "batch: a created row carries a fence"
    );
    assert_eq!(
        missing_lease.slot(),
        slot(0),
        "batch: the created row's slot"
    );
    let slotted_lease = lease(6, "a new slot");
    assert_eq!(slotted_lease.slot(), slot(1));

    // The loser wrote nothing; the future slot created nothing; the missing row now exists.
    let held_after = provider
        .read_lock(&held)
        .await
        .expect("read_lock")
        .expect("held row");
    assert_eq!(
        held_after, held_before,
        "batch: a refused request must not write its row"
    );
    if let Some(row) = provider.read_lock(&future).await.expect("read_lock") {
        assert_eq!(
            row.last_fire, None,
            "batch: a future slot must not be written"
        );
        assert!(!row.held, "batch: a future slot must not take the lock");
    }
    let created = provider
        .read_lock(&missing)
        .await
        .expect("read_lock")
        .expect("created row");
    assert_eq!(
        (created.held, created.fence, created.last_fire),
        (true, missing_lease.fence(), slot(0).map(FireSlot::instant)),
        "batch: the created row"
    );
    // Each granted name is held: a second acquire is refused.
    let again = acquire_many_or_panic(
        provider,
        &[
            request(&free, "other", LONG, None),
            request(&missing, "other", LONG, None),
        ],
        "batch again",
    )
    .await;
    assert!(
        again
            .iter()
            .all(|o| matches!(o, AcquireOutcome::Refused(_))),
        "batch: granted names must be held, got {again:?}"
    );

    // release_many: the three granted leases, and a stale one (the held row's, with a wrong
    // fence) that must change nothing.
    let stale = Lease::granted(&request(&held, "other", LONG, None), holder.fence() + 100);
    let released = provider
        .release_many(&[
            (free_lease.clone(), Duration::ZERO),
            (stale, Duration::ZERO),
            (missing_lease.clone(), Duration::ZERO),
            (slotted_lease.clone(), Duration::ZERO),
        ])
        .await
        .unwrap_or_else(|e| panic!("batch: release_many failed: {e:?}"));
    assert_eq!(
        released,
        [true, false, true, true],
        "batch: release_many releases the holders' leases only"
    );
    let held_row = provider
        .read_lock(&held)
        .await
        .expect("read_lock")
        .expect("held row");
    assert!(
        held_row.held,
        "batch: a stale lease must not release the holder's lock"
    );
    for name in [&free, &missing, &slotted] {
        let row = provider
            .read_lock(name)
            .await
            .expect("read_lock")
            .expect("row");
        assert!(!row.held, "batch: {name} must be free after release_many");
    }
    release(provider, &holder, Duration::ZERO).await;
}

/// ShedLock's fuzz scenario with batches: 4 instances, each sending batches of the same 6
/// names (every instance in its own order) 30 times, each round for a new slot. For every
/// granted lease the name's counter is incremented non-atomically (read, yield, write) before
/// the batch's leases are released together. The counters must equal the grants exactly, no
/// (name, slot) may be granted twice, and no batch may fail (a deadlock between two batches
/// would be an error).
pub async fn batch_concurrent_fuzz(provider: &dyn LockProvider) {
    const INSTANCES: usize = 4;
    const NAMES: usize = 6;
    const ROUNDS: usize = 30;
    let names: Vec<Arc<str>> = (0..NAMES)
        .map(|n| unique_name(&format!("batch-fuzz-{n}")))
        .collect();
    let counters: Vec<AtomicU64> = (0..NAMES).map(|_| AtomicU64::new(0)).collect();
    let grants: Vec<AtomicU64> = (0..NAMES).map(|_| AtomicU64::new(0)).collect();
    let slots_granted = Mutex::new(HashMap::<(usize, i64), usize>::new());
    let base = Utc::now();
    let workers = (0..INSTANCES).map(|w| {
        let (names, counters, grants, slots_granted) = (&names, &counters, &grants, &slots_granted);
        async move {
            let owner = format!("batch-fuzz-instance-{w}");
            for round in 0..ROUNDS {
                // A new slot every round (a millisecond apart), so a name can be granted once
                // per round at most; the order differs per instance and per round.
                let slot = Some(FireSlot::new(base + TimeDelta::milliseconds(round as i64)));
                let mut order: Vec<usize> =
                    (0..NAMES).map(|i| (i * (w + 1) + round) % NAMES).collect();
                order.sort_unstable();
                order.dedup();
                if w % 2 == 1 {
                    order.reverse();
                }
                let requests: Vec<LockRequest> = order
                    .iter()
                    .map(|&n| request(&names[n], &owner, LONG, slot))
                    .collect();
                let outcomes = acquire_many_or_panic(provider, &requests, "batch fuzz").await;
                let mut leases = Vec::new();
                for (&n, outcome) in order.iter().zip(outcomes) {
                    if let AcquireOutcome::Acquired(lease) = outcome {
                        let seen = counters[n].load(Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        counters[n].store(seen + 1, Ordering::SeqCst);
                        grants[n].fetch_add(1, Ordering::SeqCst);
                        let key = (n, slot.map_or(0, FireSlot::unix_millis));
                        *slots_granted.lock().unwrap().entry(key).or_default() += 1;
                        leases.push((lease, Duration::ZERO));
                    }
                }
                tokio::task::yield_now().await;
                let released = provider
                    .release_many(&leases)
                    .await
                    .unwrap_or_else(|e| panic!("batch fuzz: release_many failed: {e:?}"));
                assert!(
                    released.iter().all(|&r| r),
                    "batch fuzz: a held lease's release failed: {released:?}"
                );
            }
        }
    });
    futures_util::future::join_all(workers).await;
    let mut total = 0;
    for n in 0..NAMES {
        let (count, granted) = (
            counters[n].load(Ordering::SeqCst),
            grants[n].load(Ordering::SeqCst),
        );
        assert_eq!(
            count, granted,
            "batch fuzz: counter {n} is {count} after {granted} grants: two holders overlapped"
        );
        assert!(granted > 0, "batch fuzz: name {n} was never granted");
        total += granted;
    }
    let twice: Vec<_> = slots_granted
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, count)| **count > 1)
        .map(|(key, _)| *key)
        .collect();
    assert!(
        twice.is_empty(),
        "batch fuzz: (name, slot) granted twice: {twice:?}"
    );
    assert!(
        total <= (NAMES * ROUNDS) as u64,
        "batch fuzz: more grants than slots"
    );
}
