//! Each run's log lines: the events of its body kept with its history row, at the level and
//! within the bounds configured, without changing what the service's own subscriber sees, and
//! never mixed between concurrent runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use lock_cluster::{ClusterProvider, RunLog, RunState};
use lock_core::{InMemoryLockProvider, JobError};
use lock_scheduler::{Job, RunLogs, RunOutcome, Scheduler, Trigger};
use tracing::Level;

fn daily() -> Trigger {
    Trigger::cron("0 0 3 * * *").unwrap()
}

/// The log lines of every run of `job`, newest run first.
async fn logs_of(provider: &InMemoryLockProvider, job: &str) -> Vec<(RunState, Option<RunLog>)> {
    let store = provider.cluster().unwrap();
    let runs = store.history(job, 100).await.unwrap();
    let (Some(newest), Some(oldest)) = (runs.first(), runs.last()) else {
        return Vec::new();
    };
    let logs = store.run_logs(job, oldest.id..=newest.id).await.unwrap();
    runs.iter()
        .map(|run| {
            let log = logs
                .iter()
                .find(|(id, _)| *id == run.id)
                .map(|(_, l)| l.clone());
            (run.outcome, log)
        })
        .collect()
}

fn messages(log: &RunLog) -> Vec<String> {
    log.lines()
        .unwrap()
        .into_iter()
        .map(|l| format!("{} {}", l.level, l.message))
        .collect()
}

async fn logging_body() {
    tracing::debug!("a debug line");
    tracing::info!(rows = 3, "charged <b>3</b> accounts");
    tokio::task::yield_now().await;
    tracing::warn!("one account was late");
}

/// The service's own output, with the times and the scheduler's own lines taken out.
fn own_output(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains("run_logs:"))
        .map(|l| {
            l.split_once(' ')
                .map_or(l, |(_, rest)| rest)
                .trim()
                .to_owned()
        })
        .collect()
}

async fn run_once_with(
    logs: RunLogs,
    service_level: Level,
) -> (Vec<(RunState, Option<RunLog>)>, Vec<String>) {
    let (output, guard) = test_support::logs::capture_at(service_level);
    let provider = Arc::new(InMemoryLockProvider::new());
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id("run-logs-test")
        .run_logs(logs)
        .jobs([Job::new("report", daily(), logging_body)])
        .start()
        .await
        .unwrap();
    assert_eq!(
        scheduler.trigger("report").await.unwrap(),
        RunOutcome::Succeeded
    );
    scheduler.shutdown().await.unwrap();
    drop(guard);
    (
        logs_of(&provider, "report").await,
        own_output(&output.text()),
    )
}

// Current-thread: the test's subscriber (a thread's default) is the one the runs start under.
#[tokio::test]
async fn a_runs_lines_are_kept_at_the_level_and_the_services_output_is_unchanged() {
    let (runs, with_capture) = run_once_with(RunLogs::default(), Level::INFO).await;
    assert_eq!(runs.len(), 1);
    let log = runs[0].1.as_ref().expect("the run kept lines");
    assert_eq!(
        messages(log),
        [
            "INFO charged <b>3</b> accounts rows=3",
            "WARN one account was late"
        ],
        "INFO and above, with the fields; the DEBUG line not kept"
    );
    let line = &log.lines().unwrap()[0];
    assert_eq!(line.target, "run_logs");
    assert_eq!(log.dropped(), 0);

    let (runs, without) = run_once_with(RunLogs::disabled(), Level::INFO).await;
    assert!(runs[0].1.is_none(), "disabled: no lines");
    // The service's own subscriber saw the same lines, in the run's span (its span ids and
    // fields), with or without the capture.
    assert_eq!(with_capture, without);
    assert_eq!(with_capture.len(), 2, "{with_capture:?}");
    assert!(
        with_capture[0].contains("fire{job=\"report\"")
            && with_capture[0].contains("charged <b>3</b> accounts rows=3"),
        "{with_capture:?}"
    );

    // A service that logs WARN and above still sees only those; the run keeps INFO.
    let (runs, warn_only) = run_once_with(RunLogs::default(), Level::WARN).await;
    assert_eq!(messages(runs[0].1.as_ref().unwrap()).len(), 2);
    assert_eq!(warn_only.len(), 1, "{warn_only:?}");
    assert!(
        warn_only[0].contains("one account was late"),
        "{warn_only:?}"
    );
}

#[tokio::test]
async fn a_lower_level_keeps_debug_lines() {
    let (runs, _) = run_once_with(RunLogs::default().level(Level::DEBUG), Level::WARN).await;
    let log = runs[0].1.as_ref().unwrap();
    assert_eq!(messages(log)[0], "DEBUG a debug line");
}

#[tokio::test]
async fn past_the_bound_the_first_lines_are_kept_and_the_rest_counted() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let job = Job::new("chatty", daily(), || async {
        for i in 0..10 {
            tracing::info!("line {i}");
        }
    });
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .run_logs(RunLogs::default().max_lines(3))
        .jobs([job])
        .start()
        .await
        .unwrap();
    scheduler.trigger("chatty").await.unwrap();
    scheduler.shutdown().await.unwrap();
    let runs = logs_of(&provider, "chatty").await;
    let log = runs[0].1.as_ref().unwrap();
    assert_eq!(messages(log), ["INFO line 0", "INFO line 1", "INFO line 2"]);
    assert_eq!(log.dropped(), 7);
}

#[tokio::test]
async fn concurrent_runs_never_mix_their_lines() {
    let provider = Arc::new(InMemoryLockProvider::new());
    // Both bodies wait for each other, then log in turns on this one thread.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let job = |name: &'static str| {
        let barrier = barrier.clone();
        Job::new(name, daily(), move || {
            let barrier = barrier.clone();
            async move {
                barrier.wait().await;
                for i in 0..5 {
                    tracing::info!("{name} {i}");
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([job("left"), job("right")])
        .start()
        .await
        .unwrap();
    let (left, right) = tokio::join!(scheduler.trigger("left"), scheduler.trigger("right"));
    assert_eq!(
        (left.unwrap(), right.unwrap()),
        (RunOutcome::Succeeded, RunOutcome::Succeeded)
    );
    scheduler.shutdown().await.unwrap();
    for name in ["left", "right"] {
        let runs = logs_of(&provider, name).await;
        let lines = messages(runs[0].1.as_ref().unwrap());
        let expected: Vec<String> = (0..5).map(|i| format!("INFO {name} {i}")).collect();
        assert_eq!(lines, expected, "{name}'s run kept its own lines only");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_keeps_its_own_lines_and_a_blocking_body_its_threads() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let attempts = Arc::new(AtomicU32::new(0));
    let flaky = {
        let attempts = attempts.clone();
        Job::new("flaky", daily(), move || {
            let attempt = attempts.fetch_add(1, Ordering::SeqCst) + 1;
            async move {
                tracing::info!("attempt {attempt}");
                if attempt == 1 {
                    return Err(JobError::new("first attempt fails"));
                }
                Ok(())
            }
        })
        .with_retries(1, Duration::from_millis(10))
    };
    let export = Job::blocking("export", daily(), || {
        tracing::info!("exported on a blocking thread");
    });
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([flaky, export])
        .start()
        .await
        .unwrap();
    assert_eq!(
        scheduler.trigger("flaky").await.unwrap(),
        RunOutcome::Succeeded
    );
    scheduler.trigger("export").await.unwrap();
    scheduler.shutdown().await.unwrap();
    let runs = logs_of(&provider, "flaky").await;
    let seen: Vec<(RunState, Vec<String>)> = runs
        .iter()
        .map(|(state, log)| (*state, messages(log.as_ref().unwrap())))
        .collect();
    assert_eq!(
        seen,
        [
            (RunState::Succeeded, vec!["INFO attempt 2".to_owned()]),
            (RunState::Failed, vec!["INFO attempt 1".to_owned()]),
        ]
    );
    let runs = logs_of(&provider, "export").await;
    assert_eq!(
        messages(runs[0].1.as_ref().unwrap()),
        ["INFO exported on a blocking thread"]
    );
}

#[tokio::test]
async fn without_history_nothing_is_kept_and_bad_bounds_are_refused_at_start() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .no_history()
        .jobs([Job::new("report", daily(), logging_body)])
        .start()
        .await
        .unwrap();
    scheduler.trigger("report").await.unwrap();
    scheduler.shutdown().await.unwrap();
    assert!(logs_of(&provider, "report").await.is_empty());

    for (logs, expected) in [
        (
            RunLogs::default().max_lines(0),
            "max_lines must be at least 1",
        ),
        (
            RunLogs::default().max_bytes(2 << 20),
            "max_bytes 2097152 is outside",
        ),
        (RunLogs::default().max_bytes(10), "max_bytes 10 is outside"),
    ] {
        let started = Scheduler::builder()
            .lock_provider(InMemoryLockProvider::new())
            .run_logs(logs)
            .jobs([])
            .start()
            .await;
        let Err(error) = started else {
            panic!("{logs:?} was not refused");
        };
        assert!(error.to_string().contains(expected), "{error}");
    }
}
