//! The scheduler's acquire-ahead: a cron fire takes its lock before its slot and starts its
//! body at the slot; asking early never loses a slot, never costs a winner's slot a second
//! acquire, and a granted fire runs even when shutdown begins before its slot (with the
//! shutdown's `cancelled()` resolved, as any running body).
//!
//! The in-memory provider's clock is this host's, so the slots, the acquires and the bodies'
//! starts are all compared on one clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use lock_core::{
    AcquireOutcome, InMemoryLockProvider, JobContext, Lease, LockError, LockProvider, LockRecord,
    LockRequest,
};
use lock_scheduler::{Job, RunOutcome, Scheduler, Trigger};

/// One acquire the scheduler sent: by whom, for which slot, when, and whether it was granted.
#[derive(Clone, Debug)]
struct Asked {
    by: String,
    slot: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
    granted: bool,
}

/// The in-memory provider, noting every acquire.
#[derive(Clone, Default)]
struct Noting {
    inner: Arc<InMemoryLockProvider>,
    asked: Arc<Mutex<Vec<Asked>>>,
}

impl Noting {
    fn asked(&self) -> Vec<Asked> {
        self.asked.lock().unwrap().clone()
    }
}

// No cluster tables: the scheduler runs without them.
impl lock_cluster::ClusterProvider for Noting {}

#[async_trait]
impl LockProvider for Noting {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        let at = Utc::now();
        let outcome = self.inner.acquire(request).await?;
        self.asked.lock().unwrap().push(Asked {
            by: request.locked_by.to_string(),
            slot: request.slot.map(|s| s.instant()),
            at,
            granted: matches!(outcome, AcquireOutcome::Acquired(_)),
        });
        Ok(outcome)
    }
    async fn extend(&self, lease: &Lease, at_most: Duration) -> Result<bool, LockError> {
        self.inner.extend(lease, at_most).await
    }
    async fn release(&self, lease: &Lease, at_least: Duration) -> Result<bool, LockError> {
        self.inner.release(lease, at_least).await
    }
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.inner.list_locks().await
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.inner.force_unlock(name).await
    }
    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        self.inner.database_time().await
    }
    fn describe(&self) -> String {
        "in-memory, noting acquires".into()
    }
}

/// A body's run: its slot, when it started, and whether `cancelled()` had resolved then.
#[derive(Clone, Debug)]
struct Started {
    instance: String,
    slot: DateTime<Utc>,
    at: DateTime<Utc>,
    cancelled: bool,
}

fn every_second(name: &str, runs: &Arc<Mutex<Vec<Started>>>) -> Job {
    let runs = runs.clone();
    Job::new(name, Trigger::cron("* * * * * *").unwrap(), move || {
        let runs = runs.clone();
        async move {
            let at = Utc::now();
            let ctx = JobContext::current().expect("a scheduled body runs under its lock");
            runs.lock().unwrap().push(Started {
                instance: ctx.instance_id().to_owned(),
                slot: ctx.scheduled_at().expect("a cron fire has a slot"),
                at,
                cancelled: ctx.is_cancelled(),
            });
        }
    })
}

/// One scheduler with the job `tick` every second, asking `ahead`.
async fn one_instance(
    provider: &Noting,
    runs: &Arc<Mutex<Vec<Started>>>,
    ahead: Duration,
) -> Scheduler {
    Scheduler::builder()
        .lock_provider(provider.clone())
        .acquire_ahead(ahead)
        .jobs([every_second("tick", runs)])
        .start()
        .await
        .unwrap()
}

/// Another instance takes the lock of `tick` (no slot) for `how_long`.
async fn hold(provider: &Noting, how_long: Duration) {
    let held = provider
        .inner
        .acquire(&LockRequest {
            name: "tick".into(),
            locked_by: "another".into(),
            lock_at_most_for: how_long,
            slot: None,
            max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
            give_up_at: None,
        })
        .await
        .unwrap();
    assert!(matches!(held, AcquireOutcome::Acquired(_)));
}

/// The next whole second at least `margin` away.
fn next_second_after(margin: Duration) -> DateTime<Utc> {
    let earliest = Utc::now() + TimeDelta::from_std(margin).unwrap();
    let ms = earliest.timestamp_millis();
    DateTime::from_timestamp_millis((ms / 1000 + 1) * 1000).unwrap()
}

async fn sleep_until(at: DateTime<Utc>) {
    if let Ok(left) = (at - Utc::now()).to_std() {
        tokio::time::sleep(left).await;
    }
}

/// The slot of the first acquire, granted or refused as asked, seen 300 ms or more before its
/// slot (fires ask 490 ms ahead: the ahead is capped at half the period of an every-second
/// job).
async fn asked_ahead(provider: &Noting, granted: bool) -> DateTime<Utc> {
    let seen = async {
        loop {
            let now = Utc::now();
            let ahead = provider.asked().into_iter().rev().find_map(|a| {
                let slot = a.slot?;
                (a.granted == granted && slot - now >= TimeDelta::milliseconds(300)).then_some(slot)
            });
            if let Some(slot) = ahead {
                return slot;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), seen)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "no acquire (granted: {granted}) 300 ms before its slot in 10 s: {:?}",
                provider.asked()
            )
        })
}

/// The scheduler's clock estimate may err by half a round trip of the in-memory provider: far
/// under a millisecond.
const CLOCK_ERROR: TimeDelta = TimeDelta::milliseconds(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_decide_ahead_and_start_each_slot_once_at_the_slot() {
    let provider = Noting::default();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let mut schedulers = Vec::new();
    for i in 0..2 {
        schedulers.push(
            Scheduler::builder()
                .lock_provider(provider.clone())
                .instance_id(format!("instance-{i}"))
                .acquire_ahead(Duration::from_millis(200))
                .jobs([every_second("tick", &runs)])
                .start()
                .await
                .unwrap(),
        );
    }
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    for scheduler in &schedulers {
        scheduler.shutdown().await.unwrap();
    }
    let runs = runs.lock().unwrap().clone();
    let asked = provider.asked();
    assert!(runs.len() >= 3, "three slots in 3.5 s: {runs:?}");
    let mut slots: Vec<_> = runs.iter().map(|r| r.slot).collect();
    slots.sort();
    slots.dedup();
    assert_eq!(slots.len(), runs.len(), "a slot ran twice: {runs:?}");
    for run in &runs {
        // Never before the slot, whenever the lock was taken.
        assert!(run.at >= run.slot - CLOCK_ERROR, "started early: {run:?}");
        assert!(!run.cancelled, "{run:?}");
        let tries: Vec<_> = asked.iter().filter(|a| a.slot == Some(run.slot)).collect();
        let grants: Vec<_> = tries.iter().filter(|a| a.granted).collect();
        assert_eq!(grants.len(), 1, "grants for {}: {tries:?}", run.slot);
        assert_eq!(grants[0].by, run.instance);
        // One acquire per instance and slot: the loser's refusal shows the slot taken, so it
        // is final (it does not ask again at the slot).
        for instance in ["instance-0", "instance-1"] {
            let asked = tries.iter().filter(|a| a.by == instance).count();
            assert!(
                asked <= 1,
                "{instance} asked {asked} times for {}: {tries:?}",
                run.slot
            );
        }
    }
    // Taken ahead: the fires wake 200 ms before their slots (a loaded host may wake one late,
    // not every one by 150 ms).
    assert!(
        asked.iter().any(|a| a.granted
            && a.slot
                .is_some_and(|slot| slot - a.at >= TimeDelta::milliseconds(50))),
        "no grant came 50 ms or more before its slot: {asked:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_that_ends_before_the_slot_does_not_lose_it() {
    let provider = Noting::default();
    let runs = Arc::new(Mutex::new(Vec::new()));
    // Another holder's lease ends 20 ms before the slot, long after the fire asks (500 ms
    // ahead).
    let slot = next_second_after(Duration::from_millis(800));
    let lease_end = slot - TimeDelta::milliseconds(20);
    let held_for = (lease_end - Utc::now()).to_std().unwrap();
    hold(&provider, held_for).await;
    let scheduler = one_instance(&provider, &runs, Duration::from_millis(500)).await;
    sleep_until(slot + TimeDelta::milliseconds(500)).await;
    scheduler.shutdown().await.unwrap();
    let runs = runs.lock().unwrap().clone();
    let run = runs
        .iter()
        .find(|r| r.slot == slot)
        .unwrap_or_else(|| panic!("slot {slot} was lost: {runs:?}"));
    assert!(run.at >= slot - CLOCK_ERROR, "{run:?}");
    let tries: Vec<_> = provider
        .asked()
        .into_iter()
        .filter(|a| a.slot == Some(slot))
        .collect();
    match tries.as_slice() {
        // Refused ahead (held, the slot not run), granted when asked again at the slot.
        [refused, granted] => {
            assert!(!refused.granted && refused.at < lease_end, "{tries:?}");
            assert!(
                granted.granted && granted.at >= slot - CLOCK_ERROR,
                "{tries:?}"
            );
        }
        // A host so loaded that the fire woke 480 ms late asked once, after the lease ended.
        [granted] => assert!(granted.granted && granted.at >= lease_end, "{tries:?}"),
        _ => panic!("{tries:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_after_an_early_grant_runs_the_slot_cancelled() {
    let provider = Noting::default();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let scheduler = one_instance(&provider, &runs, Duration::from_millis(490)).await;
    // A grant of a slot still 300 ms or more away, then shutdown.
    let slot = asked_ahead(&provider, true).await;
    scheduler.shutdown().await.unwrap();
    let returned = Utc::now();
    let runs = runs.lock().unwrap().clone();
    let run = runs
        .iter()
        .find(|r| r.slot == slot)
        .unwrap_or_else(|| panic!("the granted slot {slot} did not run: {runs:?}"));
    assert!(run.at >= slot - CLOCK_ERROR, "{run:?}");
    // As any body running when shutdown began: its cancelled() already resolved.
    assert!(
        run.cancelled,
        "a granted slot runs with the shutdown's signal: {run:?}"
    );
    assert!(returned >= run.at, "shutdown waited for it");
    assert_eq!(
        scheduler.jobs()[0].last_outcome,
        Some(RunOutcome::Cancelled)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_refused_ahead_does_not_ask_again_after_shutdown() {
    let provider = Noting::default();
    let runs = Arc::new(Mutex::new(Vec::new()));
    // Held for a minute: every fire ahead is refused (held, the slot not run) and waits to ask
    // again at its slot.
    hold(&provider, Duration::from_secs(60)).await;
    let scheduler = one_instance(&provider, &runs, Duration::from_millis(490)).await;
    let slot = asked_ahead(&provider, false).await;
    scheduler.shutdown().await.unwrap();
    sleep_until(slot + TimeDelta::milliseconds(100)).await;
    let tries: Vec<_> = provider
        .asked()
        .into_iter()
        .filter(|a| a.slot == Some(slot))
        .collect();
    assert_eq!(tries.len(), 1, "asked again after shutdown: {tries:?}");
    assert!(runs.lock().unwrap().is_empty());
}
