//! A batch does not wait behind another transaction's row lock for the rows it can decide at
//! once: its first statement skips the locked row and commits the others, and the skipped row is
//! then decided by a second statement that waits for the lock, so no slot is lost. The free
//! row's grant reaches its caller (`acquire_many_each`) while the second statement waits.

mod common;

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use lock_core::{AcquireOutcome, FireSlot, LockProvider, testkit};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_row_is_waited_for_after_the_free_rows_are_committed() {
    let Some(provider) = common::provider(common::CONFORMANCE_TABLE).await else {
        return;
    };
    let table = common::CONFORMANCE_TABLE;
    let locked = testkit::unique_name("skip-locked");
    let free = testkit::unique_name("skip-free");
    let base = Utc::now();
    let slot = |s: i64| Some(FireSlot::new(base + TimeDelta::seconds(s)));
    let lease_for = Duration::from_secs(300);
    // Both rows exist and are free, their last slot run at `base`.
    for name in [&locked, &free] {
        let first = testkit::request(name, "setup", lease_for, slot(0));
        let AcquireOutcome::Acquired(lease) = provider.acquire(&first).await.unwrap() else {
            panic!("setup acquire refused");
        };
        assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    }

    // Another transaction (as a release or an operator's unlock in flight would) holds the
    // row lock of `locked`, without changing it.
    let mut blocker = common::raw_client().await;
    let blocker_pid: i32 = blocker
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let tx = blocker.transaction().await.unwrap();
    tx.execute(
        &format!("SELECT 1 FROM {table} WHERE name = $1 FOR UPDATE"),
        &[&&*locked],
    )
    .await
    .unwrap();

    let requests = vec![
        testkit::request(&locked, "batch", lease_for, slot(1)),
        testkit::request(&free, "batch", lease_for, slot(1)),
    ];
    let (told_tx, mut told) = tokio::sync::mpsc::unbounded_channel();
    let batch = {
        let provider = provider.clone();
        tokio::spawn(async move {
            provider
                .acquire_many_each(&requests, &move |at, outcome| {
                    let _ = told_tx.send((at, outcome));
                })
                .await
        })
    };

    // The batch's second statement waits for the blocker's lock.
    let observer = common::raw_client().await;
    assert!(
        common::waits_for(&observer, blocker_pid).await,
        "the batch never waited for the locked row"
    );
    assert!(
        !batch.is_finished(),
        "the batch decided a locked row without waiting"
    );
    // While it waits, the free row is already granted and committed: the first statement did
    // not wait behind the lock.
    let owner: String = observer
        .query_one(
            &format!(
                "SELECT locked_by FROM {table} WHERE name = $1 \
                 AND lock_until > timezone('utc', CURRENT_TIMESTAMP)"
            ),
            &[&&*free],
        )
        .await
        .expect("the free row is held, committed, while the batch waits")
        .get(0);
    assert_eq!(owner, "batch");
    // ... and told to its caller already, the locked one not.
    let (at, outcome) = told
        .try_recv()
        .expect("the free row's grant was told before the wait");
    assert_eq!(at, 1, "{outcome:?}");
    let AcquireOutcome::Acquired(free_lease) = outcome else {
        panic!("the free row was refused: {outcome:?}");
    };
    assert!(
        told.try_recv().is_err(),
        "the locked row was told before its wait"
    );

    // The lock goes away: the skipped row is decided as it then is, free, so its slot runs.
    tx.commit().await.unwrap();
    batch.await.unwrap().unwrap();
    let (at, outcome) = told
        .try_recv()
        .expect("the locked row was told after the wait");
    assert_eq!(at, 0);
    let AcquireOutcome::Acquired(lease) = outcome else {
        panic!("{locked}: refused, its slot lost: {outcome:?}");
    };
    assert!(told.try_recv().is_err(), "each row told once");
    for lease in [lease, free_lease] {
        assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    }
}

/// A row taken by the transaction the second statement waited for is refused as that
/// transaction left it: held, by whom, and which slot it ran (a fire that asked ahead of its
/// slot reads from this that the slot was taken and does not ask again at the slot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_taken_during_the_wait_is_refused_with_its_new_holder_and_slot() {
    let Some(provider) = common::provider(common::CONFORMANCE_TABLE).await else {
        return;
    };
    let table = common::CONFORMANCE_TABLE;
    let taken = testkit::unique_name("skip-taken");
    let base = Utc::now();
    let slot = |s: i64| FireSlot::new(base + TimeDelta::seconds(s));
    let lease_for = Duration::from_secs(300);
    let first = testkit::request(&taken, "setup", lease_for, Some(slot(0)));
    let AcquireOutcome::Acquired(lease) = provider.acquire(&first).await.unwrap() else {
        panic!("setup acquire refused");
    };
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());

    // A rival takes the row for slot 1 in a transaction still open when the batch comes.
    let mut rival = common::raw_client().await;
    let rival_pid: i32 = rival
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let tx = rival.transaction().await.unwrap();
    tx.execute(
        &format!(
            "UPDATE {table} SET lock_until = timezone('utc', CURRENT_TIMESTAMP) + interval '5 minutes', \
             locked_by = 'rival', fence = fence + 1, \
             last_fire = timezone('utc', to_timestamp($2::int8 / 1000.0)) WHERE name = $1"
        ),
        &[&&*taken, &slot(1).unix_millis()],
    )
    .await
    .unwrap();

    let requests = vec![testkit::request(&taken, "batch", lease_for, Some(slot(1)))];
    let batch = {
        let provider = provider.clone();
        // Two requests make a batch of the provider's statements; the second a fresh name.
        let mut requests = requests.clone();
        requests.push(testkit::request(
            &testkit::unique_name("skip-other"),
            "batch",
            lease_for,
            Some(slot(1)),
        ));
        tokio::spawn(async move { provider.acquire_many(&requests).await })
    };
    // The batch's second statement waits for the rival's row lock.
    let observer = common::raw_client().await;
    assert!(
        common::waits_for(&observer, rival_pid).await,
        "the batch never waited for the rival's row"
    );
    tx.commit().await.unwrap();
    let outcomes = batch.await.unwrap().unwrap();
    let AcquireOutcome::Refused(refusal) = &outcomes[0] else {
        panic!("{taken}: granted while the rival holds it: {outcomes:?}");
    };
    assert_eq!(
        refusal.reason,
        lock_core::RefusalReason::Held,
        "{refusal:?}"
    );
    assert_eq!(refusal.locked_by.as_deref(), Some("rival"), "{refusal:?}");
    assert_eq!(
        refusal.last_fire.map(|at| at.timestamp_millis()),
        Some(slot(1).unix_millis()),
        "{refusal:?}"
    );
    assert!(
        refusal.lock_until.is_some_and(|until| until > Utc::now()),
        "{refusal:?}"
    );
    if let AcquireOutcome::Acquired(lease) = &outcomes[1] {
        assert!(provider.release(lease, Duration::ZERO).await.unwrap());
    }
}
