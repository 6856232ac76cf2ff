//! What the `#[scheduler_lock]` macro path costs over calling `LockingTaskExecutor` by hand.
//!
//! `cargo bench -p benchmarks --bench macro_overhead` runs the full measurement (add
//! `--features metrics` to measure with lock-core's `metrics` feature and a Prometheus recorder
//! installed); without `--bench` (as under `cargo test`) it is a short smoke pass.
//!
//! Both paths lock an empty body on the in-memory provider, where the lock itself is cheapest,
//! so the macro's own cost is as visible as it can be:
//! - `by hand`: `executor.execute_with_lock(&config, async {})` with a configuration built once;
//! - `macro`: a direct call of a `#[scheduler_lock]` `async fn` with the same settings, through
//!   the executor installed with `install_default_executor`.
//!
//! Each call of a macro-locked function looks the default executor up and resolves its
//! `LockSpec` into a `LockConfiguration`; the parts below time those two steps alone and
//! each added to the by-hand call, to show where the difference comes from.
//!
//! The scheduler's path for a `#[scheduled]` function is timed too: its registered body run
//! under the lock as the scheduler fires it, without parameters and with `State<Pool>` +
//! `JobContext` (one map lookup and one clone of the pool per fire, the extraction's cost).
//!
//! Each sample is the mean of a batch of `BATCH` calls (p99 over batch means); the batches of
//! all operations are interleaved in a rotating order.

use std::hint::black_box;
use std::time::{Duration, Instant};

use benchmarks::stats::{median_difference_line, ratio_line};
use benchmarks::{Mode, Samples, Unit};
use std::sync::Arc;

use lock_core::{
    InMemoryLockProvider, JobContext, LockConfiguration, LockOutcome, LockingTaskExecutor,
};
use lock_scheduler::__private::{
    BoxFuture, JobBody, JobResult, LockSpec, ScheduledJob, lock_trigger,
};
use lock_scheduler::{State, StateMap, scheduled, scheduler_lock};
use test_support::time_batch;

/// Macro path over the by-hand call.
const MACRO_TARGET: f64 = 1.10;
/// Calls per timed batch.
const BATCH: usize = 64;

/// The function under test: an empty body under a one-minute lock.
#[scheduler_lock(name = "bench_macro", lock_at_most_for = "1m")]
async fn locked_noop() {}

/// Stands for a connection pool: cloning it is one reference count, as for `PgPool`.
#[derive(Clone)]
struct Pool(#[allow(dead_code)] Arc<str>);

/// A scheduled job without parameters (the scheduler's path, no extraction).
#[scheduled(fixed_rate = "1h", name = "bench_fire_plain")]
async fn fire_plain() {}

/// The same with extractors.
#[scheduled(fixed_rate = "1h", name = "bench_fire_extracting")]
async fn fire_extracting(State(pool): State<Pool>, ctx: JobContext) {
    black_box((pool, ctx));
}

/// The registered async body of the job `name`.
fn registered(name: &str) -> fn(&Arc<StateMap>) -> BoxFuture<JobResult> {
    let job = lock_scheduler::__private::inventory::iter::<ScheduledJob>
        .into_iter()
        .find(|job| job.name == name)
        .expect("registered");
    match job.body {
        JobBody::Async(body) => body,
        JobBody::Blocking(_) => unreachable!("async fn"),
    }
}

/// What the macro above puts in its `static` (same settings, another name, so the part
/// measurements do not contend with it).
static SPEC: LockSpec = LockSpec::new(lock_trigger::LockSpec {
    name: "bench_spec",
    lock_at_most_for: Some(Duration::from_secs(60)),
    ..lock_trigger::LockSpec::DEFAULT
});

fn main() {
    test_support::mode::run_on_current_thread(run);
}

#[cfg(feature = "metrics")]
fn install_metrics_recorder() -> &'static str {
    metrics_exporter_prometheus::PrometheusBuilder::new()
        .install_recorder()
        .expect("install the Prometheus recorder");
    "lock-core `metrics` feature on, Prometheus recorder installed"
}

#[cfg(not(feature = "metrics"))]
fn install_metrics_recorder() -> &'static str {
    "lock-core `metrics` feature off"
}

async fn run(mode: Mode) {
    let metrics = install_metrics_recorder();
    let rounds = mode.pick(20_000, 200);
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new())
        .with_instance_id("bench-macro")
        .expect("instance id");
    lock_core::install_default_executor(executor.clone());
    let config =
        LockConfiguration::new("bench_hand", Duration::from_secs(60), Duration::ZERO).unwrap();

    let mut hand = Samples::new("by hand (execute_with_lock)");
    let mut via_macro = Samples::new("macro (#[scheduler_lock] call)");
    let mut lookup = Samples::new("executor lookup alone (as the macro does it)");
    let mut resolve = Samples::new("LockSpec::configuration alone");
    let mut hand_lookup = Samples::new("by hand + executor lookup");
    let mut hand_resolve = Samples::new("by hand + LockSpec::configuration");
    let mut fire = Samples::new("scheduled body, no parameters");
    let mut fire_state = Samples::new("scheduled body, State<Pool> + JobContext");
    let (plain, extracting) = (
        registered("bench_fire_plain"),
        registered("bench_fire_extracting"),
    );
    // The scheduler's state, as `.state(pool)` registers it.
    let mut state = StateMap::default();
    assert!(state.insert(Pool("postgres://db/app".into())).is_ok());
    let state = Arc::new(state);

    let warmup = mode.pick(500, 20);
    let started = Instant::now();
    const OPS: usize = 8;
    for round in 0..warmup + rounds {
        let keep = round >= warmup;
        for k in 0..OPS {
            match (round + k) % OPS {
                0 => time_batch!(hand, BATCH, keep, {
                    let outcome = executor.execute_with_lock(&config, async {}).await;
                    assert_eq!(outcome.unwrap(), LockOutcome::Executed(()));
                }),
                1 => time_batch!(via_macro, BATCH, keep, {
                    locked_noop().await;
                }),
                2 => time_batch!(lookup, BATCH, keep, {
                    // The macro path's own lookup: the shared default executor, an `Arc` clone.
                    black_box(lock_scheduler::__private::executor_for(&SPEC));
                }),
                3 => time_batch!(resolve, BATCH, keep, {
                    black_box(SPEC.configuration(&executor).unwrap());
                }),
                4 => time_batch!(hand_lookup, BATCH, keep, {
                    let executor = lock_scheduler::__private::executor_for(&SPEC);
                    let outcome = executor.execute_with_lock(&config, async {}).await;
                    assert_eq!(outcome.unwrap(), LockOutcome::Executed(()));
                }),
                5 => time_batch!(hand_resolve, BATCH, keep, {
                    let config = SPEC.configuration(&executor).unwrap();
                    let outcome = executor.execute_with_lock(&config, async {}).await;
                    assert_eq!(outcome.unwrap(), LockOutcome::Executed(()));
                }),
                6 => time_batch!(fire, BATCH, keep, {
                    let outcome = executor.execute_in_slot(&config, None, plain(&state)).await;
                    assert_eq!(outcome.unwrap(), LockOutcome::Executed(Ok(())));
                }),
                _ => time_batch!(fire_state, BATCH, keep, {
                    let outcome = executor
                        .execute_in_slot(&config, None, extracting(&state))
                        .await;
                    assert_eq!(outcome.unwrap(), LockOutcome::Executed(Ok(())));
                }),
            }
        }
    }

    println!(
        "macro_overhead ({} run): InMemoryLockProvider, current-thread runtime, {metrics}, \
         {rounds} batches of {BATCH} calls per operation (p99 over batch means), {:.1} s",
        mode.name(),
        started.elapsed().as_secs_f64()
    );
    for samples in [&hand, &via_macro, &fire, &fire_state] {
        samples.print(Unit::Micros);
    }
    ratio_line(
        "macro / by hand",
        &via_macro,
        &hand,
        MACRO_TARGET,
        mode.judged(),
    );
    ratio_line(
        "scheduled fire with extractors / without",
        &fire_state,
        &fire,
        MACRO_TARGET,
        mode.judged(),
    );
    println!("parts (what the macro path adds per call):");
    for samples in [&lookup, &resolve, &hand_lookup, &hand_resolve] {
        samples.print(Unit::Micros);
    }
    // Differences of medians: robust against preemptions on a busy machine.
    println!("differences of p50s:");
    for (what, a) in [
        ("macro - by hand", &via_macro),
        (
            "executor lookup in the call (by hand + lookup - by hand)",
            &hand_lookup,
        ),
        (
            "configuration per call (by hand + resolve - by hand)",
            &hand_resolve,
        ),
    ] {
        median_difference_line(what, a, &hand, Unit::Micros);
    }
    median_difference_line(
        "extraction per fire (State<Pool> + JobContext - no parameters)",
        &fire_state,
        &fire,
        Unit::Micros,
    );
}
