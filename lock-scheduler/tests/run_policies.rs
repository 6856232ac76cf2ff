//! Retries, timeouts and misfire catch-up in one process on the in-memory provider: what the
//! history records of each attempt, how a blocking body is timed out, what start refuses, and
//! that a slot missed before start runs once as a catch-up. The multi-process versions, on
//! PostgreSQL and SQLite, are `fault-tests/tests/misfire.rs`.

use lock_cluster::ClusterProvider;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_cluster::RunState;
use lock_core::{
    FireKind, FireSlot, InMemoryLockProvider, JobContext, LockConfiguration, LockError,
    LockProvider, LockingTaskExecutor,
};
use lock_scheduler::{Job, MisfirePolicy, RunOutcome, Scheduler, Trigger};
use test_support::process::eventually;

const WAIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_attempt_is_a_history_row_of_one_slot_and_one_lease() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let job = Job::new(
        "flaky",
        Trigger::fixed_rate(Duration::from_secs(3600)).unwrap(),
        |ctx: JobContext| async move {
            match ctx.attempt() {
                1 => Err("first"),
                2 => panic!("second"),
                _ => Ok(()),
            }
        },
    )
    .with_retries(2, Duration::from_millis(50));
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .jobs([job])
        .start()
        .await
        .unwrap();
    assert_eq!(
        scheduler.trigger("flaky").await.unwrap(),
        RunOutcome::Succeeded
    );
    let store = provider.cluster().unwrap();
    let runs = eventually(WAIT, "three finished attempts", || async {
        let runs = store.history("flaky", 10).await.unwrap();
        (runs.len() == 3 && runs.iter().all(|r| r.ended_at.is_some())).then_some(runs)
    })
    .await;
    scheduler.shutdown().await.unwrap();
    // Newest first.
    let outcomes: Vec<RunState> = runs.iter().rev().map(|r| r.outcome).collect();
    assert_eq!(
        outcomes,
        [RunState::Failed, RunState::Panicked, RunState::Succeeded]
    );
    assert!(runs.iter().all(|r| r.fence == runs[0].fence), "one lease");
    assert!(runs.iter().all(|r| r.fire_kind == FireKind::Manual));
    assert_eq!(runs[2].error.as_deref(), Some("first"));
    assert_eq!(
        scheduler.jobs()[0].last_outcome,
        Some(RunOutcome::Succeeded)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_body_is_told_to_stop_at_its_timeout_and_keeps_the_lease_until_it_returns() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let seen = Arc::new(Mutex::new(None));
    let seen_in_body = seen.clone();
    let job = Job::blocking(
        "sync",
        Trigger::fixed_rate(Duration::from_secs(3600)).unwrap(),
        move |ctx: JobContext| {
            // Ignores cancelled() for 1.5 s, past timeout + grace (0.2 s + 1 s).
            std::thread::sleep(Duration::from_millis(1_500));
            *seen_in_body.lock().unwrap() = Some(ctx.is_cancelled());
        },
    )
    .with_timeout(Duration::from_millis(200));
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([job])
        .start()
        .await
        .unwrap();
    let run = tokio::spawn({
        let scheduler = scheduler.clone();
        async move { scheduler.trigger("sync").await }
    });
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    // Past timeout + grace, the thread still runs: the lease is still held.
    let row = provider.read_lock("sync").await.unwrap().unwrap();
    assert!(row.held, "a blocking body keeps its lease until it returns");
    assert_eq!(run.await.unwrap().unwrap(), RunOutcome::TimedOut);
    assert_eq!(
        *seen.lock().unwrap(),
        Some(true),
        "cancelled() had resolved"
    );
    let row = provider.read_lock("sync").await.unwrap().unwrap();
    assert!(!row.held, "released once it returned");
    scheduler.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_body_past_its_timeout_and_grace_is_dropped() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let reached_end = Arc::new(AtomicU32::new(0));
    let flag = reached_end.clone();
    let job = Job::new(
        "stuck",
        Trigger::fixed_rate(Duration::from_secs(3600)).unwrap(),
        move || {
            let flag = flag.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                flag.fetch_add(1, Ordering::SeqCst);
            }
        },
    )
    .with_timeout(Duration::from_millis(100));
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([job])
        .start()
        .await
        .unwrap();
    let started = tokio::time::Instant::now();
    let outcome = scheduler.trigger("stuck").await.unwrap();
    // Timeout 100 ms + the grace's floor of 1 s.
    assert!(started.elapsed() >= Duration::from_millis(1_100));
    assert_eq!(outcome, RunOutcome::TimedOut);
    assert_eq!(
        reached_end.load(Ordering::SeqCst),
        0,
        "dropped, not finished"
    );
    assert!(!provider.read_lock("stuck").await.unwrap().unwrap().held);
    scheduler.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_refuses_a_retry_plan_longer_than_the_lease_without_keep_alive() {
    let job = || {
        Job::new(
            "plan",
            Trigger::fixed_rate(Duration::from_secs(60)).unwrap(),
            || async {},
        )
        .with_retries(3, Duration::from_secs(10))
        .with_lock(LockConfiguration::new("plan", Duration::from_secs(60), Duration::ZERO).unwrap())
    };
    let error = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([job()])
        .start()
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LockError::InvalidConfiguration(m) if m.contains("job `plan`: 3 retries")),
        "{error}"
    );
    // With keep-alive the lease follows the run.
    let kept = job().with_lock(
        LockConfiguration::new("plan", Duration::from_secs(60), Duration::ZERO)
            .unwrap()
            .with_keep_alive(true),
    );
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([kept])
        .start()
        .await
        .unwrap();
    scheduler.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_missed_before_start_runs_once_as_a_catch_up() {
    every_missed_slot_runs_once_oldest_first("catch", Duration::ZERO).await;
}

/// With `lock_at_least_for`, each catch-up's lease outlives its body, so the next missed slot
/// is refused while it lasts: the catch-up waits for the lease to end and tries the same slot
/// again, instead of moving on (which lost every missed slot after the first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_catch_up_waits_for_its_own_lock_at_least_for_before_the_next_missed_slot() {
    every_missed_slot_runs_once_oldest_first("catch_least", Duration::from_millis(150)).await;
}

async fn every_missed_slot_runs_once_oldest_first(name: &'static str, at_least: Duration) {
    let provider = Arc::new(InMemoryLockProvider::new());
    let period = Duration::from_secs(2);
    let trigger = Trigger::fixed_rate(period)
        .unwrap()
        .with_misfire(MisfirePolicy::CatchUp)
        .unwrap()
        .with_misfire_grace(Duration::from_secs(60));
    // Start early in a period, so the catch-ups (each waiting for the last one's lease) end
    // before the next regular slot, where a catch-up stops waiting.
    let mut now = provider.database_time().await.unwrap();
    let into_period = now - trigger.slot_at_or_before(now).unwrap().instant();
    if into_period > chrono::TimeDelta::milliseconds(500) {
        let to_next = trigger.next_slot(now).unwrap().instant() - now;
        tokio::time::sleep(to_next.to_std().unwrap() + Duration::from_millis(20)).await;
        now = provider.database_time().await.unwrap();
    }
    // The job last ran three slots ago: the two after it and the current one were missed.
    let current = trigger.slot_at_or_before(now).unwrap();
    let last_ran = current.instant() - chrono::TimeDelta::seconds(6);
    let executor = LockingTaskExecutor::from_shared(provider.clone());
    let config = LockConfiguration::new(name, Duration::from_secs(10), at_least).unwrap();
    executor
        .execute_in_slot(
            &LockConfiguration::new(name, Duration::from_secs(10), Duration::ZERO).unwrap(),
            Some(FireSlot::new(last_ran)),
            async {},
        )
        .await
        .unwrap()
        .executed()
        .expect("the earlier slot ran");
    let runs = Arc::new(Mutex::new(Vec::new()));
    let seen = runs.clone();
    let job = Job::new(name, trigger, move |ctx: JobContext| {
        let seen = seen.clone();
        async move {
            seen.lock()
                .unwrap()
                .push((ctx.fire_kind(), ctx.scheduled_at().unwrap()));
        }
    })
    .with_lock(config);
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([job])
        .start()
        .await
        .unwrap();
    eventually(WAIT, "the catch-up runs", || async {
        (runs.lock().unwrap().len() >= 3).then_some(())
    })
    .await;
    scheduler.shutdown().await.unwrap();
    let runs = runs.lock().unwrap().clone();
    let catch_ups: Vec<_> = runs
        .iter()
        .take_while(|(kind, _)| *kind == FireKind::CatchUp)
        .map(|(_, slot)| *slot)
        .collect();
    let two = chrono::TimeDelta::seconds(2);
    // Three missed slots, oldest first (a fourth if the database's clock crossed a slot
    // between reading it above and the start).
    assert!(catch_ups.len() >= 3, "{runs:?}");
    assert_eq!(
        catch_ups[..3],
        [last_ran + two, last_ran + two * 2, last_ran + two * 3],
        "{runs:?}"
    );
    let mut slots: Vec<_> = runs.iter().map(|(_, slot)| *slot).collect();
    slots.dedup();
    assert_eq!(slots.len(), runs.len(), "no slot twice: {runs:?}");
}

/// A sharded job's missed slot is caught up by every shard: each shard's lock row says what
/// it last ran, and the job reads them all at start (a shard that never ran missed nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_job_catches_up_the_missed_slot_on_every_shard() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let period = Duration::from_secs(2);
    let trigger = Trigger::fixed_rate(period)
        .unwrap()
        .with_misfire(MisfirePolicy::FireOnce)
        .unwrap()
        .with_misfire_grace(Duration::from_secs(60));
    let now = provider.database_time().await.unwrap();
    let current = trigger.slot_at_or_before(now).unwrap();
    let last_ran = current.instant() - chrono::TimeDelta::seconds(6);
    let executor = LockingTaskExecutor::from_shared(provider.clone());
    for shard in ["sharded_catch#0", "sharded_catch#1"] {
        let config =
            LockConfiguration::new(shard, Duration::from_secs(10), Duration::ZERO).unwrap();
        executor
            .execute_in_slot(&config, Some(FireSlot::new(last_ran)), async {})
            .await
            .unwrap()
            .executed()
            .expect("the earlier slot ran");
    }
    let runs = Arc::new(Mutex::new(Vec::new()));
    let seen = runs.clone();
    let job = Job::new("sharded_catch", trigger, move |ctx: JobContext| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push((
                ctx.fire_kind(),
                ctx.scheduled_at().unwrap(),
                ctx.shard().unwrap(),
            ));
        }
    })
    .with_shards(2);
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .jobs([job])
        .start()
        .await
        .unwrap();
    eventually(WAIT, "both shards catch up", || async {
        let runs = runs.lock().unwrap();
        (runs
            .iter()
            .filter(|(kind, ..)| *kind == FireKind::CatchUp)
            .count()
            >= 2)
            .then_some(())
    })
    .await;
    scheduler.shutdown().await.unwrap();
    let runs = runs.lock().unwrap().clone();
    let mut catch_ups: Vec<_> = runs
        .iter()
        .filter(|(kind, ..)| *kind == FireKind::CatchUp)
        .map(|(_, slot, shard)| (*slot, *shard))
        .collect();
    catch_ups.sort();
    // fire_once: one slot (the latest missed at start), run once by each shard.
    assert_eq!(catch_ups.len(), 2, "{runs:?}");
    assert_eq!(catch_ups[0].0, catch_ups[1].0, "{runs:?}");
    assert!(catch_ups[0].0 > last_ran, "{runs:?}");
    assert_eq!(
        [catch_ups[0].1, catch_ups[1].1],
        [(0, 2), (1, 2)],
        "{runs:?}"
    );
}
