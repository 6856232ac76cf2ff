//! A single acquire that loses a race learns who won and which slot ran. Its statement waits for
//! the winner's row lock and then refuses, but reads the row from a snapshot taken before the
//! winner committed; the provider reads the row again, so a fire that asked ahead of its slot
//! sees that the slot was taken and does not ask once more at the slot.

mod common;

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use lock_core::{AcquireOutcome, FireSlot, LockProvider, RefusalReason, testkit};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loser_that_waited_for_the_winner_is_told_the_winners_slot() {
    let Some(provider) = common::provider(common::CONFORMANCE_TABLE).await else {
        return;
    };
    let table = common::CONFORMANCE_TABLE;
    let name = testkit::unique_name("race-single");
    let base = Utc::now();
    let slot = |s: i64| FireSlot::new(base + TimeDelta::seconds(s));
    let lease_for = Duration::from_secs(300);
    let first = testkit::request(&name, "setup", lease_for, Some(slot(0)));
    let AcquireOutcome::Acquired(lease) = provider.acquire(&first).await.unwrap() else {
        panic!("setup acquire refused");
    };
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());

    // The winner takes slot 1 in a transaction still open when the loser's acquire comes.
    let mut winner = common::raw_client().await;
    let winner_pid: i32 = winner
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    let tx = winner.transaction().await.unwrap();
    tx.execute(
        &format!(
            "UPDATE {table} SET lock_until = timezone('utc', CURRENT_TIMESTAMP) + interval '5 minutes', \
             locked_by = 'winner', fence = fence + 1, \
             last_fire = timezone('utc', to_timestamp($2::int8 / 1000.0)) WHERE name = $1"
        ),
        &[&&*name, &slot(1).unix_millis()],
    )
    .await
    .unwrap();

    let loser = {
        let provider = provider.clone();
        let request = testkit::request(&name, "loser", lease_for, Some(slot(1)));
        tokio::spawn(async move { provider.acquire(&request).await })
    };
    let observer = common::raw_client().await;
    assert!(
        common::waits_for(&observer, winner_pid).await,
        "the loser's statement never waited for the winner's row"
    );
    tx.commit().await.unwrap();
    let outcome = loser.await.unwrap().unwrap();
    let AcquireOutcome::Refused(refusal) = &outcome else {
        panic!("{name}: granted while the winner holds it: {outcome:?}");
    };
    assert_eq!(refusal.reason, RefusalReason::Held, "{refusal:?}");
    assert_eq!(refusal.locked_by.as_deref(), Some("winner"), "{refusal:?}");
    assert_eq!(
        refusal.last_fire.map(|at| at.timestamp_millis()),
        Some(slot(1).unix_millis()),
        "the slot ran: {refusal:?}"
    );
    assert!(
        refusal.lock_until.is_some_and(|until| until > Utc::now()),
        "{refusal:?}"
    );
    assert!(refusal.database_now.is_some(), "{refusal:?}");
}
