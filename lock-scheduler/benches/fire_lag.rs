//! Fire precision: the lag from each scheduled instant to the body's start, for our scheduler
//! and for tokio-cron-scheduler 0.15, on the same every-second cron job, in one run.
//!
//! `cargo bench -p lock-core --features tokio-cron-scheduler --bench fire_lag` measures 30
//! fires of each; without `--bench` (as `cargo test --all-targets` runs it) it is a 3-fire
//! smoke run. Both run side by side in one process, each fire under an in-memory lock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use lock_core::{InMemoryLockProvider, JobContext, LockConfiguration, LockingTaskExecutor};
use lock_scheduler::tcs::{locked_job, tokio_cron_scheduler::JobScheduler};
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::{Mode, Samples, Unit};

/// The body: how late it started after its slot.
async fn record(lags: Arc<Mutex<Vec<f64>>>) {
    let started = Utc::now();
    let slot = JobContext::current()
        .and_then(|c| c.scheduled_at())
        .expect("a slot");
    let lag = (started - slot).num_microseconds().expect("small") as f64 / 1000.0;
    lags.lock().unwrap().push(lag);
}

/// Prints the lags (ms) of one scheduler; returns their p50 and p99 (nearest rank).
fn summary(name: &str, lags: &[f64]) -> (f64, f64) {
    let mut samples = Samples::new(name);
    lags.iter().for_each(|ms| samples.push_nanos(ms * 1e6));
    samples.print(Unit::Millis);
    (
        samples.percentile_in(0.50, Unit::Millis),
        samples.percentile_in(0.99, Unit::Millis),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let fires = Mode::from_args().pick(30, 3);
    let ours = Arc::new(Mutex::new(Vec::<f64>::new()));
    let theirs = Arc::new(Mutex::new(Vec::<f64>::new()));

    let lags = ours.clone();
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([Job::new(
            "ours",
            Trigger::cron("* * * * * *").unwrap(),
            move || record(lags.clone()),
        )])
        .start()
        .await
        .unwrap();

    let lags = theirs.clone();
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    let config = LockConfiguration::new("theirs", Duration::from_secs(30), Duration::ZERO).unwrap();
    let job = locked_job(executor, "* * * * * *", None, config, move || {
        record(lags.clone())
    })
    .unwrap();
    let mut tcs = JobScheduler::new().await.unwrap();
    tcs.add(job).await.unwrap();
    tcs.start().await.unwrap();

    tokio::time::sleep(Duration::from_millis(fires * 1000 + 900)).await;
    scheduler.shutdown().await.unwrap();
    tcs.shutdown().await.unwrap();

    println!("fire lag, every-second cron job, {fires} s, one process (2 cores)");
    let (ours_p50, ours_p99) = summary("lock-core Scheduler", &ours.lock().unwrap());
    let (tcs_p50, tcs_p99) = summary("tokio-cron-scheduler", &theirs.lock().unwrap());
    println!(
        "ratio tokio-cron-scheduler / lock-core: p50 {:.1}x, p99 {:.1}x (higher = we are ahead)",
        tcs_p50 / ours_p50.max(0.001),
        tcs_p99 / ours_p99.max(0.001)
    );
    println!(
        "target: lock-core p99 < 10 ms: {}",
        if ours_p99 < 10.0 { "met" } else { "MISSED" }
    );
}
