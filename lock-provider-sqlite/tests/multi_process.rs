//! Several OS processes on one database file: ShedLock's fuzz scenario across processes.
//!
//! The parent test re-executes this test binary once per worker, running only
//! `child_process_worker` with environment variables that put it in worker mode. Each worker
//! loops: acquire (slot-less), read a counter from another table, sleep ~1 ms, write it back
//! plus one, release. The counter is deliberately updated non-atomically, so two processes
//! holding the lock at once would lose an increment: the final counter must equal the sum of
//! the wins exactly. Each worker reports who it was, how many attempts it made and how many it
//! won, and the parent checks every report, so a worker that ran nothing cannot pass. Run alone
//! (a normal `cargo test`), the worker works on a database of its own and must win every
//! attempt (`the_worker_run_alone_does_its_work`).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use lock_core::{AcquireOutcome, LockProvider, LockRequest};
use lock_provider_sqlite::SqliteLockProvider;
use lock_provider_sqlite::rusqlite::Connection;

const PROCESSES: usize = 4;
const ITERATIONS: usize = 300;
const LOCK: &str = "multi-process-counter";
const REPORT_MARKER: &str = "LOCK_SQLITE_CHILD_REPORT";

const ENV_DB: &str = "LOCK_SQLITE_CHILD_DB";
const ENV_WORKER: &str = "LOCK_SQLITE_CHILD_WORKER";

/// What a worker did, from the line it prints last:
/// `LOCK_SQLITE_CHILD_REPORT worker=<id> attempts=<n> wins=<n>`.
#[derive(Debug, PartialEq, Eq)]
struct WorkerReport {
    worker: String,
    attempts: u64,
    wins: u64,
}

impl WorkerReport {
    fn line(&self) -> String {
        format!(
            "{REPORT_MARKER} worker={} attempts={} wins={}",
            self.worker, self.attempts, self.wins
        )
    }

    fn parse(stdout: &str) -> Option<WorkerReport> {
        let line = stdout.lines().find_map(|l| l.strip_prefix(REPORT_MARKER))?;
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .map(str::to_owned)
        };
        Some(WorkerReport {
            worker: field("worker")?,
            attempts: field("attempts")?.parse().ok()?,
            wins: field("wins")?.parse().ok()?,
        })
    }
}

#[test]
fn processes_sharing_one_file_never_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("locks.db");
    let runtime = current_thread();
    let provider = SqliteLockProvider::open(&db).unwrap();
    runtime.block_on(provider.ensure_schema()).unwrap();
    create_counter(&db);

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
        let report = WorkerReport::parse(&stdout)
            .unwrap_or_else(|| panic!("worker {worker} reported no work:\n{stdout}\n{stderr}"));
        // Each worker really ran, as the worker it was told to be, every iteration.
        assert_eq!(
            (report.worker.as_str(), report.attempts),
            (worker.to_string().as_str(), ITERATIONS as u64),
            "worker {worker} did not do its work: {report:?}"
        );
        wins.push(report.wins);
    }
    let counter = read_counter(&db);
    let total: u64 = wins.iter().sum();
    eprintln!("wins per process {wins:?}, total {total}, counter {counter}");
    assert!(total > 0, "no process ever got the lock");
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

/// A worker run by itself, as `cargo test` runs it, must do real work and report it, so that
/// its `ok` is not a pass for doing nothing.
#[test]
fn the_worker_run_alone_does_its_work() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_worker",
            "--nocapture",
            "--test-threads=1",
        ])
        .env_remove(ENV_DB)
        .env_remove(ENV_WORKER)
        .output()
        .expect("run the worker");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let report = WorkerReport::parse(&stdout)
        .unwrap_or_else(|| panic!("the worker reported no work:\n{stdout}\n{stderr}"));
    assert_eq!(
        (report.attempts, report.wins),
        (ITERATIONS as u64, ITERATIONS as u64),
        "alone, every attempt must win:\n{stdout}"
    );
}

/// The worker's body. Re-executed by the parent test with the worker environment, it works on
/// the parent's database; run alone (a normal test run), it works on a database of its own and
/// checks that every attempt won, so it never passes by doing nothing.
#[test]
fn child_process_worker() {
    let report = match (std::env::var(ENV_DB), std::env::var(ENV_WORKER)) {
        (Ok(db), Ok(worker)) => work(&db, &worker),
        _ => {
            // Alone: a database of its own, where every attempt must win.
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("alone.db");
            let provider = SqliteLockProvider::open(&db).unwrap();
            current_thread().block_on(provider.ensure_schema()).unwrap();
            create_counter(&db);
            let report = work(db.to_str().unwrap(), "alone");
            assert_eq!(report.wins, ITERATIONS as u64, "{report:?}");
            assert_eq!(read_counter(&db), report.wins);
            report
        }
    };
    // On a line of its own: the test harness prints `test child_process_worker ... ` first.
    println!("\n{}", report.line());
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn create_counter(db: &Path) {
    Connection::open(db)
        .unwrap()
        .execute_batch(
            "CREATE TABLE counter (id INTEGER PRIMARY KEY, value INTEGER NOT NULL); \
             INSERT INTO counter VALUES (1, 0);",
        )
        .unwrap();
}

fn read_counter(db: &Path) -> u64 {
    let value: i64 = Connection::open(db)
        .unwrap()
        .query_row("SELECT value FROM counter WHERE id = 1", [], |r| r.get(0))
        .unwrap();
    u64::try_from(value).unwrap()
}

/// The worker loop: acquire, read the counter, sleep ~1 ms, write it back plus one, release.
fn work(db: &str, worker: &str) -> WorkerReport {
    let provider = SqliteLockProvider::open(db).expect("worker: open the lock database");
    let counter = Connection::open(db).expect("worker: open the counter");
    counter.busy_timeout(Duration::from_secs(10)).unwrap();
    let request = LockRequest {
        name: LOCK.into(),
        locked_by: format!("worker-{worker}:{}", std::process::id()).into(),
        lock_at_most_for: Duration::from_secs(60),
        slot: None,
        max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
        give_up_at: None,
    };
    let (mut attempts, mut wins) = (0u64, 0u64);
    current_thread().block_on(async {
        for i in 0..ITERATIONS {
            let outcome = provider.acquire(&request).await.expect("worker: acquire");
            attempts += 1;
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
    WorkerReport {
        worker: worker.to_owned(),
        attempts,
        wins,
    }
}
