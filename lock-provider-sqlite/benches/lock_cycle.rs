//! What the provider adds on top of SQLite itself.
//!
//! - cycle: a winning acquire plus its release through `SqliteLockProvider`, against the same
//!   statements run by hand on one rusqlite connection (the floor), and against those
//!   statements run through the same `spawn_blocking` hand-off the provider uses.
//! - losing acquire: a refused acquire through the provider, against `SELECT 1` by hand and
//!   through the same hand-off.
//!
//! `cargo bench -p lock-provider-sqlite` runs the full measurement (its arguments contain
//! `--bench`); any other run (e.g. `cargo test --all-targets`) is a short smoke run.

use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use lock_core::{AcquireOutcome, LockProvider, LockRequest};
use lock_provider_sqlite::SqliteLockProvider;
use lock_provider_sqlite::rusqlite::{Connection, OptionalExtension, params};

const TARGET_CYCLE: f64 = 1.15;
const TARGET_LOSING: f64 = 1.5;

// The provider's statements for the default table, written out by hand.
const NOW: &str = "strftime('%Y-%m-%d %H:%M:%f', 'now')";
static ACQUIRE_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO \"shedlock\" AS cur (\"name\", \"lock_until\", \"locked_at\", \"locked_by\", \"fence\", \"last_fire\") \
         VALUES (?1, strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (?3 / 1000.0) || ' seconds'), {NOW}, ?2, 1, ?4) \
         ON CONFLICT (\"name\") DO UPDATE SET \"lock_until\" = excluded.\"lock_until\", \
         \"locked_at\" = excluded.\"locked_at\", \"locked_by\" = excluded.\"locked_by\", \
         \"fence\" = cur.\"fence\" + 1, \"last_fire\" = coalesce(excluded.\"last_fire\", cur.\"last_fire\") \
         WHERE cur.\"lock_until\" <= excluded.\"locked_at\" AND (excluded.\"last_fire\" IS NULL \
         OR cur.\"last_fire\" IS NULL OR cur.\"last_fire\" < excluded.\"last_fire\") RETURNING \"fence\""
    )
});
static REFUSAL_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT \"locked_by\", \"lock_until\", \"last_fire\", CASE WHEN \"lock_until\" > {NOW} THEN 1 \
         WHEN ?2 IS NOT NULL AND \"last_fire\" >= ?2 THEN 2 ELSE 0 END FROM \"shedlock\" WHERE \"name\" = ?1"
    )
});
static RELEASE_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "UPDATE \"shedlock\" SET \"lock_until\" = max({NOW}, coalesce(strftime('%Y-%m-%d %H:%M:%f', \
         \"locked_at\", '+' || (?4 / 1000.0) || ' seconds'), {NOW})) \
         WHERE \"name\" = ?1 AND \"locked_by\" = ?2 AND \"fence\" = ?3"
    )
});

/// The provider's acquire, by hand: the refusal read; if the lease looks free, BEGIN
/// IMMEDIATE, the upsert, COMMIT. Returns the fence when granted.
fn acquire_by_hand(c: &Connection, name: &str, owner: &str) -> Option<i64> {
    let reason: Option<i64> = c
        .prepare_cached(&REFUSAL_SQL)
        .unwrap()
        .query_row(params![name, None::<String>], |r| r.get(3))
        .optional()
        .unwrap();
    if reason.is_some_and(|reason| reason != 0) {
        return None;
    }
    c.prepare_cached("BEGIN IMMEDIATE")
        .unwrap()
        .execute([])
        .unwrap();
    let fence: Option<i64> = c
        .prepare_cached(&ACQUIRE_SQL)
        .unwrap()
        .query_row(params![name, owner, 300_000, None::<String>], |r| r.get(0))
        .optional()
        .unwrap();
    c.prepare_cached("COMMIT").unwrap().execute([]).unwrap();
    fence
}

/// The provider's release, by hand: one UPDATE committed with `synchronous = NORMAL`.
fn release_by_hand(c: &Connection, name: &str, owner: &str, fence: i64) {
    c.prepare_cached("PRAGMA synchronous = NORMAL")
        .unwrap()
        .execute([])
        .unwrap();
    let changed = c
        .prepare_cached(&RELEASE_SQL)
        .unwrap()
        .execute(params![name, owner, fence, 0])
        .unwrap();
    assert_eq!(changed, 1);
    c.prepare_cached("PRAGMA synchronous = FULL")
        .unwrap()
        .execute([])
        .unwrap();
}

fn select_one(c: &Connection) -> i64 {
    c.prepare_cached("SELECT 1")
        .unwrap()
        .query_row([], |r| r.get(0))
        .unwrap()
}

struct Stats {
    mean: Duration,
    p50: Duration,
    p99: Duration,
}

fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    let p50 = samples[samples.len() / 2];
    let p99 = samples[(samples.len() * 99 / 100).min(samples.len() - 1)];
    Stats { mean, p50, p99 }
}

fn print(label: &str, s: &Stats) {
    println!(
        "{label:<50} mean {:>8.2} µs   p50 {:>8.2} µs   p99 {:>8.2} µs",
        s.mean.as_secs_f64() * 1e6,
        s.p50.as_secs_f64() * 1e6,
        s.p99.as_secs_f64() * 1e6
    );
}

/// The ratio of the means (what the targets are stated in), and of the medians, which a few
/// slow disk flushes on a shared machine move much less.
fn ratio(label: &str, a: &Stats, b: &Stats, target: Option<f64>) {
    let r = a.mean.as_secs_f64() / b.mean.as_secs_f64();
    let median = a.p50.as_secs_f64() / b.p50.as_secs_f64();
    let verdict = match target {
        Some(t) if r <= t => format!("target <= {t}: met"),
        Some(t) => format!("target <= {t}: NOT met"),
        None => "for comparison".to_owned(),
    };
    println!("ratio {label:<50} means {r:>7.2}  p50s {median:>7.2}   ({verdict})");
}

/// Runs the operations round-robin, so that drift (disk flush latency, other load on the
/// machine) affects all of them alike; returns one result per operation.
fn measure(warmup: usize, iterations: usize, ops: &mut [&mut dyn FnMut()]) -> Vec<Stats> {
    for _ in 0..warmup {
        ops.iter_mut().for_each(|op| op());
    }
    let mut samples = vec![Vec::with_capacity(iterations); ops.len()];
    for _ in 0..iterations {
        for (op, samples) in ops.iter_mut().zip(&mut samples) {
            let start = Instant::now();
            op();
            samples.push(start.elapsed());
        }
    }
    samples.into_iter().map(stats).collect()
}

/// The provider and two by-hand connections on one database file, set up alike.
struct Setup {
    _dir: tempfile::TempDir,
    provider: SqliteLockProvider,
    hand: Connection,
    shared: Arc<Mutex<Connection>>,
}

fn setup(runtime: &tokio::runtime::Runtime, parent: Option<&std::path::Path>) -> Setup {
    let dir = match parent {
        Some(parent) => tempfile::tempdir_in(parent).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let path = dir.path().join("bench.db");
    let provider = SqliteLockProvider::open(&path).unwrap();
    runtime.block_on(provider.ensure_schema()).unwrap();
    let connect = || {
        let c = Connection::open(&path).unwrap();
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        c.pragma_update(None, "synchronous", "FULL").unwrap();
        c.set_prepared_statement_cache_capacity(32);
        c
    };
    Setup {
        provider,
        hand: connect(),
        shared: Arc::new(Mutex::new(connect())),
        _dir: dir,
    }
}

fn request(name: &str, owner: &str) -> LockRequest {
    LockRequest {
        name: name.into(),
        locked_by: owner.into(),
        lock_at_most_for: Duration::from_secs(300),
        slot: None,
    }
}

/// Winning acquire + release: provider, by hand, by hand through the hand-off.
fn cycles(
    runtime: &tokio::runtime::Runtime,
    s: &Setup,
    warmup: usize,
    iterations: usize,
) -> [Stats; 3] {
    let cycle_request = request("bench-cycle", "bench");
    let mut cycle = || {
        runtime.block_on(async {
            let AcquireOutcome::Acquired(lease) = s.provider.acquire(&cycle_request).await.unwrap()
            else {
                panic!("cycle: refused")
            };
            assert!(s.provider.release(&lease, Duration::ZERO).await.unwrap());
        })
    };
    let mut floor = || {
        let fence = acquire_by_hand(&s.hand, "bench-floor", "bench").expect("floor: refused");
        release_by_hand(&s.hand, "bench-floor", "bench", fence);
    };
    let mut floor_handoff = || {
        runtime.block_on(async {
            let c = Arc::clone(&s.shared);
            let fence = tokio::task::spawn_blocking(move || {
                acquire_by_hand(&c.lock().unwrap(), "bench-handoff", "bench")
            })
            .await
            .unwrap()
            .expect("hand-off: refused");
            let c = Arc::clone(&s.shared);
            tokio::task::spawn_blocking(move || {
                release_by_hand(&c.lock().unwrap(), "bench-handoff", "bench", fence)
            })
            .await
            .unwrap();
        })
    };
    measure(
        warmup,
        iterations,
        &mut [&mut cycle, &mut floor, &mut floor_handoff],
    )
    .try_into()
    .ok()
    .unwrap()
}

/// A losing acquire (provider, by hand) and `SELECT 1` (by hand, through the hand-off).
fn losing(
    runtime: &tokio::runtime::Runtime,
    s: &Setup,
    warmup: usize,
    iterations: usize,
) -> [Stats; 4] {
    // The lock is held by someone else for the whole run.
    let held = runtime
        .block_on(s.provider.acquire(&request("bench-held", "holder")))
        .unwrap();
    assert!(matches!(held, AcquireOutcome::Acquired(_)));
    let losing_request = request("bench-held", "loser");
    let mut losing = || {
        runtime.block_on(async {
            let outcome = s.provider.acquire(&losing_request).await.unwrap();
            assert!(matches!(outcome, AcquireOutcome::Refused(_)));
        })
    };
    let mut losing_by_hand = || {
        assert!(acquire_by_hand(&s.hand, "bench-held", "loser").is_none());
    };
    let mut select = || {
        assert_eq!(select_one(&s.hand), 1);
    };
    let mut select_handoff = || {
        runtime.block_on(async {
            let c = Arc::clone(&s.shared);
            let one = tokio::task::spawn_blocking(move || select_one(&c.lock().unwrap()))
                .await
                .unwrap();
            assert_eq!(one, 1);
        })
    };
    measure(
        warmup,
        iterations,
        &mut [
            &mut losing,
            &mut losing_by_hand,
            &mut select,
            &mut select_handoff,
        ],
    )
    .try_into()
    .ok()
    .unwrap()
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let (warmup, iterations) = if full { (300, 5_000) } else { (3, 20) };
    println!(
        "lock_cycle ({} run: {iterations} iterations after {warmup} warm-up, operations interleaved)",
        if full { "full" } else { "smoke" }
    );
    if !full {
        println!("smoke run (unoptimized, few iterations): the ratios below mean nothing");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // On disk, a granted acquire waits for an fsync (synchronous = FULL), which dominates the
    // cycle. On tmpfs the flush is free, which shows what the provider itself adds.
    let disk = setup(&runtime, None);
    let [cycle, floor, floor_handoff] = cycles(&runtime, &disk, warmup, iterations);
    print("cycle on disk: provider acquire + release", &cycle);
    print("cycle on disk: same statements by hand (floor)", &floor);
    print(
        "cycle on disk: by hand through spawn_blocking",
        &floor_handoff,
    );
    ratio("cycle on disk / floor", &cycle, &floor, Some(TARGET_CYCLE));
    ratio(
        "cycle on disk / by hand through spawn_blocking",
        &cycle,
        &floor_handoff,
        Some(TARGET_CYCLE),
    );

    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        let tmpfs = setup(&runtime, Some(shm));
        let [cycle, floor, floor_handoff] = cycles(&runtime, &tmpfs, warmup, iterations);
        print("cycle on tmpfs: provider acquire + release", &cycle);
        print("cycle on tmpfs: same statements by hand (floor)", &floor);
        print(
            "cycle on tmpfs: by hand through spawn_blocking",
            &floor_handoff,
        );
        ratio("cycle on tmpfs / floor", &cycle, &floor, Some(TARGET_CYCLE));
        ratio(
            "cycle on tmpfs / by hand through spawn_blocking",
            &cycle,
            &floor_handoff,
            Some(TARGET_CYCLE),
        );
    } else {
        println!("cycle on tmpfs: skipped, no /dev/shm on this machine");
    }

    let [losing, losing_by_hand, select, select_handoff] =
        self::losing(&runtime, &disk, warmup, iterations * 4);
    print("losing acquire: provider", &losing);
    print("losing acquire: same statements by hand", &losing_by_hand);
    print("SELECT 1: by hand", &select);
    print("SELECT 1: through spawn_blocking", &select_handoff);
    ratio(
        "losing / SELECT 1 by hand",
        &losing,
        &select,
        Some(TARGET_LOSING),
    );
    ratio(
        "losing / SELECT 1 through spawn_blocking",
        &losing,
        &select_handoff,
        Some(TARGET_LOSING),
    );
    ratio(
        "losing by hand / SELECT 1 by hand",
        &losing_by_hand,
        &select,
        None,
    );
}
