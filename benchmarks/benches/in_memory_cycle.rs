//! What a lock costs on the in-memory provider, against floors measured in the same run.
//!
//! `cargo bench -p benchmarks --bench in_memory_cycle` runs the full measurement; without
//! `--bench` (as under `cargo test`) it is a short smoke pass.
//!
//! A database provider's floor is "the same statements issued by hand on the same pool". The
//! in-memory provider's statements are operations on a `Mutex<HashMap>`, so its floor is the
//! same operations written by hand on a table of the same shape:
//! - `by-hand map cycle` (floor): lock the mutex, check and update the row, unlock; lock, check
//!   the owner, set `lock_until`, unlock;
//! - `provider cycle`: `acquire` + `release` through `Arc<dyn LockProvider>`, as the executor
//!   calls them (each call is an `async_trait` boxed future);
//! - `executor cycle`: `LockingTaskExecutor::execute_with_lock` with an empty body: the
//!   provider cycle plus what the executor adds per fire (reentrancy check, the timeout
//!   around each provider call, job context, cancellation token, lease guard, panic catching);
//! - `losing acquire`: `acquire` through the provider while another owner holds the lock;
//! - `by-hand held-row read` (floor of a refusal, the `SELECT 1` analogue): lock the mutex,
//!   look the row up, see it held, unlock;
//! - `executor skip`: `execute_with_lock` on the held lock.
//!
//! The operations take well under a microsecond, too short to time one by one (reading the
//! clock would be a sizeable part of them), so each sample is the mean of a batch of
//! `BATCH` calls; p99 is over batch means. Batches of all operations are interleaved, in a
//! rotating order, so that load from elsewhere on the machine hits every operation alike.

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use benchmarks::stats::{median_difference, median_difference_line, ratio_line};
use benchmarks::{Mode, Samples, Unit};
use chrono::{DateTime, TimeDelta, Utc};
use lock_core::{
    AcquireOutcome, InMemoryLockProvider, LockConfiguration, LockOutcome, LockProvider,
    LockRequest, LockingTaskExecutor, Refusal, RefusalReason, testkit,
};
use test_support::time_batch;
use tokio_util::sync::CancellationToken;

/// Provider cycle over the by-hand cycle (the per-provider target).
const CYCLE_TARGET: f64 = 1.15;
/// Losing acquire over the same operation by hand (the cheapest read of the row), as the SQL
/// providers' losing acquire is judged against the same statement by hand.
const LOSING_TARGET: f64 = 1.10;
/// Calls per timed batch.
const BATCH: usize = 64;

/// One row of the by-hand table: the fields the provider keeps.
struct HandRow {
    lock_until: tokio::time::Instant,
    locked_at: tokio::time::Instant,
    locked_by: Arc<str>,
    fence: u64,
}

/// The in-memory provider's table, operated on by hand.
struct HandTable {
    rows: Mutex<HashMap<String, HandRow>>,
}

impl HandTable {
    fn with_row(name: &str) -> Self {
        let now = tokio::time::Instant::now();
        let row = HandRow {
            lock_until: now,
            locked_at: now,
            locked_by: "nobody".into(),
            fence: 0,
        };
        HandTable {
            rows: Mutex::new(HashMap::from([(name.to_owned(), row)])),
        }
    }

    /// The acquire "statement": grant if free, bump the fence. Returns the fence.
    fn acquire(&self, request: &LockRequest) -> Option<u64> {
        let now = tokio::time::Instant::now();
        let mut rows = self.rows.lock().unwrap();
        let row = rows.get_mut(&*request.name)?;
        if row.lock_until > now {
            return None;
        }
        row.fence += 1;
        row.locked_at = now;
        row.lock_until = now + request.lock_at_most_for;
        row.locked_by = request.locked_by.clone();
        Some(row.fence)
    }

    /// The release "statement": owner and fence checked, `lock_until = max(now, at_least)`.
    fn release(&self, name: &str, owner: &str, fence: u64, at_least: Duration) -> bool {
        let now = tokio::time::Instant::now();
        let mut rows = self.rows.lock().unwrap();
        match rows.get_mut(name) {
            Some(row) if &*row.locked_by == owner && row.fence == fence => {
                row.lock_until = now.max(row.locked_at + at_least);
                true
            }
            _ => false,
        }
    }

    /// The cheapest look at the row: is it held?
    fn held(&self, name: &str) -> bool {
        let now = tokio::time::Instant::now();
        let rows = self.rows.lock().unwrap();
        rows.get(name).is_some_and(|row| row.lock_until > now)
    }
}

/// The by-hand table behind boxed `dyn` futures, the shape of every `LockProvider` call: what
/// `async_trait`'s boxing costs on its own.
#[async_trait::async_trait]
trait BoxedHand: Send + Sync {
    async fn acquire(&self, request: &LockRequest) -> Option<u64>;
    async fn release(&self, name: &str, owner: &str, fence: u64, at_least: Duration) -> bool;
}

#[async_trait::async_trait]
impl BoxedHand for HandTable {
    async fn acquire(&self, request: &LockRequest) -> Option<u64> {
        HandTable::acquire(self, request)
    }
    async fn release(&self, name: &str, owner: &str, fence: u64, at_least: Duration) -> bool {
        HandTable::release(self, name, owner, fence, at_least)
    }
}

/// The held-row read plus the holder details the provider's refusal carries (`locked_by` as
/// a new `String`, `lock_until` converted to wall time).
fn hand_refusal(
    hand: &HandTable,
    epoch: tokio::time::Instant,
    epoch_wall: DateTime<Utc>,
) -> Refusal {
    let now = tokio::time::Instant::now();
    let rows = hand.rows.lock().unwrap();
    let row = rows.get("held").expect("held row");
    assert!(row.lock_until > now);
    Refusal {
        reason: RefusalReason::Held,
        locked_by: Some(row.locked_by.to_string()),
        lock_until: Some(epoch_wall + TimeDelta::from_std(row.lock_until - epoch).unwrap()),
        last_fire: None,
        database_now: Some(epoch_wall + TimeDelta::from_std(now - epoch).unwrap()),
    }
}

fn request(name: &str, owner: &str) -> LockRequest {
    testkit::request(&name.into(), owner, Duration::from_secs(60), None)
}

fn main() {
    test_support::mode::run_on_current_thread(run);
}

async fn run(mode: Mode) {
    let rounds = mode.pick(20_000, 200);
    let shared: Arc<dyn LockProvider> = Arc::new(InMemoryLockProvider::new());
    // `&dyn LockProvider`: one boxed future per call, the provider's own cost (the executor
    // holds an `Arc<dyn LockProvider>` and calls through it the same way). Calling a
    // `Arc<dyn LockProvider>` as a provider itself goes through `impl LockProvider for Arc<P>`
    // first: a second boxed future, measured for comparison.
    let provider: &dyn LockProvider = shared.as_ref();
    let executor = LockingTaskExecutor::from_shared(shared.clone())
        .with_instance_id("bench-executor")
        .expect("instance id");
    let hand = Arc::new(HandTable::with_row("hand-cycle"));
    let boxed_hand: Arc<dyn BoxedHand> = hand.clone();
    boxed_hand.acquire(&request("boxed-hand-cycle", "x")).await;
    hand.rows.lock().unwrap().insert(
        "boxed-hand-cycle".to_owned(),
        HandRow {
            lock_until: tokio::time::Instant::now(),
            locked_at: tokio::time::Instant::now(),
            locked_by: "nobody".into(),
            fence: 0,
        },
    );

    let cycle = request("provider-cycle", "bench-instance");
    let arc_cycle = request("arc-cycle", "bench-instance");
    let hand_cycle_request = request("hand-cycle", "bench-instance");
    let boxed_hand_request = request("boxed-hand-cycle", "bench-instance");
    let loser = request("held", "loser");
    let AcquireOutcome::Acquired(_held) =
        provider.acquire(&request("held", "holder")).await.unwrap()
    else {
        panic!("could not take the held lock");
    };
    // The hand table's own held row, so its read sees a held lease as the losing acquire does.
    let epoch = tokio::time::Instant::now();
    let epoch_wall = Utc::now();
    hand.rows.lock().unwrap().insert(
        "held".to_owned(),
        HandRow {
            lock_until: epoch + Duration::from_secs(3600),
            locked_at: epoch,
            locked_by: "holder".into(),
            fence: 1,
        },
    );
    let executor_config =
        LockConfiguration::new("executor-cycle", Duration::from_secs(60), Duration::ZERO).unwrap();
    let held_config =
        LockConfiguration::new("held", Duration::from_secs(60), Duration::ZERO).unwrap();
    let parent_token = CancellationToken::new();

    let mut hand_cycle = Samples::new("by-hand map cycle (floor)");
    let mut provider_cycle = Samples::new("provider cycle (acquire + release)");
    let mut executor_cycle = Samples::new("executor cycle (execute_with_lock)");
    let mut hand_read = Samples::new("by-hand held-row read (floor)");
    let mut losing = Samples::new("losing acquire (provider)");
    let mut executor_skip = Samples::new("executor skip (execute_with_lock, held)");
    // Parts, to explain the ratios.
    let mut boxed_cycle = Samples::new("by-hand map cycle, boxed dyn futures");
    let mut arc_provider_cycle = Samples::new("provider cycle called through the Arc");
    let mut refusal = Samples::new("by-hand read + refusal details");
    let mut clock = Samples::new("one monotonic clock read");
    let mut child_token = Samples::new("child CancellationToken, made + dropped");
    let mut timeout = Samples::new("tokio::time::timeout on a ready future");

    let warmup = mode.pick(500, 20);
    let started = Instant::now();
    const OPS: usize = 12;
    for round in 0..warmup + rounds {
        let keep = round >= warmup;
        // Rotate the order so no operation always runs right after the same other one.
        for k in 0..OPS {
            match (round + k) % OPS {
                0 => time_batch!(hand_cycle, BATCH, keep, {
                    let fence = hand.acquire(&hand_cycle_request).expect("hand lock free");
                    black_box(hand.release("hand-cycle", "bench-instance", fence, Duration::ZERO));
                }),
                1 => time_batch!(provider_cycle, BATCH, keep, {
                    let AcquireOutcome::Acquired(lease) = provider.acquire(&cycle).await.unwrap()
                    else {
                        panic!("cycle lock refused");
                    };
                    black_box(provider.release(&lease, Duration::ZERO).await.unwrap());
                }),
                2 => time_batch!(executor_cycle, BATCH, keep, {
                    let outcome = executor
                        .execute_with_lock(&executor_config, async {})
                        .await
                        .unwrap();
                    assert_eq!(outcome, LockOutcome::Executed(()));
                }),
                3 => time_batch!(hand_read, BATCH, keep, {
                    assert!(hand.held(black_box("held")));
                }),
                4 => time_batch!(losing, BATCH, keep, {
                    let outcome = provider.acquire(&loser).await.unwrap();
                    assert!(matches!(outcome, AcquireOutcome::Refused(_)));
                }),
                5 => time_batch!(executor_skip, BATCH, keep, {
                    let outcome = executor
                        .execute_with_lock(&held_config, async {})
                        .await
                        .unwrap();
                    assert_eq!(outcome, LockOutcome::Skipped);
                }),
                6 => time_batch!(boxed_cycle, BATCH, keep, {
                    let fence = boxed_hand
                        .acquire(&boxed_hand_request)
                        .await
                        .expect("hand lock free");
                    black_box(
                        boxed_hand
                            .release("boxed-hand-cycle", "bench-instance", fence, Duration::ZERO)
                            .await,
                    );
                }),
                7 => time_batch!(arc_provider_cycle, BATCH, keep, {
                    let AcquireOutcome::Acquired(lease) = shared.acquire(&arc_cycle).await.unwrap()
                    else {
                        panic!("cycle lock refused");
                    };
                    black_box(shared.release(&lease, Duration::ZERO).await.unwrap());
                }),
                8 => time_batch!(refusal, BATCH, keep, {
                    black_box(hand_refusal(&hand, epoch, epoch_wall));
                }),
                9 => time_batch!(clock, BATCH, keep, {
                    black_box(tokio::time::Instant::now());
                }),
                10 => time_batch!(child_token, BATCH, keep, {
                    black_box(parent_token.child_token());
                }),
                _ => time_batch!(timeout, BATCH, keep, {
                    let ready = std::future::ready(black_box(1u8));
                    black_box(tokio::time::timeout(Duration::from_secs(10), ready).await)
                        .expect("ready");
                }),
            }
        }
    }

    let judged = mode.judged();
    println!(
        "in_memory_cycle ({} run): InMemoryLockProvider, current-thread runtime, {rounds} batches \
         of {BATCH} calls per operation (p99 over batch means), {:.1} s",
        mode.name(),
        started.elapsed().as_secs_f64()
    );
    for samples in [
        &hand_cycle,
        &provider_cycle,
        &executor_cycle,
        &hand_read,
        &losing,
        &executor_skip,
    ] {
        samples.print(Unit::Micros);
    }
    ratio_line(
        "provider cycle / by-hand map cycle",
        &provider_cycle,
        &hand_cycle,
        CYCLE_TARGET,
        judged,
    );
    ratio_line(
        "losing acquire / by-hand held-row read",
        &losing,
        &hand_read,
        LOSING_TARGET,
        judged,
    );
    ratio_line(
        "executor cycle / provider cycle",
        &executor_cycle,
        &provider_cycle,
        CYCLE_TARGET,
        judged,
    );
    println!("parts (what the ratios above are made of):");
    for samples in [
        &boxed_cycle,
        &arc_provider_cycle,
        &refusal,
        &clock,
        &child_token,
        &timeout,
    ] {
        samples.print(Unit::Micros);
    }
    // Differences of medians: robust against the preemptions that inflate means on a busy
    // machine.
    println!("differences of p50s:");
    for (what, a, b) in [
        (
            "boxing two futures (boxed - plain by-hand cycle)",
            &boxed_cycle,
            &hand_cycle,
        ),
        (
            "rest of the provider cycle (provider - boxed by-hand)",
            &provider_cycle,
            &boxed_cycle,
        ),
        (
            "refusal details (read + details - read)",
            &refusal,
            &hand_read,
        ),
        (
            "calling through the Arc (Arc cycle - &dyn cycle)",
            &arc_provider_cycle,
            &provider_cycle,
        ),
    ] {
        median_difference_line(what, a, b, Unit::Micros);
    }
    println!(
        "  executor over the provider cycle                          {:>7.3} µs per fire, {:.3} µs per skip",
        median_difference(&executor_cycle, &provider_cycle, Unit::Micros),
        median_difference(&executor_skip, &losing, Unit::Micros),
    );
}
