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

use lock_core::{AcquireOutcome, LockProvider, testkit};
use lock_provider_sqlite::SqliteLockProvider;
use lock_provider_sqlite::rusqlite::{Connection, OptionalExtension, params};
use test_support::{Mode, Samples, Unit, stats};

const TARGET_CYCLE: f64 = 1.15;
/// Losing acquire over the same statements sent by hand: what the provider adds (the restated
/// target; `SELECT 1` is printed for context, since that floor moves with the machine).
const TARGET_LOSING: f64 = 1.10;

// The provider's statements for the default table, written out by hand.
const NOW: &str = "strftime('%Y-%m-%d %H:%M:%f', 'now')";
static ACQUIRE_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "INSERT INTO \"shedlock\" AS cur (\"name\", \"lock_until\", \"locked_at\", \"locked_by\", \"fence\", \"last_fire\") \
         SELECT ?1, strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (?3 / 1000.0) || ' seconds'), {NOW}, ?2, 1, ?4 \
         WHERE (?4 IS NULL OR ?4 <= strftime('%Y-%m-%d %H:%M:%f', 'now', '+' || (?5 / 1000.0) || ' seconds')) \
         AND (?6 IS NULL OR {NOW} <= ?6) \
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
        .query_row(
            params![name, owner, 300_000, None::<String>, 5_000, None::<String>],
            |r| r.get(0),
        )
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

/// Runs the operations round-robin, so that drift (disk flush latency, other load on the
/// machine) affects all of them alike; returns one result per operation.
fn measure(
    warmup: usize,
    iterations: usize,
    ops: &mut [(String, &mut dyn FnMut())],
) -> Vec<Samples> {
    for _ in 0..warmup {
        ops.iter_mut().for_each(|(_, op)| op());
    }
    let mut samples: Vec<Samples> = ops.iter().map(|(label, _)| Samples::new(label)).collect();
    for _ in 0..iterations {
        for ((_, op), samples) in ops.iter_mut().zip(&mut samples) {
            let start = Instant::now();
            op();
            samples.record(start);
        }
    }
    samples
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

/// Every bench lease: far longer than the run.
const LEASE: Duration = Duration::from_secs(300);

/// Winning acquire + release: provider, by hand, by hand through the hand-off.
fn cycles(
    runtime: &tokio::runtime::Runtime,
    s: &Setup,
    place: &str,
    warmup: usize,
    iterations: usize,
) -> [Samples; 3] {
    let cycle_request = testkit::request(&"bench-cycle".into(), "bench", LEASE, None);
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
        &mut [
            (
                format!("cycle on {place}: provider acquire + release"),
                &mut cycle,
            ),
            (
                format!("cycle on {place}: same statements by hand (floor)"),
                &mut floor,
            ),
            (
                format!("cycle on {place}: by hand through spawn_blocking"),
                &mut floor_handoff,
            ),
        ],
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
) -> [Samples; 4] {
    // The lock is held by someone else for the whole run.
    let held = runtime
        .block_on(s.provider.acquire(&testkit::request(
            &"bench-held".into(),
            "holder",
            LEASE,
            None,
        )))
        .unwrap();
    assert!(matches!(held, AcquireOutcome::Acquired(_)));
    let losing_request = testkit::request(&"bench-held".into(), "loser", LEASE, None);
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
            ("losing acquire: provider".to_owned(), &mut losing),
            (
                "losing acquire: same statements by hand".to_owned(),
                &mut losing_by_hand,
            ),
            ("SELECT 1: by hand".to_owned(), &mut select),
            (
                "SELECT 1: through spawn_blocking".to_owned(),
                &mut select_handoff,
            ),
        ],
    )
    .try_into()
    .ok()
    .unwrap()
}

fn main() {
    let mode = Mode::from_args();
    let judged = mode.judged();
    let (warmup, iterations) = mode.pick((300, 5_000), (3, 20));
    println!(
        "lock_cycle ({} run: {iterations} iterations after {warmup} warm-up, operations interleaved)",
        mode.name()
    );
    if !judged {
        println!("smoke run (unoptimized, few iterations): the ratios below mean nothing");
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    // On disk, a granted acquire waits for an fsync (synchronous = FULL), which dominates the
    // cycle. On tmpfs the flush is free, which shows what the provider itself adds.
    let disk = setup(&runtime, None);
    report_cycles(
        &cycles(&runtime, &disk, "disk", warmup, iterations),
        "disk",
        judged,
    );
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir() {
        let tmpfs = setup(&runtime, Some(shm));
        let samples = cycles(&runtime, &tmpfs, "tmpfs", warmup, iterations);
        report_cycles(&samples, "tmpfs", judged);
    } else {
        println!("cycle on tmpfs: skipped, no /dev/shm on this machine");
    }

    let samples = self::losing(&runtime, &disk, warmup, iterations * 4);
    samples.iter().for_each(|s| s.print(Unit::Micros));
    let [losing, losing_by_hand, select, select_handoff] = &samples;
    stats::ratio_line(
        "losing / the same statements by hand",
        losing,
        losing_by_hand,
        TARGET_LOSING,
        judged,
    );
    stats::comparison_line("losing / SELECT 1 by hand", losing, select);
    stats::comparison_line(
        "losing / SELECT 1 through spawn_blocking",
        losing,
        select_handoff,
    );
    stats::comparison_line("losing by hand / SELECT 1 by hand", losing_by_hand, select);
}

/// The cycle figures of one place (disk or tmpfs) and their ratios to the two floors.
fn report_cycles(samples: &[Samples; 3], place: &str, judged: bool) {
    samples.iter().for_each(|s| s.print(Unit::Micros));
    let [cycle, floor, floor_handoff] = samples;
    stats::ratio_line(
        &format!("cycle on {place} / floor"),
        cycle,
        floor,
        TARGET_CYCLE,
        judged,
    );
    stats::ratio_line(
        &format!("cycle on {place} / by hand through spawn_blocking"),
        cycle,
        floor_handoff,
        TARGET_CYCLE,
        judged,
    );
}
