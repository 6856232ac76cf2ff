//! Expiry follows the database's clock, not the client's.
//!
//! The test re-runs its own binary as a child process under `faketime`, so the child's
//! wall clock is 10 minutes ahead of (or behind) the database server's. The child takes a 2 s
//! lease and exits; the parent checks that the lease is held, then free about 2 s later by the
//! database's clock, whatever the child believed the time was. A fast child also cannot steal
//! a lease that the parent holds, which a client-clock comparison would allow.

mod common;

use std::time::Duration;

use chrono::{DateTime, Utc};
use lock_core::{AcquireOutcome, LockProvider, testkit};

const CHILD_ROLE: &str = "LOCKPG_CLOCK_CHILD";
const TEST_NAME: &str = "database_clock_decides_expiry";
const CHILD_LEASE: Duration = Duration::from_secs(2);
/// How long after `lock_until` (by the database's clock) the parent tries again: one round
/// trip from reading the clock to the acquire, with room for a stalled test thread.
const MARGIN: chrono::Duration = chrono::Duration::milliseconds(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_clock_decides_expiry() {
    if let Ok(role) = std::env::var(CHILD_ROLE) {
        return child(&role).await;
    }
    let Some(provider) = common::provider(common::CONFORMANCE_TABLE).await else {
        return;
    };
    if !test_support::skip::command_available("faketime") {
        return;
    }

    for offset in ["+10m", "-10m"] {
        // The child takes a short lease with its skewed clock, and exits without releasing.
        let name = testkit::unique_name("dbclock");
        let out = run_child(offset, &format!("take:{name}"));
        assert_eq!(
            out.result, "ACQUIRED",
            "{offset}: the child could not take a free lock"
        );
        let skew = out.client_now - out.db_now;
        assert!(
            skew.num_minutes().abs() >= 9,
            "{offset}: faketime had no effect (child clock {} vs database {})",
            out.client_now,
            out.db_now
        );

        let other = testkit::request(&name, "parent", Duration::from_secs(60), None);
        match provider.acquire(&other).await.unwrap() {
            AcquireOutcome::Refused(refusal) => {
                assert_eq!(refusal.locked_by.as_deref(), Some("skewed-child"));
            }
            AcquireOutcome::Acquired(_) => panic!(
                "{offset}: the child's lease was already over (a clock behind must not shorten it)"
            ),
        }
        let record = provider
            .list_locks()
            .await
            .unwrap()
            .into_iter()
            .find(|r| *r.name == *name)
            .unwrap();
        let lease = record.lock_until - record.locked_at;
        assert_eq!(
            lease.num_milliseconds(),
            CHILD_LEASE.as_millis() as i64,
            "{offset}: the lease is not 2 s of database time"
        );
        // The row's times are the database's, not the child's.
        assert!(
            (record.locked_at - out.db_now).num_seconds().abs() < 5,
            "{offset}: locked_at {} is not database time {}",
            record.locked_at,
            out.db_now
        );

        // The lease's length of database time after the child's acquire it is over, even
        // though for a clock 10 minutes behind it would still run for 10 minutes, and for one
        // 10 minutes ahead it was over before it began. The wait is measured on the
        // database's clock from the row's own `lock_until`: the child's start-up under
        // faketime takes a varying part of a second on a loaded machine, so a wait counted
        // from before the child started could end before the lease did.
        let wait = (record.lock_until - provider.database_time().await.unwrap() + MARGIN)
            .to_std()
            .unwrap_or_default();
        tokio::time::sleep(wait).await;
        let AcquireOutcome::Acquired(lease) = provider.acquire(&other).await.unwrap() else {
            panic!(
                "{offset}: the child's lease, until {}, still held {} ms after it by the database's clock",
                record.lock_until,
                MARGIN.num_milliseconds()
            );
        };
        provider.release(&lease, Duration::ZERO).await.unwrap();
    }

    // A child 10 minutes ahead sees every lease as long expired by its own clock; it still
    // cannot take one that the database says is held.
    let name = testkit::unique_name("dbclock-steal");
    let holder = testkit::request(&name, "parent", Duration::from_secs(60), None);
    let AcquireOutcome::Acquired(lease) = provider.acquire(&holder).await.unwrap() else {
        panic!("free lock refused");
    };
    let out = run_child("+10m", &format!("take:{name}"));
    assert_eq!(
        out.result, "REFUSED",
        "a fast client clock stole a held lock"
    );
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
}

struct ChildReport {
    client_now: DateTime<Utc>,
    db_now: DateTime<Utc>,
    result: String,
}

fn run_child(offset: &str, role: &str) -> ChildReport {
    let exe = std::env::current_exe().expect("test binary path");
    // Only the wall clock is skewed; tokio's timers keep a sane monotonic clock.
    let output = test_support::process::under_faketime(offset, &exe)
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env(CHILD_ROLE, role)
        .output()
        .expect("run the child under faketime");
    let stdout = test_support::process::expect_success(&output, "child");
    let field = |key: &str| {
        stdout
            .lines()
            // The harness prints `test <name> ... ` on the line of the first report.
            .find_map(|l| l.split_once(&format!("CHILD {key} ")).map(|(_, v)| v))
            .unwrap_or_else(|| panic!("child printed no {key}:\n{stdout}"))
            .to_owned()
    };
    let time = |key: &str| {
        DateTime::parse_from_rfc3339(&field(key))
            .unwrap()
            .with_timezone(&Utc)
    };
    ChildReport {
        client_now: time("client_now"),
        db_now: time("db_now"),
        result: field("result"),
    }
}

/// The child's side: report both clocks, try the lock, exit holding whatever it got.
async fn child(role: &str) {
    let name = role.strip_prefix("take:").expect("child role");
    let provider = common::provider(common::CONFORMANCE_TABLE)
        .await
        .expect("the parent reached the database, so must the child");
    let client = common::raw_client().await;
    let db_now: chrono::NaiveDateTime = client
        .query_one("SELECT timezone('utc', CURRENT_TIMESTAMP)::timestamp", &[])
        .await
        .unwrap()
        .get(0);
    println!("CHILD client_now {}", Utc::now().to_rfc3339());
    println!("CHILD db_now {}", db_now.and_utc().to_rfc3339());
    let request = testkit::request(&name.into(), "skewed-child", CHILD_LEASE, None);
    let result = match provider.acquire(&request).await.unwrap() {
        AcquireOutcome::Acquired(_) => "ACQUIRED",
        AcquireOutcome::Refused(_) => "REFUSED",
    };
    println!("CHILD result {result}");
}
