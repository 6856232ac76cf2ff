//! Database time: a process whose clock is hours wrong takes, refuses, extends and expires
//! leases exactly as one whose clock is right, because every time is the server's.
//!
//! The parent test re-runs this test binary under Debian's `faketime` with the clock three
//! hours ahead and then three hours behind; the child (`client_clock_skew`) checks every
//! operation against the server's clock and leaves a lock held, which the parent, with a right
//! clock, must find held until the server's clock says it ends.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use lock_core::{AcquireOutcome, LockProvider, LockRequest, RefusalReason, testkit};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::prelude::Queryable;

/// Set in the child: the skew `faketime` applies (`+3h`, `-3h`).
const SKEW_ENV: &str = "LOCK_TEST_CLIENT_SKEW";
/// Set in the child: the lock it must leave held for the parent.
const HELD_ENV: &str = "LOCK_TEST_HELD_LOCK";
/// How long the child's leftover lease lasts.
const HELD_FOR: Duration = Duration::from_secs(4);

async fn db_now(provider: &MySqlLockProvider) -> DateTime<Utc> {
    let mut conn = provider.pool().get_conn().await.expect("connection");
    let now: chrono::NaiveDateTime = conn
        .query_first("SELECT UTC_TIMESTAMP(3)")
        .await
        .expect("UTC_TIMESTAMP")
        .expect("a row");
    now.and_utc()
}

fn request(name: &Arc<str>, owner: &str, at_most: Duration) -> LockRequest {
    testkit::request(name, owner, at_most, None)
}

/// Run by the parent under `faketime`; run directly, it makes the same checks with the
/// machine's own clock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_clock_skew() {
    let Some(provider) = common::provider().await else {
        return;
    };
    let db = db_now(&provider).await;
    let skew = Utc::now() - db;
    match std::env::var(SKEW_ENV) {
        Ok(expected) => assert!(
            skew.num_minutes().abs() >= 170,
            "faketime {expected} did not skew this process's clock: it is {skew} from the server's"
        ),
        Err(_) => eprintln!("client clock is {skew} from the server's"),
    }

    // Taking a lease: lock_until and locked_at are the server's times.
    let name = testkit::unique_name("db-time");
    let lease = match provider
        .acquire(&request(&name, "skewed", Duration::from_secs(1)))
        .await
        .expect("acquire")
    {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("a fresh lock was refused: {refused:?}"),
    };
    let records = provider.list_locks().await.expect("list_locks");
    let record = records.iter().find(|r| *r.name == *name).expect("listed");
    assert!(
        (record.locked_at - db).num_seconds().abs() <= 5,
        "locked_at {} is not the server's time {db}",
        record.locked_at
    );
    assert_eq!(record.lock_until - record.locked_at, TimeDelta::seconds(1));
    assert!(record.held);

    // Refused while held, with the server's lock_until in the refusal.
    match provider
        .acquire(&request(&name, "other", Duration::from_secs(60)))
        .await
        .expect("acquire")
    {
        AcquireOutcome::Refused(refusal) => {
            assert_eq!(refusal.reason, RefusalReason::Held);
            let until = refusal.lock_until.expect("lock_until in the refusal");
            assert!(
                (until - record.lock_until).num_seconds().abs() <= 1,
                "refusal says until {until}, the row says {}",
                record.lock_until
            );
        }
        acquired => panic!("a held lock was granted: {acquired:?}"),
    }

    // Extended by the server's clock: still held after the first second.
    assert!(
        provider
            .extend(&lease, Duration::from_secs(3))
            .await
            .expect("extend")
    );
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(matches!(
        provider
            .acquire(&request(&name, "other", Duration::from_secs(60)))
            .await
            .expect("acquire"),
        AcquireOutcome::Refused(_)
    ));
    assert!(
        provider
            .release(&lease, Duration::ZERO)
            .await
            .expect("release")
    );

    // Expired by the server's clock.
    let short = testkit::unique_name("db-time-expiry");
    let AcquireOutcome::Acquired(_) = provider
        .acquire(&request(&short, "skewed", Duration::from_secs(1)))
        .await
        .expect("acquire")
    else {
        panic!("a fresh lock was refused")
    };
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let AcquireOutcome::Acquired(lease) = provider
        .acquire(&request(&short, "other", Duration::from_secs(60)))
        .await
        .expect("acquire")
    else {
        panic!("a lease past its lock_at_most_for by the server's clock was refused")
    };
    provider
        .release(&lease, Duration::ZERO)
        .await
        .expect("release");

    // For the parent: a lock left held, as by a holder that died.
    if let Ok(held) = std::env::var(HELD_ENV) {
        let held: Arc<str> = held.into();
        assert!(matches!(
            provider
                .acquire(&request(&held, "skewed-and-dead", HELD_FOR))
                .await
                .expect("acquire"),
            AcquireOutcome::Acquired(_)
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expiry_follows_the_database_clock_under_a_skewed_client_clock() {
    let Some(provider) = common::provider().await else {
        return;
    };
    if !test_support::skip::command_available("faketime") {
        return;
    }
    let exe = std::env::current_exe().expect("test binary path");
    for skew in ["+3h", "-3h"] {
        let held = testkit::unique_name("db-time-held");
        // Timers run on the monotonic clock; only the wall clock is to be wrong.
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

        // The child, its clock `skew` off, left `held` for HELD_FOR by the server's clock. Had
        // it written its own clock's time, the lease would end 3 hours early or late.
        let until = provider
            .list_locks()
            .await
            .expect("list_locks")
            .into_iter()
            .find(|r| *r.name == *held)
            .expect("the child's lock")
            .lock_until;
        let now = db_now(&provider).await;
        assert!(
            until > now && until - now <= TimeDelta::from_std(HELD_FOR).unwrap(),
            "the child ({skew}) wrote lock_until {until}, the server's time is {now}"
        );
        let contender = request(&held, "parent", Duration::from_secs(60));
        assert!(
            matches!(
                provider.acquire(&contender).await.expect("acquire"),
                AcquireOutcome::Refused(_)
            ),
            "the lock the child ({skew}) left was free at once"
        );
        let wait = (until - now + TimeDelta::milliseconds(300))
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
            refused => panic!(
                "the lock the child ({skew}) left was still held after its lock_until: {refused:?}"
            ),
        }
    }
}
