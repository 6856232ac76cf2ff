//! The server's clock: a process whose clock is hours wrong takes, refuses and expires leases
//! exactly as one whose clock is right, because every script reads Redis's `TIME`.
//!
//! The parent test re-runs this test binary under Debian's `faketime` with the clock three
//! hours ahead and then behind; the child (`client_clock_skew`) checks its lease against the
//! server's clock and leaves a lock held, which the parent must find held until the server's
//! clock says it ends.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use lock_core::{AcquireOutcome, FireSlot, LockProvider, RefusalReason, testkit};

/// Set in the child: the skew `faketime` applies.
const SKEW_ENV: &str = "LOCK_TEST_CLIENT_SKEW";
/// Set in the child: the lock it must leave held for the parent.
const HELD_ENV: &str = "LOCK_TEST_HELD_LOCK";
/// How long the child's leftover lease lasts.
const HELD_FOR: Duration = Duration::from_secs(3);

/// Run by the parent under `faketime`; run directly, it makes the same checks with the
/// machine's own clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_clock_skew() {
    let Some(provider) = common::provider().await else {
        return;
    };
    let server_now = provider.database_time().await.expect("TIME");
    let skew = Utc::now() - server_now;
    if let Ok(expected) = std::env::var(SKEW_ENV) {
        assert!(
            skew.num_minutes().abs() >= 170,
            "faketime {expected} did not skew this process's clock: {skew} from the server's"
        );
    }
    let name = testkit::unique_name("clock");
    let slot = FireSlot::new(server_now);
    let request = testkit::request(&name, "skewed", Duration::from_secs(1), Some(slot));
    let AcquireOutcome::Acquired(lease) = provider.acquire(&request).await.expect("acquire") else {
        panic!("a fresh lock with the server's current slot was refused");
    };
    let record = provider.read_lock(&name).await.expect("read").expect("row");
    assert!(
        (record.locked_at - server_now).num_seconds().abs() <= 5,
        "locked_at {} is not the server's time {server_now}",
        record.locked_at
    );
    assert_eq!(record.lock_until - record.locked_at, TimeDelta::seconds(1));
    // A slot by this process's (wrong) clock is refused when it is ahead, and never written.
    if skew > TimeDelta::hours(1) {
        let ahead = testkit::request(
            &name,
            "skewed",
            Duration::from_secs(1),
            Some(FireSlot::new(Utc::now())),
        );
        match provider.acquire(&ahead).await.expect("acquire") {
            AcquireOutcome::Refused(r) => assert_eq!(r.reason, RefusalReason::SlotInFuture),
            granted => panic!("a slot 3 h ahead of the server was granted: {granted:?}"),
        }
    }
    assert!(
        provider
            .release(&lease, Duration::ZERO)
            .await
            .expect("release")
    );

    if let Ok(held) = std::env::var(HELD_ENV) {
        let held: Arc<str> = held.into();
        let request = testkit::request(&held, "skewed-and-gone", HELD_FOR, None);
        assert!(matches!(
            provider.acquire(&request).await.expect("acquire"),
            AcquireOutcome::Acquired(_)
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_follow_the_servers_clock_under_a_skewed_client_clock() {
    let Some(provider) = common::provider().await else {
        return;
    };
    if !test_support::skip::command_available("faketime") {
        return;
    }
    let exe = std::env::current_exe().expect("test binary path");
    for skew in ["+3h", "-3h"] {
        let held = testkit::unique_name("clock-held");
        let output = test_support::process::under_faketime(skew, &exe)
            .args(["--exact", "client_clock_skew", "--nocapture"])
            .env(SKEW_ENV, skew)
            .env(HELD_ENV, &*held)
            .output()
            .expect("run the test binary under faketime");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "the child with the clock {skew} failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        // Had the child written its own clock's time, the lease would end 3 hours off.
        let record = provider
            .read_lock(&held)
            .await
            .expect("read")
            .expect("the child's lock");
        let now = provider.database_time().await.expect("TIME");
        assert!(
            record.held && record.lock_until - now <= TimeDelta::from_std(HELD_FOR).unwrap(),
            "the child ({skew}) wrote lock_until {}, the server's time is {now}",
            record.lock_until
        );
        let contender = testkit::request(&held, "parent", Duration::from_secs(60), None);
        assert!(matches!(
            provider.acquire(&contender).await.expect("acquire"),
            AcquireOutcome::Refused(_)
        ));
        // Wait for the server's clock to pass lock_until (300 ms for the loaded machine).
        let wait = (record.lock_until - now + TimeDelta::milliseconds(300))
            .to_std()
            .unwrap();
        tokio::time::sleep(wait).await;
        match provider.acquire(&contender).await.expect("acquire") {
            AcquireOutcome::Acquired(lease) => {
                provider
                    .release(&lease, Duration::ZERO)
                    .await
                    .expect("release");
            }
            refused => {
                panic!("the child's lock ({skew}) was held past its lock_until: {refused:?}")
            }
        }
    }
}
