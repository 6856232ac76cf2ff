//! Fire precision under load: 1,000 jobs all due every second in one process.
//!
//! `cargo bench -p benchmarks --bench fire_precision` runs 20 s of each phase; without
//! `--bench` (as under `cargo test`) a 2 s smoke pass.
//!
//! Two phases in one run, one after the other, on the same multi-thread runtime (one worker
//! per core):
//! - `tokio timers alone` (the floor): 1,000 bare tasks, each sleeping to every whole second
//!   the way the scheduler does (the wall-clock distance to the slot, on tokio's monotonic
//!   timer) and recording how late it woke. What the runtime and the machine give.
//! - `lock-core Scheduler`: 1,000 jobs `Trigger::cron("* * * * * *")` on the in-memory
//!   provider; each body records how late it started after its slot
//!   (`JobContext::scheduled_at()`). The difference to the floor is what the scheduler adds:
//!   computing the next slot, taking and releasing the lock, the job context.
//!
//! The lag is wall clock at body start minus the slot. All 1,000 jobs are due at the same
//! instant, so the p99 is the time the machine needs to start the 990th: it measures
//! throughput of fires as much as timer precision. The first second after start is a
//! warm-up and not counted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use benchmarks::process::{Usage, sleep_until_wall, thread_cpu_between};
use benchmarks::stats::verdict;
use benchmarks::{Mode, Samples, Unit};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use lock_core::{InMemoryLockProvider, JobContext};
use lock_scheduler::{Job, Scheduler, Trigger};

/// p99 of the lag from slot to body start, in milliseconds.
const P99_TARGET_MS: f64 = 20.0;
const JOBS: usize = 1_000;

/// Fires seen: (slot in Unix ms, lag in µs).
type Fires = Arc<Mutex<Vec<(i64, i64)>>>;

fn record(fires: &Fires, slot: DateTime<Utc>, started: DateTime<Utc>) {
    let lag = (started - slot).num_microseconds().expect("lag fits");
    fires.lock().unwrap().push((slot.timestamp_millis(), lag));
}

/// The fires of the measured window `[from, from + secs)`: lag samples, and how many.
struct Window {
    lags: Samples,
    /// Per slot, the lag of the last body started: how long a burst of 1,000 took to drain.
    drain: Samples,
    fires: usize,
    expected: usize,
    cpu_per_fire_us: f64,
}

fn window(label: &str, fires: &Fires, from: DateTime<Utc>, secs: u64, cpu: Duration) -> Window {
    let from_ms = from.timestamp_millis();
    let until_ms = from_ms + secs as i64 * 1000;
    let fires = fires.lock().unwrap();
    let mut lags = Samples::new(label);
    let mut drain_by_slot = std::collections::BTreeMap::<i64, i64>::new();
    for &(slot, lag) in fires
        .iter()
        .filter(|(s, _)| (from_ms..until_ms).contains(s))
    {
        lags.push_nanos(lag as f64 * 1e3);
        let last = drain_by_slot.entry(slot).or_insert(lag);
        *last = (*last).max(lag);
    }
    let mut drain = Samples::new(format!("{label}, slowest per slot"));
    for lag in drain_by_slot.values() {
        drain.push_nanos(*lag as f64 * 1e3);
    }
    let count = lags.len();
    Window {
        lags,
        drain,
        fires: count,
        expected: JOBS * secs as usize,
        cpu_per_fire_us: cpu.as_secs_f64() * 1e6 / count.max(1) as f64,
    }
}

/// The first whole second at least one second from now: the start of the measured window.
fn window_start() -> DateTime<Utc> {
    (Utc::now() + TimeDelta::seconds(2))
        .duration_trunc(TimeDelta::seconds(1))
        .expect("truncate to seconds")
}

/// The floor: bare tokio tasks sleeping to every whole second as the scheduler does.
async fn timers_alone(secs: u64) -> Window {
    let fires: Fires = Arc::default();
    let from = window_start();
    let end = from + TimeDelta::seconds(secs as i64);
    let tasks: Vec<_> = (0..JOBS)
        .map(|_| {
            let fires = fires.clone();
            tokio::spawn(async move {
                let mut slot = from;
                while slot < end {
                    let wait = (slot - Utc::now()).to_std().unwrap_or(Duration::ZERO);
                    tokio::time::sleep_until(tokio::time::Instant::now() + wait).await;
                    record(&fires, slot, Utc::now());
                    slot += TimeDelta::seconds(1);
                }
            })
        })
        .collect();
    sleep_until_wall(from - TimeDelta::milliseconds(500)).await;
    let before = Usage::now().expect("/proc");
    for task in tasks {
        task.await.expect("timer task");
    }
    let cpu = before.thread_cpu_since();
    window("timers alone (floor)", &fires, from, secs, cpu)
}

/// The scheduler with 1,000 every-second jobs on the in-memory provider.
async fn scheduler(secs: u64) -> Window {
    let fires: Fires = Arc::default();
    let jobs = (0..JOBS).map(|i| {
        let fires = fires.clone();
        Job::new(
            format!("every-second-{i:04}"),
            Trigger::cron("* * * * * *").expect("cron"),
            move || {
                let fires = fires.clone();
                async move {
                    let started = Utc::now();
                    let slot = JobContext::current()
                        .and_then(|ctx| ctx.scheduled_at())
                        .expect("a slotted fire");
                    record(&fires, slot, started);
                }
            },
        )
    });
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .instance_id("fire-precision")
        .jobs(jobs)
        .start()
        .await
        .expect("start the scheduler");
    let from = window_start();
    let end = from + TimeDelta::seconds(secs as i64);
    // CPU over exactly `secs` seconds, each holding one burst of fires.
    // Until half a second past the last slot: its burst has drained (or the lag is off the
    // chart).
    let half = TimeDelta::milliseconds(500);
    let cpu = thread_cpu_between(from - half, end - half).await;
    scheduler.shutdown().await.expect("shutdown");
    window("Scheduler", &fires, from, secs, cpu)
}

fn print(w: &Window) {
    w.lags.print(Unit::Millis);
    w.drain.print(Unit::Millis);
    println!(
        "  {:<40} {} of {} expected fires, {:.1} µs of CPU per fire",
        "", w.fires, w.expected, w.cpu_per_fire_us
    );
}

fn main() {
    let mode = Mode::from_args();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let workers = runtime.metrics().num_workers();
    let secs = mode.pick(20, 2);
    let (floor, ours) =
        runtime.block_on(async { (timers_alone(secs).await, scheduler(secs).await) });

    println!(
        "fire_precision ({} run): {JOBS} jobs due every second, {secs} s per phase, in-memory \
         provider, multi-thread runtime with {workers} workers, lag = body start - slot",
        mode.name()
    );
    print(&floor);
    print(&ours);
    let p99 = ours.lags.percentile_in(0.99, Unit::Millis);
    println!(
        "ratio Scheduler / timers alone: p50 {:.2}, p99 {:.2}",
        ours.lags.percentile(0.5) / floor.lags.percentile(0.5),
        ours.lags.percentile(0.99) / floor.lags.percentile(0.99)
    );
    println!(
        "target: lock-core Scheduler lag p99 < {P99_TARGET_MS} ms: {p99:.3} ms, {}",
        verdict(p99 < P99_TARGET_MS, mode.judged())
    );
    // Every job must fire every second: a lost fire is a bug, not noise.
    let lost = ours.expected.saturating_sub(ours.fires);
    assert!(
        lost == 0 || !mode.judged(),
        "{lost} of {} fires did not happen",
        ours.expected
    );
}
