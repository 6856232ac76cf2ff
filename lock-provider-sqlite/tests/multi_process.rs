//! Several OS processes on one database file: ShedLock's fuzz scenario across processes.
//!
//! The parent test re-executes this test binary once per worker, running only
//! `child_process_worker` with environment variables that put it in worker mode. Each worker
//! loops: acquire (slot-less), read a counter from another table, sleep ~1 ms, write it back
//! plus one, release. The counter is deliberately updated non-atomically, so two processes
//! holding the lock at once would lose an increment: the final counter must equal the sum of
//! the wins exactly.

use std::process::{Command, Stdio};
use std::time::Duration;

use lock_core::{AcquireOutcome, LockProvider, LockRequest};
use lock_provider_sqlite::SqliteLockProvider;
use lock_provider_sqlite::rusqlite::Connection;

const PROCESSES: usize = 4;
const ITERATIONS: usize = 300;
const LOCK: &str = "multi-process-counter";
const WINS_MARKER: &str = "LOCK_SQLITE_CHILD_WINS=";

const ENV_DB: &str = "LOCK_SQLITE_CHILD_DB";
const ENV_WORKER: &str = "LOCK_SQLITE_CHILD_WORKER";

#[test]
fn processes_sharing_one_file_never_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("locks.db");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let provider = SqliteLockProvider::open(&db).unwrap();
    runtime.block_on(provider.ensure_schema()).unwrap();
    Connection::open(&db)
        .unwrap()
        .execute_batch("CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL); INSERT INTO counter VALUES (1, 0);")
        .unwrap();

    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..PROCESSES)
        .map(|worker| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "child_process_worker",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env(ENV_DB, &db)
                .env(ENV_WORKER, worker.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn a worker process")
        })
        .collect();

    let mut wins = Vec::new();
    for (worker, child) in children.into_iter().enumerate() {
        let output = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "worker {worker} failed ({}):\n{stdout}\n{stderr}",
            output.status
        );
        let count: u64 = stdout
            .lines()
            .find_map(|line| line.split_once(WINS_MARKER).map(|(_, wins)| wins))
            .unwrap_or_else(|| panic!("worker {worker} reported no wins line:\n{stdout}\n{stderr}"))
            .trim()
            .parse()
            .unwrap();
        wins.push(count);
    }
    let counter: i64 = Connection::open(&db)
        .unwrap()
        .query_row("SELECT value FROM counter WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    let total: u64 = wins.iter().sum();
    eprintln!("wins per process {wins:?}, total {total}, counter {counter}");
    assert!(total > 0, "no process ever got the lock");
    let counter = u64::try_from(counter).unwrap();
    assert_eq!(
        counter, total,
        "counter {counter} after {total} wins {wins:?}: two processes held the lock at once"
    );
    assert!(
        wins.iter().filter(|&&w| w > 0).count() >= 2,
        "only one process ever won ({wins:?}): the test did not exercise contention"
    );
    let record = runtime
        .block_on(provider.list_locks())
        .unwrap()
        .into_iter()
        .find(|r| r.name == LOCK)
        .unwrap();
    assert_eq!(
        record.fence, total,
        "every win must have incremented the fence once"
    );
}

/// The worker's body. In a normal test run (no worker environment) it returns at once: it is
/// only the entry point the parent test re-executes.
#[test]
fn child_process_worker() {
    let (Ok(db), Ok(worker)) = (std::env::var(ENV_DB), std::env::var(ENV_WORKER)) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let provider = SqliteLockProvider::open(&db).expect("worker: open the lock database");
    let counter = Connection::open(&db).expect("worker: open the counter");
    counter.busy_timeout(Duration::from_secs(10)).unwrap();
    let request = LockRequest {
        name: LOCK.into(),
        locked_by: format!("worker-{worker}:{}", std::process::id()).into(),
        lock_at_most_for: Duration::from_secs(60),
        slot: None,
    };
    let mut wins = 0u64;
    runtime.block_on(async {
        for i in 0..ITERATIONS {
            let outcome = provider.acquire(&request).await.expect("worker: acquire");
            if let AcquireOutcome::Acquired(lease) = outcome {
                let seen: i64 = counter
                    .query_row("SELECT value FROM counter WHERE id = 1", [], |r| r.get(0))
                    .expect("worker: read counter");
                std::thread::sleep(Duration::from_millis(1));
                counter
                    .execute("UPDATE counter SET value = ?1 WHERE id = 1", [seen + 1])
                    .expect("worker: write counter");
                wins += 1;
                assert!(
                    provider
                        .release(&lease, Duration::ZERO)
                        .await
                        .expect("worker: release"),
                    "worker: the release of a held lease matched no row"
                );
            }
            // Let the others in: without a pause the releasing process would usually win again.
            tokio::time::sleep(Duration::from_micros(200 + (i as u64 * 37) % 600)).await;
        }
    });
    // On a line of its own: the test harness prints `test child_process_worker ... ` first.
    println!("\n{WINS_MARKER}{wins}");
}
