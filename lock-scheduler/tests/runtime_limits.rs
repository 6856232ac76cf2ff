//! Run-time input the macros would refuse is refused at run time too, as an error, never a
//! panic: a zero fixed delay, durations beyond `MAX_DURATION` (1000 years), `Duration::MAX`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use lock_core::{
    InMemoryLockProvider, LockConfiguration, LockError, LockOutcome, LockingTaskExecutor,
    MAX_DURATION,
};
use lock_scheduler::{Job, Scheduler, SchedulerBuilder, Trigger};

const BEYOND: Duration = MAX_DURATION.saturating_add(Duration::from_millis(1));

/// The error `start()` fails with, on the in-memory provider.
async fn start_error(builder: SchedulerBuilder) -> String {
    match builder
        .lock_provider(InMemoryLockProvider::new())
        .start()
        .await
    {
        Ok(_) => panic!("start() must fail"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn a_zero_fixed_delay_is_refused_like_in_the_macro() {
    let error = Trigger::fixed_delay(Duration::ZERO)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("fixed_delay") && error.contains("at least 1 ms"),
        "{error}"
    );
    assert!(Trigger::fixed_delay(Duration::from_micros(500)).is_err());
    assert!(Trigger::fixed_delay(Duration::from_millis(1)).is_ok());
}

#[test]
fn trigger_durations_beyond_the_limit_are_refused() {
    for error in [
        Trigger::fixed_rate(Duration::MAX).unwrap_err(),
        Trigger::fixed_rate(BEYOND).unwrap_err(),
        Trigger::fixed_delay(Duration::MAX).unwrap_err(),
    ] {
        let text = error.to_string();
        assert!(text.contains("1000 years"), "{text}");
    }
    assert!(Trigger::fixed_rate(MAX_DURATION).is_ok());
    assert!(Trigger::fixed_delay(MAX_DURATION).is_ok());
}

#[test]
fn lock_durations_beyond_the_limit_are_refused() {
    let error = LockConfiguration::new("huge", Duration::MAX, Duration::ZERO).unwrap_err();
    assert!(
        matches!(error, LockError::DurationTooLong { .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("\"huge\"")
            && text.contains("lock_at_most_for")
            && text.contains("1000 years"),
        "{text}"
    );
    assert!(LockConfiguration::new("huge", BEYOND, BEYOND).is_err());
    assert!(LockConfiguration::new("huge", MAX_DURATION, MAX_DURATION).is_ok());
}

/// Keep-alive with the longest lease allowed, and an operation timeout of `Duration::MAX`
/// ("never time out"): no overflow anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_durations_run_without_panicking() {
    let executor =
        LockingTaskExecutor::new(InMemoryLockProvider::new()).with_operation_timeout(Duration::MAX);
    let config = LockConfiguration::new("longest", MAX_DURATION, Duration::ZERO)
        .unwrap()
        .with_keep_alive(true);
    let outcome = executor
        .execute_with_lock(&config, async {
            tokio::time::sleep(Duration::from_millis(20)).await;
            7
        })
        .await
        .unwrap();
    assert_eq!(outcome, LockOutcome::Executed(7));
}

/// An initial delay beyond the limit is set on a trigger that cannot return an error
/// (`with_initial_delay` returns the trigger): `start()` refuses it, naming the job, instead of
/// the job's task panicking and the job silently never running.
#[tokio::test]
async fn an_initial_delay_beyond_the_limit_fails_at_start() {
    let runs = Arc::new(AtomicU32::new(0));
    let counted = runs.clone();
    let trigger = Trigger::fixed_delay(Duration::from_secs(1))
        .unwrap()
        .with_initial_delay(Duration::MAX);
    let job = Job::new("late", trigger, move || {
        counted.fetch_add(1, Ordering::SeqCst);
        async {}
    });
    let error = start_error(Scheduler::builder().jobs([job])).await;
    assert!(
        error.contains("`late`") && error.contains("initial_delay") && error.contains("1000 years"),
        "{error}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

/// A default `lock_at_most_for` beyond the limit fails at `start()` too (the builder method
/// cannot return an error).
#[tokio::test]
async fn a_default_lease_beyond_the_limit_fails_at_start() {
    let job = Job::new(
        "default-lease",
        Trigger::fixed_rate(Duration::from_secs(1)).unwrap(),
        || async {},
    );
    let builder = Scheduler::builder().default_lock_at_most_for(Duration::MAX);
    let error = start_error(builder.jobs([job])).await;
    assert!(
        error.contains("`default-lease`") && error.contains("lock_at_most_for"),
        "{error}"
    );
}
