//! What a fire is recorded as when its body was cancelled (shutdown, lost lease), the metrics
//! each outcome records under the `scheduled_job` label, and the start-up warning about leases
//! many periods long.

use lock_cluster::ClusterProvider;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use lock_core::{
    AcquireOutcome, InMemoryLockProvider, JobContext, Lease, LockConfiguration, LockError,
    LockProvider, LockRecord, LockRequest, metrics as names,
};
use lock_scheduler::{Job, RunOutcome, Scheduler, Trigger};
use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};

/// A recorder keeping every counter and gauge by `name{label=value}`, so a test reads what
/// lock-core recorded (the Prometheus exporter is tested in the examples crate).
#[derive(Default)]
struct Values(Mutex<HashMap<String, Arc<AtomicU64>>>);

impl Values {
    fn cell(&self, key: &Key) -> Arc<AtomicU64> {
        let labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        let series = format!("{}{{{}}}", key.name(), labels.join(","));
        let mut map = self.0.lock().unwrap();
        map.entry(series).or_default().clone()
    }

    fn counter(&self, name: &str, job: &str) -> Option<u64> {
        let series = format!("{name}{{scheduled_job={job}}}");
        let map = self.0.lock().unwrap();
        map.get(&series).map(|v| v.load(Ordering::SeqCst))
    }

    fn gauge(&self, name: &str, job: &str) -> Option<f64> {
        self.counter(name, job).map(f64::from_bits)
    }
}

struct TestRecorder(&'static Values);

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.0.cell(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.0.cell(key))
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

/// The process-wide recorder (installed once; tests use lock names of their own).
fn recorded() -> &'static Values {
    static VALUES: OnceLock<&'static Values> = OnceLock::new();
    VALUES.get_or_init(|| {
        let values: &'static Values = Box::leak(Box::default());
        metrics::set_global_recorder(TestRecorder(values)).expect("the only recorder");
        values
    })
}

/// One test at a time: `tracing` caches per call site whether anyone listens, and a test
/// running without a subscriber on another thread can make a capturing test miss its lines.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits (bounded) until `name`'s lock is held in `provider`.
async fn until_held(provider: &InMemoryLockProvider, name: &str) {
    tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let held = provider
                .list_locks()
                .await
                .unwrap()
                .iter()
                .any(|l| l.name == name && l.held);
            if held {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{name} was not running within 5 s"));
}

/// A body that waits for `cancelled()` (up to a minute) and then returns `Ok`.
fn until_cancelled() -> impl Fn() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> + Clone {
    || {
        Box::pin(async {
            let ctx = JobContext::current().expect("inside the locked body");
            tokio::select! {
                _ = ctx.cancelled() => {}
                _ = tokio::time::sleep(Duration::from_secs(60)) => {}
            }
        })
    }
}

#[tokio::test]
async fn a_body_stopped_by_shutdown_is_recorded_as_cancelled_not_succeeded() {
    let _serial = SERIAL.lock().await;
    let metrics = recorded();
    let provider = Arc::new(InMemoryLockProvider::new());
    let name = "outcomes-shutdown";
    // From before the start, so that the fire's span (naming the job) is seen too.
    let (logs, guard) = test_support::logs::capture_at(tracing::Level::INFO);
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([Job::new(
            name,
            Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
            until_cancelled(),
        )])
        .start()
        .await
        .unwrap();
    until_held(&provider, name).await;
    scheduler.shutdown().await.expect("the body stops in time");
    drop(guard);

    let status = &scheduler.jobs()[0];
    assert_eq!(status.last_outcome, Some(RunOutcome::Cancelled));
    let logs = logs.text();
    assert!(
        logs.contains("job cancelled") && logs.contains(name),
        "an info line names the cancelled job: {logs}"
    );
    assert_eq!(metrics.counter(names::JOB_CANCELLED_TOTAL, name), Some(1));
    assert_eq!(metrics.counter(names::JOB_FAILURES_TOTAL, name), Some(0));
    assert_eq!(metrics.counter(names::LOCK_ACQUIRED_TOTAL, name), Some(1));
    assert_eq!(
        metrics.gauge(names::JOB_LAST_SUCCESS_TIMESTAMP_SECONDS, name),
        None,
        "a cancelled run is no success"
    );
}

#[tokio::test]
async fn a_body_stopped_by_a_lost_lease_is_recorded_as_cancelled() {
    let _serial = SERIAL.lock().await;
    let metrics = recorded();
    let provider = Arc::new(InMemoryLockProvider::new());
    let name = "outcomes-lost";
    // Keep-alive extends every 200 ms; the forced unlock makes the next extension fail.
    let config = LockConfiguration::new(name, Duration::from_millis(400), Duration::ZERO)
        .unwrap()
        .with_keep_alive(true);
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([Job::new(
            name,
            Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
            until_cancelled(),
        )
        .with_lock(config)])
        .start()
        .await
        .unwrap();
    until_held(&provider, name).await;
    provider.force_unlock(name).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), async {
        while scheduler.jobs()[0].last_outcome.is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the body ends within 5 s of losing its lease");
    assert_eq!(
        scheduler.jobs()[0].last_outcome,
        Some(RunOutcome::Cancelled)
    );
    assert_eq!(metrics.counter(names::LOCK_LOST_TOTAL, name), Some(1));
    assert_eq!(metrics.counter(names::JOB_CANCELLED_TOTAL, name), Some(1));
    scheduler.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_success_sets_the_last_success_timestamp_and_nothing_else() {
    let _serial = SERIAL.lock().await;
    let metrics = recorded();
    let provider = Arc::new(InMemoryLockProvider::new());
    let name = "outcomes-success";
    let before = chrono::Utc::now().timestamp_micros() as f64 / 1e6;
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([Job::new(
            name,
            Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
            || async {},
        )])
        .start()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), async {
        while scheduler.jobs()[0].last_outcome.is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the job fires at once");
    let after = chrono::Utc::now().timestamp_micros() as f64 / 1e6;
    scheduler.shutdown().await.unwrap();

    assert_eq!(
        scheduler.jobs()[0].last_outcome,
        Some(RunOutcome::Succeeded)
    );
    let at = metrics
        .gauge(names::JOB_LAST_SUCCESS_TIMESTAMP_SECONDS, name)
        .expect("the instance that ran the body exports its last success");
    assert!(
        (before..=after).contains(&at),
        "last success {at} within the run [{before}, {after}]"
    );
    assert_eq!(metrics.counter(names::JOB_CANCELLED_TOTAL, name), Some(0));
}

#[tokio::test]
async fn a_lease_many_periods_long_is_warned_about_at_start() {
    let _serial = SERIAL.lock().await;
    let provider = Arc::new(InMemoryLockProvider::new());
    let lease = |name: &str, at_most: u64| {
        LockConfiguration::new(name, Duration::from_secs(at_most), Duration::ZERO).unwrap()
    };
    let jobs = [
        // Every 5 s with the 30-minute default: 360 periods.
        Job::new(
            "warn-default-lease",
            Trigger::fixed_rate(Duration::from_secs(5)).unwrap(),
            || async {},
        ),
        // Every second, 1-minute lease: 60 periods.
        Job::new(
            "warn-cron-lease",
            Trigger::cron("* * * * * *").unwrap(),
            || async {},
        )
        .with_lock(lease("warn-cron-lease", 60)),
        // Every minute, 10-minute lease: exactly 10 periods, the limit: quiet.
        Job::new(
            "quiet-ten-periods",
            Trigger::fixed_rate(Duration::from_secs(60)).unwrap(),
            || async {},
        )
        .with_lock(lease("quiet-ten-periods", 600)),
        // Daily at 03:00, 30-minute lease: quiet.
        Job::new(
            "quiet-daily",
            Trigger::cron("0 0 3 * * *").unwrap(),
            || async {},
        ),
    ];
    let (logs, guard) = test_support::logs::capture();
    let scheduler = Scheduler::builder()
        .lock_provider(provider)
        .jobs(jobs)
        .start()
        .await
        .unwrap();
    drop(guard);
    scheduler.shutdown().await.unwrap();

    let logs = logs.text();
    let warning = |job: &str| {
        logs.lines()
            .find(|line| line.contains(&format!("job=\"{job}\"")))
            .map(str::to_owned)
    };
    let default = warning("warn-default-lease").expect("the 30-minute default on 5 s is warned");
    assert!(
        default.contains("more than 10 periods")
            && default.contains("lock_at_most_for=1800s")
            && default.contains("periods=360")
            && default.contains("keep_alive = true"),
        "the warning says what, how much and what to do: {default}"
    );
    let cron = warning("warn-cron-lease").expect("a 1-minute lease on an every-second cron");
    assert!(cron.contains("periods=60"), "{cron}");
    assert_eq!(warning("quiet-ten-periods"), None, "{logs}");
    assert_eq!(warning("quiet-daily"), None, "{logs}");
}

#[tokio::test]
async fn shutdown_fails_naming_the_jobs_still_running_at_the_timeout() {
    let _serial = SERIAL.lock().await;
    let provider = Arc::new(InMemoryLockProvider::new());
    // One body ignores `cancelled()` and runs 3 s; the other stops when cancelled.
    let stubborn = Job::new(
        "outcomes-stubborn",
        Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
        || async { tokio::time::sleep(Duration::from_secs(3)).await },
    );
    let polite = Job::new(
        "outcomes-polite",
        Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
        until_cancelled(),
    );
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .shutdown_timeout(Duration::from_millis(300))
        .jobs([stubborn, polite])
        .start()
        .await
        .unwrap();
    until_held(&provider, "outcomes-stubborn").await;
    until_held(&provider, "outcomes-polite").await;
    let began = std::time::Instant::now();
    let error = scheduler
        .run_until(async {})
        .await
        .expect_err("a job outlived the shutdown timeout");
    let waited = began.elapsed();
    match &error {
        lock_core::LockError::ShutdownTimedOut { running, timeout } => {
            assert_eq!(running, &["outcomes-stubborn"]);
            assert_eq!(*timeout, Duration::from_millis(300));
        }
        other => panic!("expected ShutdownTimedOut, got {other:?}"),
    }
    assert_eq!(
        error.to_string(),
        "shutdown timed out after 300ms: jobs still running: outcomes-stubborn; their leases \
         end when they finish or at lock_at_most_for"
    );
    // Waited the timeout, not the stubborn body's 3 s.
    assert!(
        (Duration::from_millis(300)..Duration::from_secs(2)).contains(&waited),
        "{waited:?}"
    );
    let held: Vec<String> = provider
        .list_locks()
        .await
        .unwrap()
        .into_iter()
        .filter(|l| l.held)
        .map(|l| l.name)
        .collect();
    assert_eq!(
        held,
        ["outcomes-stubborn"],
        "the running body keeps its lease; the stopped one's is released"
    );
}

/// The in-memory store behind a slow link for releases: each release reaches the store only
/// after `delay` (a database far away at the end of a shutdown).
struct SlowRelease {
    inner: InMemoryLockProvider,
    delay: Duration,
}

// No cluster tables: the scheduler runs without them.
impl lock_cluster::ClusterProvider for SlowRelease {}

#[async_trait::async_trait]
impl LockProvider for SlowRelease {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        self.inner.acquire(request).await
    }
    async fn extend(&self, lease: &Lease, at_most: Duration) -> Result<bool, LockError> {
        self.inner.extend(lease, at_most).await
    }
    async fn release(&self, lease: &Lease, at_least: Duration) -> Result<bool, LockError> {
        tokio::time::sleep(self.delay).await;
        self.inner.release(lease, at_least).await
    }
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.inner.list_locks().await
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner.force_unlock(name).await
    }
    fn describe(&self) -> String {
        "in-memory behind a slow link".into()
    }
}

#[tokio::test]
async fn a_release_under_way_at_the_shutdown_timeout_is_awaited_not_cut_off() {
    let _serial = SERIAL.lock().await;
    let provider = Arc::new(SlowRelease {
        inner: InMemoryLockProvider::new(),
        delay: Duration::from_millis(400),
    });
    // The body ends 100 ms into a 200 ms shutdown timeout; its release takes 400 ms, so it is
    // under way when the timeout passes.
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .shutdown_timeout(Duration::from_millis(200))
        .jobs([Job::new(
            "outcomes-slow-release",
            Trigger::fixed_delay(Duration::from_secs(3600)).unwrap(),
            || async {
                let ctx = JobContext::current().unwrap();
                ctx.cancelled().await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            },
        )])
        .start()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), async {
        while !scheduler.jobs()[0].running {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the job starts at once");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let began = std::time::Instant::now();
    scheduler
        .shutdown()
        .await
        .expect("the body ended in time; its release was awaited");
    let waited = began.elapsed();
    // 100 ms body + 400 ms release: past the 200 ms timeout, within the operation timeout.
    assert!(
        (Duration::from_millis(450)..Duration::from_secs(3)).contains(&waited),
        "{waited:?}"
    );
    let locks = provider.list_locks().await.unwrap();
    assert!(
        !locks[0].held,
        "released before shutdown returned: {locks:?}"
    );
    assert_eq!(
        scheduler.jobs()[0].last_outcome,
        Some(RunOutcome::Cancelled)
    );
}

#[tokio::test]
async fn a_paused_job_counts_refused_fires_and_exports_its_next_fire() {
    let _serial = SERIAL.lock().await;
    let metrics = recorded();
    let provider = Arc::new(InMemoryLockProvider::new());
    let name = "outcomes-paused";
    let store = provider.cluster().expect("in-memory operations");
    store.pause(name, "test").await.unwrap();
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .heartbeat_interval(Duration::from_millis(50))
        .jobs([Job::new(
            name,
            Trigger::fixed_rate(Duration::from_millis(100)).unwrap(),
            || async {},
        )])
        .start()
        .await
        .unwrap();
    // The first heartbeat brings the pause; from then on every fire is refused and counted.
    tokio::time::timeout(Duration::from_secs(5), async {
        while metrics.counter(names::JOB_PAUSED_TOTAL, name).unwrap_or(0) < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("paused fires are counted");
    let now = chrono::Utc::now().timestamp_micros() as f64 / 1e6;
    let next = metrics
        .gauge(names::JOB_NEXT_FIRE_TIMESTAMP_SECONDS, name)
        .expect("the next fire is exported");
    scheduler.shutdown().await.unwrap();
    assert_eq!(scheduler.jobs()[0].last_outcome, Some(RunOutcome::Paused));
    // The next slot, at most one period (0.1 s) away, plus the acquire-ahead (a fire wakes,
    // and moves the gauge on, that much before its slot); 50 ms for the clock estimate's error.
    let ahead = lock_scheduler::DEFAULT_ACQUIRE_AHEAD.as_secs_f64();
    assert!(
        next > now - 0.05 && next <= now + 0.15 + ahead,
        "next fire {next} vs now {now}"
    );
}
