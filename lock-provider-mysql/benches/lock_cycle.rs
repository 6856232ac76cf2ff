//! What a fire costs through the provider, against the floor of the same statements sent by
//! hand with mysql_async: a whole cycle, and a losing acquire (with `SELECT 1` as context).
//!
//! `cargo bench -p lock-provider-mysql --bench lock_cycle` runs the full measurement; without
//! `--bench` (as `cargo test --all-targets` runs it) it makes a short smoke run. Everything
//! runs on one pool of one connection, so every operation reuses the same server session and
//! prepared statements, and the measurements are interleaved so that drift in the machine's
//! load spreads over all of them alike. Besides the four the targets name, it measures
//! `SELECT 1` and a primary-key `SELECT` of the same row, for scale.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_core::{AcquireOutcome, LockProvider, testkit};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::{Opts, Params, Pool, Value, prelude::Queryable};
use rand::seq::SliceRandom;
use test_support::{Mode, Samples, Unit, stats};

mod common;

const TABLE: &str = "lock_provider_mysql_bench";

/// The provider's acquire statement for a six-column table, written out by hand.
const ACQUIRE: &str = "INSERT INTO `lock_provider_mysql_bench` (`name`, `lock_until`, `locked_at`, `locked_by`, `fence`, `last_fire`) \
    VALUES (?, IF(LAST_INSERT_ID(IF(? > UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, 4611686018427387904 + 1152921504606846976 + TO_SECONDS(UTC_TIMESTAMP(3)), 0)) = 0, \
      UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(3)), \
    UTC_TIMESTAMP(3), ?, IF(LAST_INSERT_ID() = 0, 1, 0), IF(LAST_INSERT_ID() = 0, ?, NULL)) \
    ON DUPLICATE KEY UPDATE \
    `locked_by` = IF(LAST_INSERT_ID(IF(`lock_until` <= UTC_TIMESTAMP(3) AND (? IS NULL OR ((`last_fire` IS NULL OR `last_fire` < ?) \
      AND ? <= UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND)), GREATEST(`fence`, 0) + 1, \
      IF(? > UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, 4611686018427387904 + 1152921504606846976 + TO_SECONDS(UTC_TIMESTAMP(3)), \
      IF(`lock_until` > UTC_TIMESTAMP(3), 4611686018427387904 + TO_SECONDS(`lock_until`), \
      4611686018427387904 + 2305843009213693952 + TO_SECONDS(COALESCE(`last_fire`, `lock_until`)))))) < 4611686018427387904, ?, `locked_by`), \
    `locked_at` = IF(LAST_INSERT_ID() < 4611686018427387904, UTC_TIMESTAMP(3), `locked_at`), \
    `fence` = IF(LAST_INSERT_ID() < 4611686018427387904, LAST_INSERT_ID(), `fence`), \
    `last_fire` = IF(LAST_INSERT_ID() < 4611686018427387904, COALESCE(?, `last_fire`), `last_fire`), \
    `lock_until` = IF(LAST_INSERT_ID() < 4611686018427387904, UTC_TIMESTAMP(3) + INTERVAL ? MICROSECOND, `lock_until`)";

/// The provider's release statement, written out by hand.
const RELEASE: &str = "UPDATE `lock_provider_mysql_bench` SET `lock_until` = IF(LAST_INSERT_ID(1), \
    IF(`locked_at` + INTERVAL ? MICROSECOND > UTC_TIMESTAMP(3), `locked_at` + INTERVAL ? MICROSECOND, UTC_TIMESTAMP(3)), NULL) \
    WHERE `name` = ? AND `locked_by` = ? AND `fence` = ?";

/// A primary-key read of the row the losing acquires run into.
const READ_ROW: &str =
    "SELECT `locked_by`, `fence` FROM `lock_provider_mysql_bench` WHERE `name` = ?";

/// What each of the interleaved operations is called in the report, by its index.
const LABELS: [&str; 6] = [
    "lock+release via provider",
    "lock+release by hand (floor)",
    "losing acquire via provider",
    "losing acquire by hand",
    "SELECT of the row by key",
    "SELECT 1",
];

fn main() {
    test_support::mode::run_on_current_thread(run);
}

async fn run(mode: Mode) {
    let (warmup, iterations) = mode.pick((500, 5000), (5, 20));
    let url = test_support::db::mysql_url();
    let Some((pool, conn)) = common::connect(1).await else {
        return;
    };
    drop(conn);
    let provider = MySqlLockProvider::new(pool.clone())
        .with_table(TABLE)
        .expect("valid table");
    provider.ensure_schema().await.expect("ensure_schema");

    // Leases far longer than the run, so that the held lock stays held throughout.
    let request = |name: &str, owner: &str| {
        testkit::request(&Arc::from(name), owner, Duration::from_secs(3600), None)
    };
    let mine = request("bench-provider", "bench-instance");
    let held = request("bench-held", "bench-holder");
    let loser = request("bench-held", "bench-loser");
    // The lock the losing acquires run into.
    let holder = match provider.acquire(&held).await.expect("acquire") {
        AcquireOutcome::Acquired(lease) => lease,
        AcquireOutcome::Refused(_) => {
            provider.force_unlock("bench-held").await.expect("unlock");
            match provider.acquire(&held).await.expect("acquire") {
                AcquireOutcome::Acquired(lease) => lease,
                refused => panic!("could not take the held lock: {refused:?}"),
            }
        }
    };

    // One sample of each operation per iteration, in a random order, so that whatever else the
    // machine is doing, and whatever an operation leaves behind for the next one (a commit's
    // background flushing, say), weighs on all of them alike.
    let mut samples: [Samples; 6] = LABELS.map(Samples::new);
    let mut order = [0, 1, 2, 3, 4, 5];
    for i in 0..warmup + iterations {
        order.shuffle(&mut rand::rng());
        for which in order {
            let started = Instant::now();
            match which {
                0 => {
                    let lease = match provider.acquire(&mine).await.expect("acquire") {
                        AcquireOutcome::Acquired(lease) => lease,
                        refused => panic!("provider cycle refused: {refused:?}"),
                    };
                    assert!(
                        provider
                            .release(&lease, Duration::ZERO)
                            .await
                            .expect("release")
                    );
                }
                1 => by_hand_cycle(&pool).await,
                2 => {
                    let outcome = provider.acquire(&loser).await.expect("acquire");
                    assert!(matches!(outcome, AcquireOutcome::Refused(_)), "{outcome:?}");
                }
                3 => by_hand_losing(&pool).await,
                4 => {
                    // For scale: the cheapest statement that reads the row at all.
                    let mut conn = pool.get_conn().await.expect("conn");
                    let row: Option<(String, u64)> = conn
                        .exec_first(READ_ROW, ("bench-held",))
                        .await
                        .expect("read the row");
                    assert!(row.is_some());
                }
                _ => {
                    let mut conn = pool.get_conn().await.expect("conn");
                    conn.query_drop("SELECT 1").await.expect("SELECT 1");
                }
            }
            if i >= warmup {
                samples[which].record(started);
            }
        }
    }
    provider
        .release(&holder, Duration::ZERO)
        .await
        .expect("release");

    println!(
        "lock_cycle: {iterations} samples each, interleaved, one pool of one connection to {}",
        host(&url)
    );
    samples
        .iter()
        .for_each(|operation| operation.print(Unit::Millis));
    let [
        provider_cycle,
        hand_cycle,
        losing,
        hand_losing,
        _,
        select_one,
    ] = &samples;
    stats::ratio_line(
        "provider / by hand",
        provider_cycle,
        hand_cycle,
        1.15,
        mode.judged(),
    );
    // What the provider adds to its own statement; `SELECT 1` is context only, because that
    // floor moves with the machine.
    stats::ratio_line(
        "losing acquire / the same statement by hand",
        losing,
        hand_losing,
        1.10,
        mode.judged(),
    );
    stats::comparison_line("losing acquire / SELECT 1", losing, select_one);
}

/// The provider's acquire statement sent by hand for the held lock.
async fn by_hand_losing(pool: &Pool) {
    let name = Value::from("bench-held");
    let owner = Value::from("bench-loser");
    let at_most = Value::Int(3_600_000_000);
    let slot = Value::NULL;
    // The slot's greatest lead, 5 s in microseconds, as the provider sends it.
    let lead = Value::Int(5_000_000);
    let mut conn = pool.get_conn().await.expect("conn");
    conn.exec_drop(
        ACQUIRE,
        Params::Positional(vec![
            name,
            slot.clone(),
            lead.clone(),
            at_most.clone(),
            owner.clone(),
            slot.clone(),
            slot.clone(),
            slot.clone(),
            slot.clone(),
            lead.clone(),
            slot.clone(),
            lead,
            owner,
            slot,
            at_most,
        ]),
    )
    .await
    .expect("losing acquire by hand");
    assert!(
        conn.last_insert_id().is_some_and(|id| id >= 1 << 62),
        "the by-hand losing acquire was not refused"
    );
}

/// The same two statements the provider sends for a fire, each on a connection taken from the
/// pool and given back, as an application would write them.
async fn by_hand_cycle(pool: &Pool) {
    let name = Value::from("bench-hand");
    let owner = Value::from("bench-instance");
    let at_most = Value::Int(3_600_000_000);
    let slot = Value::NULL;
    // The slot's greatest lead, 5 s in microseconds, as the provider sends it.
    let lead = Value::Int(5_000_000);
    let mut conn = pool.get_conn().await.expect("conn");
    conn.exec_drop(
        ACQUIRE,
        Params::Positional(vec![
            name.clone(),
            slot.clone(),
            lead.clone(),
            at_most.clone(),
            owner.clone(),
            slot.clone(),
            slot.clone(),
            slot.clone(),
            slot.clone(),
            lead.clone(),
            slot.clone(),
            lead,
            owner.clone(),
            slot,
            at_most,
        ]),
    )
    .await
    .expect("acquire by hand");
    let fence = match conn.last_insert_id() {
        Some(fence) if fence < 1 << 62 => fence,
        None => 1,
        Some(refused) => panic!("by-hand acquire refused ({refused})"),
    };
    drop(conn);
    let mut conn = pool.get_conn().await.expect("conn");
    conn.exec_drop(
        RELEASE,
        Params::Positional(vec![
            Value::Int(0),
            Value::Int(0),
            name,
            owner,
            Value::UInt(fence),
        ]),
    )
    .await
    .expect("release by hand");
    assert_eq!(conn.last_insert_id(), Some(1), "by-hand release missed");
}

fn host(url: &str) -> String {
    Opts::from_url(url)
        .map(|o| format!("{}:{}", o.ip_or_hostname(), o.tcp_port()))
        .unwrap_or_default()
}
