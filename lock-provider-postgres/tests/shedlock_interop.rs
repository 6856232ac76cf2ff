//! ShedLock and this provider share one table: neither can take a lock the other holds.
//!
//! The ShedLock side is ShedLock's own SQL, as its `PostgresSqlServerTimeStatementsSource`
//! (JdbcTemplate provider, `usingDbTime()`) issues it, written out here with positional
//! parameters: `$1` name, `$2` the interval as ShedLock binds it (`"<ms> milliseconds"`),
//! `$3` ShedLock's `lockedBy` (the host name by default).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use lock_core::{AcquireOutcome, LockProvider, RefusalReason, testkit};
use tokio_postgres::Client;
use tokio_postgres::types::Type;

const NOW: &str = "timezone('utc', CURRENT_TIMESTAMP)";

/// ShedLock's statements against one table.
struct ShedLock {
    insert: String,
    update: String,
    unlock: String,
    extend: String,
    locked_by: String,
}

impl ShedLock {
    fn new(table: &str, locked_by: &str) -> Self {
        let at_most = format!("{NOW} + cast($2 as interval)");
        let update_clause = format!(
            " SET lock_until = {at_most}, locked_at = {NOW}, locked_by = $3 \
             WHERE {table}.name = $1 AND {table}.lock_until <= {NOW}"
        );
        let at_least = "locked_at + cast($2 as interval)";
        ShedLock {
            insert: format!(
                "INSERT INTO {table}(name, lock_until, locked_at, locked_by) \
                 VALUES($1, {at_most}, {NOW}, $3) ON CONFLICT (name) DO UPDATE{update_clause}"
            ),
            update: format!("UPDATE {table}{update_clause}"),
            unlock: format!(
                "UPDATE {table} SET lock_until = CASE WHEN {at_least} > {NOW} THEN {at_least} \
                 ELSE {NOW} END WHERE name = $1 AND locked_by = $3"
            ),
            extend: format!(
                "UPDATE {table} SET lock_until = {at_most} \
                 WHERE name = $1 AND locked_by = $3 AND lock_until > {NOW}"
            ),
            locked_by: locked_by.to_owned(),
        }
    }

    async fn run(&self, client: &Client, sql: &str, name: &str, interval: Duration) -> bool {
        let interval = format!("{} milliseconds", interval.as_millis());
        // JDBC binds ShedLock's Strings as varchar, which the statement casts to interval.
        let statement = client
            .prepare_typed(sql, &[Type::VARCHAR, Type::VARCHAR, Type::VARCHAR])
            .await
            .expect("ShedLock statement");
        let rows = client
            .execute(&statement, &[&name, &interval, &self.locked_by])
            .await
            .expect("ShedLock statement");
        rows == 1
    }

    /// ShedLock's lock(): the upsert for a name it has not seen, the update otherwise.
    async fn lock(&self, client: &Client, name: &str, at_most: Duration, known: bool) -> bool {
        let sql = if known { &self.update } else { &self.insert };
        self.run(client, sql, name, at_most).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neither_side_takes_a_lock_the_other_holds() {
    let Some(provider) = common::provider(common::CONFORMANCE_TABLE).await else {
        return;
    };
    let client = common::raw_client().await;
    let java = ShedLock::new(common::CONFORMANCE_TABLE, "java-host");
    let long = Duration::from_secs(300);
    let name = testkit::unique_name("interop");

    // Ours first.
    let ours = testkit::request(&name, "rust-instance", long, None);
    let AcquireOutcome::Acquired(lease) = provider.acquire(&ours).await.unwrap() else {
        panic!("free lock refused");
    };
    assert!(
        !java.lock(&client, &name, long, false).await,
        "ShedLock upsert took our lock"
    );
    assert!(
        !java.lock(&client, &name, long, true).await,
        "ShedLock update took our lock"
    );
    assert!(
        !java.run(&client, &java.extend, &name, long).await,
        "ShedLock extended our lock"
    );
    assert!(
        !java.run(&client, &java.unlock, &name, Duration::ZERO).await,
        "ShedLock released our lock"
    );
    let record = provider.list_locks().await.unwrap();
    let record = record.iter().find(|r| *r.name == *name).unwrap();
    assert!(record.held && record.locked_by == "rust-instance");
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());

    // ShedLock's turn: it takes the freed lock with its update.
    assert!(
        java.lock(&client, &name, long, true).await,
        "ShedLock refused a free lock"
    );
    let AcquireOutcome::Refused(refusal) = provider.acquire(&ours).await.unwrap() else {
        panic!("we took ShedLock's lock");
    };
    assert_eq!(refusal.reason, RefusalReason::Held);
    assert_eq!(refusal.locked_by.as_deref(), Some("java-host"));
    assert!(
        !provider.extend(&lease, long).await.unwrap(),
        "we extended ShedLock's lock"
    );
    assert!(
        !provider.release(&lease, Duration::ZERO).await.unwrap(),
        "we released ShedLock's lock"
    );
    assert!(
        java.run(&client, &java.extend, &name, long).await,
        "ShedLock's own extend"
    );
    assert!(
        java.run(&client, &java.unlock, &name, Duration::ZERO).await,
        "ShedLock's own unlock"
    );
    // ShedLock stores "now" rounded to the column's milliseconds, possibly up: wait that out.
    tokio::time::sleep(Duration::from_millis(5)).await;
    let AcquireOutcome::Acquired(next) = provider.acquire(&ours).await.unwrap() else {
        panic!("ShedLock's unlock did not free the lock for us");
    };
    assert_eq!(
        next.fence(),
        lease.fence() + 1,
        "fences keep increasing for our grants"
    );
    provider.release(&next, Duration::ZERO).await.unwrap();

    // A name ShedLock creates: its INSERT fills the extension columns with their defaults.
    let fresh = testkit::unique_name("interop-new");
    assert!(
        java.lock(&client, &fresh, long, false).await,
        "ShedLock's first insert"
    );
    let request = testkit::request(&fresh, "rust-instance", long, None);
    assert!(matches!(
        provider.acquire(&request).await.unwrap(),
        AcquireOutcome::Refused(_)
    ));
    assert!(
        java.run(&client, &java.unlock, &fresh, Duration::ZERO)
            .await
    );
    tokio::time::sleep(Duration::from_millis(5)).await;
    let AcquireOutcome::Acquired(lease) = provider.acquire(&request).await.unwrap() else {
        panic!("refused after ShedLock's unlock");
    };
    assert_eq!(lease.fence(), 1);
    provider.release(&lease, Duration::ZERO).await.unwrap();
}

/// Both sides hammer one name at once; a non-atomic counter touched only under the lock shows
/// that no two holders, of either kind, ever overlapped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_contention_keeps_exclusion() {
    // Attempts per worker, at most: the workers stop once each side has won WINS times, so a
    // side whose connections came up late (a loaded machine) still gets its turns instead of
    // finding the other side's workers done and the test over with "ours 0". Only a side that
    // never wins in all those attempts fails it (starvation, a real bug).
    const ITERATIONS: usize = 2_000;
    const WINS: u64 = 20;
    let Some(provider) = common::provider(common::CONFORMANCE_TABLE).await else {
        return;
    };
    let name = testkit::unique_name("interop-fuzz");
    let long = Duration::from_secs(300);
    let counter = AtomicU64::new(0);
    // Grants per side: [ours, ShedLock's].
    let runs = [AtomicU64::new(0), AtomicU64::new(0)];
    let (counter, runs) = (&counter, &runs);
    let both_won =
        |runs: &[AtomicU64; 2]| runs.iter().all(|side| side.load(Ordering::SeqCst) >= WINS);
    let critical = |side: usize| async move {
        let seen = counter.load(Ordering::SeqCst);
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_micros(200)).await;
        counter.store(seen + 1, Ordering::SeqCst);
        runs[side].fetch_add(1, Ordering::SeqCst);
    };

    let mut workers = Vec::new();
    for w in 0..3 {
        let provider = &provider;
        let name = &name;
        workers.push(Box::pin(async move {
            let request = testkit::request(name, &format!("rust-{w}"), long, None);
            for _ in 0..ITERATIONS {
                if both_won(runs) {
                    break;
                }
                if let AcquireOutcome::Acquired(lease) = provider.acquire(&request).await.unwrap() {
                    critical(0).await;
                    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
                }
                tokio::task::yield_now().await;
            }
        })
            as std::pin::Pin<
                Box<dyn std::future::Future<Output = ()> + Send + '_>,
            >);
    }
    for w in 0..3 {
        let name = &name;
        workers.push(Box::pin(async move {
            let client = common::raw_client().await;
            let java = ShedLock::new(common::CONFORMANCE_TABLE, &format!("java-{w}"));
            let mut known = false;
            for _ in 0..ITERATIONS {
                if both_won(runs) {
                    break;
                }
                if java.lock(&client, name, long, known).await {
                    critical(1).await;
                    assert!(java.run(&client, &java.unlock, name, Duration::ZERO).await);
                }
                known = true;
                tokio::task::yield_now().await;
            }
        }));
    }
    futures_util::future::join_all(workers).await;
    let ours = runs[0].load(Ordering::SeqCst);
    let theirs = runs[1].load(Ordering::SeqCst);
    let count = counter.load(Ordering::SeqCst);
    assert_eq!(count, ours + theirs, "two holders overlapped");
    assert!(
        ours > 0 && theirs > 0,
        "one side never won: ours {ours}, ShedLock's {theirs}"
    );
}
