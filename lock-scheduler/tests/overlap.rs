//! Overlap policies on the in-memory provider, two schedulers with their own instance ids
//! playing two instances of one cluster: what a slot that comes due while the job's previous
//! run still runs does (`queue`, `replace`, and the default `skip`).
//!
//! Times are compared on one clock, the test's monotonic `Instant`, read in the bodies. The
//! period is 2 s, so that a run started by the regular timer (at a slot) and one started right
//! after the previous run ended (queued) are more than a second apart: the margins below are
//! that gap, not a guess of how fast the loaded machine is.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use lock_core::{FireKind, InMemoryLockProvider, JobContext};
use lock_scheduler::{Job, Overlap, Scheduler, Trigger};
use test_support::process::eventually;

const PERIOD: Duration = Duration::from_secs(2);
const WAIT: Duration = Duration::from_secs(20);

/// One run as its body saw it.
#[derive(Clone, Debug)]
struct Run {
    instance: String,
    slot: Option<DateTime<Utc>>,
    kind: FireKind,
    started: Instant,
    ended: Instant,
    /// Whether `cancelled()` had resolved when the body returned.
    cancelled: bool,
}

type Runs = Arc<Mutex<Vec<Run>>>;

/// The instance and slot of the first run, as it began.
type First = Arc<Mutex<Option<(String, DateTime<Utc>)>>>;

/// A job whose first run lasts `first` (waiting on `cancelled()` meanwhile) and every later
/// one 50 ms.
fn job(overlap: Overlap, first: Duration, runs: Runs) -> Job {
    Job::new(
        "overlapping",
        Trigger::fixed_rate(PERIOD).unwrap(),
        move |ctx: JobContext| {
            let runs = runs.clone();
            async move {
                let started = Instant::now();
                let long = runs.lock().unwrap().is_empty();
                let length = if long {
                    first
                } else {
                    Duration::from_millis(50)
                };
                tokio::select! {
                    _ = ctx.cancelled() => {}
                    _ = tokio::time::sleep(length) => {}
                }
                runs.lock().unwrap().push(Run {
                    instance: ctx.instance_id().to_owned(),
                    slot: ctx.scheduled_at(),
                    kind: ctx.fire_kind(),
                    started,
                    ended: Instant::now(),
                    cancelled: ctx.is_cancelled(),
                });
                Ok::<(), &str>(())
            }
        },
    )
    .with_overlap(overlap)
}

/// Two instances of the job on one provider.
async fn cluster(overlap: Overlap, first: Duration, runs: &Runs) -> Vec<Scheduler> {
    let provider = Arc::new(InMemoryLockProvider::new());
    let mut schedulers = Vec::new();
    for instance in ["a", "b"] {
        schedulers.push(
            Scheduler::builder()
                .lock_provider(provider.clone())
                .instance_id(instance)
                .jobs([job(overlap, first, runs.clone())])
                .start()
                .await
                .unwrap(),
        );
    }
    schedulers
}

async fn runs_after(runs: &Runs, n: usize) -> Vec<Run> {
    let seen = eventually(WAIT, "enough runs", || async {
        let runs = runs.lock().unwrap().clone();
        (runs.len() >= n).then_some(runs)
    })
    .await;
    let mut seen = seen;
    seen.sort_by_key(|run| run.started);
    seen
}

async fn stop(schedulers: Vec<Scheduler>) {
    for scheduler in schedulers {
        scheduler.shutdown().await.unwrap();
    }
}

fn each_slot_once(runs: &[Run]) {
    let mut slots: Vec<_> = runs.iter().map(|run| run.slot).collect();
    slots.sort();
    let before = slots.len();
    slots.dedup();
    assert_eq!(slots.len(), before, "a slot ran twice: {runs:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_runs_the_newest_overlapped_slot_once_right_after_the_running_one() {
    let runs = Runs::default();
    // 2.2 periods: the two slots after the first come due while it runs.
    let schedulers = cluster(Overlap::Queue, PERIOD * 11 / 5, &runs).await;
    let seen = runs_after(&runs, 3).await;
    stop(schedulers).await;
    each_slot_once(&seen);
    let (first, queued) = (&seen[0], &seen[1]);
    assert_eq!(first.kind, FireKind::Scheduled);
    assert!(!first.cancelled, "queue does not cancel the running body");
    assert_eq!(queued.kind, FireKind::Queued, "{seen:?}");
    assert_eq!(queued.instance, first.instance, "queued where it ran");
    // Coalesced: the newest due slot, two periods after the first; the one between never ran.
    let slot_gap = queued.slot.unwrap() - first.slot.unwrap();
    assert_eq!(slot_gap.to_std().unwrap(), PERIOD * 2, "{seen:?}");
    // The next regular slot is 0.8 periods (1.6 s) after the first run's end: a start within
    // a second of it is the queued start, not the timer's.
    let gap = queued.started.duration_since(first.ended);
    assert!(
        gap < Duration::from_secs(1),
        "queued run started {gap:?} after"
    );
    // Then the schedule goes on regularly.
    assert_eq!(seen[2].kind, FireKind::Scheduled, "{seen:?}");
    assert!(seen[2].slot > queued.slot);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_cancels_the_running_body_at_the_next_slot_and_runs_that_slot_after() {
    let runs = Runs::default();
    // Would run for ten periods; the next slot cancels it.
    let schedulers = cluster(Overlap::Replace, PERIOD * 10, &runs).await;
    let seen = runs_after(&runs, 2).await;
    stop(schedulers).await;
    each_slot_once(&seen);
    let (first, replacing) = (&seen[0], &seen[1]);
    assert!(
        first.cancelled,
        "the replaced body saw cancelled(): {seen:?}"
    );
    assert!(
        first.ended.duration_since(first.started) < PERIOD * 2,
        "ended at the next slot, not after its ten periods: {seen:?}"
    );
    // Whichever instance gets the lock runs the slot (book/overlap-and-limits.md): the replaced
    // run's instance fires it as replacing; the other one as replacing when its fire waited for
    // the replaced run's lease, or as scheduled when its fire at the slot asked just after the
    // replaced run released the lock, and won.
    if replacing.instance == first.instance {
        assert_eq!(replacing.kind, FireKind::Replacing, "{seen:?}");
    } else {
        assert!(
            matches!(replacing.kind, FireKind::Replacing | FireKind::Scheduled),
            "{seen:?}"
        );
    }
    assert!(!replacing.cancelled);
    let slot_gap = replacing.slot.unwrap() - first.slot.unwrap();
    assert_eq!(slot_gap.to_std().unwrap(), PERIOD, "{seen:?}");
    assert!(
        replacing.started >= first.ended,
        "after the replaced body ended"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_still_skips_the_slots_passed_while_the_body_runs() {
    let runs = Runs::default();
    let schedulers = cluster(Overlap::Skip, PERIOD * 11 / 5, &runs).await;
    let seen = runs_after(&runs, 2).await;
    stop(schedulers).await;
    each_slot_once(&seen);
    assert!(!seen[0].cancelled);
    assert_eq!(seen[1].kind, FireKind::Scheduled, "{seen:?}");
    // Nothing right after: the next run is the first slot after the end, 0.8 periods later.
    assert!(
        seen[1].started.duration_since(seen[0].ended) > PERIOD / 4,
        "{seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_on_another_instance_asks_again_at_lock_until_and_runs_the_slot_once() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
    // Which instance holds the lock, and for which slot.
    let first = First::default();
    let make = |runs: Runs, first: First| {
        Job::new(
            "overlapping",
            Trigger::fixed_rate(PERIOD).unwrap(),
            move |ctx: JobContext| {
                let (runs, first) = (runs.clone(), first.clone());
                async move {
                    let started = Instant::now();
                    let long = first.lock().unwrap().is_none();
                    if long {
                        *first.lock().unwrap() =
                            Some((ctx.instance_id().to_owned(), ctx.scheduled_at().unwrap()));
                        // Until its instance shuts down.
                        ctx.cancelled().await;
                    }
                    runs.lock().unwrap().push(Run {
                        instance: ctx.instance_id().to_owned(),
                        slot: ctx.scheduled_at(),
                        kind: ctx.fire_kind(),
                        started,
                        ended: Instant::now(),
                        cancelled: ctx.is_cancelled(),
                    });
                    Ok::<(), &str>(())
                }
            },
        )
        .with_overlap(Overlap::Queue)
        // 1.5 periods: the other instance's re-ask at lock_until comes before the slot after.
        .with_lock(
            lock_core::LockConfiguration::new("overlapping", PERIOD * 3 / 2, Duration::ZERO)
                .unwrap(),
        )
    };
    let mut schedulers = std::collections::HashMap::new();
    for instance in ["a", "b"] {
        let scheduler = Scheduler::builder()
            .lock_provider(provider.clone())
            .instance_id(instance)
            .jobs([make(runs.clone(), first.clone())])
            .start()
            .await
            .unwrap();
        schedulers.insert(instance.to_owned(), scheduler);
    }
    let (holder, s0) = eventually(WAIT, "the first run", || async {
        first.lock().unwrap().clone()
    })
    .await;
    let s1 = s0 + chrono::TimeDelta::from_std(PERIOD).unwrap();
    // The holder shuts down once the next slot was refused on the other instance (the
    // in-memory store's clock is this host's): its queued slot is not run there.
    eventually(WAIT, "the next slot passed", || async {
        (Utc::now() > s1 + chrono::TimeDelta::milliseconds(300)).then_some(())
    })
    .await;
    schedulers
        .remove(&holder)
        .unwrap()
        .shutdown()
        .await
        .unwrap();
    let other = schedulers.into_values().next().unwrap();
    let queued = eventually(
        WAIT,
        "the other instance's run of the next slot",
        || async {
            let runs = runs.lock().unwrap().clone();
            runs.into_iter().find(|run| run.slot == Some(s1))
        },
    )
    .await;
    // Until the slot after it has run too: once per slot holds past the queued run.
    let s2 = s1 + chrono::TimeDelta::from_std(PERIOD).unwrap();
    eventually(WAIT, "the slot after", || async {
        let runs = runs.lock().unwrap().clone();
        runs.iter().any(|run| run.slot >= Some(s2)).then_some(())
    })
    .await;
    other.shutdown().await.unwrap();
    let seen = runs.lock().unwrap().clone();
    each_slot_once(&seen);
    assert_ne!(queued.instance, holder, "{seen:?}");
    assert_eq!(queued.kind, FireKind::Queued, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_resolves_a_blocking_body_s_cancelled_too() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
    let in_body = runs.clone();
    let job = Job::blocking(
        "overlapping",
        Trigger::fixed_rate(PERIOD).unwrap(),
        move |ctx: JobContext| {
            let started = Instant::now();
            let long = in_body.lock().unwrap().is_empty();
            // The first run would last ten periods unless told to stop.
            while long && !ctx.is_cancelled() && started.elapsed() < PERIOD * 10 {
                std::thread::sleep(Duration::from_millis(10));
            }
            in_body.lock().unwrap().push(Run {
                instance: ctx.instance_id().to_owned(),
                slot: ctx.scheduled_at(),
                kind: ctx.fire_kind(),
                started,
                ended: Instant::now(),
                cancelled: ctx.is_cancelled(),
            });
            Ok::<(), &str>(())
        },
    )
    .with_overlap(Overlap::Replace);
    let scheduler = Scheduler::builder()
        .lock_provider(provider)
        .jobs([job])
        .start()
        .await
        .unwrap();
    let seen = runs_after(&runs, 2).await;
    scheduler.shutdown().await.unwrap();
    let (first, replacing) = (&seen[0], &seen[1]);
    assert!(first.cancelled, "{seen:?}");
    assert!(
        first.ended.duration_since(first.started) < PERIOD * 2,
        "{seen:?}"
    );
    assert_eq!(replacing.kind, FireKind::Replacing, "{seen:?}");
    let slot_gap = replacing.slot.unwrap() - first.slot.unwrap();
    assert_eq!(slot_gap.to_std().unwrap(), PERIOD, "{seen:?}");
}
