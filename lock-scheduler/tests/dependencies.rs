//! Dependent jobs (`Trigger::after`) on the in-memory provider, several schedulers with their
//! own instance ids playing the instances of one cluster: a child runs once for each
//! successful run of its parents, with the parent's slot, whichever instance ran the parent;
//! not after a failed one (its history says why); a request whose writer died is fired by
//! another instance; and `start()` refuses what could never run, naming the jobs.
//!
//! Nothing here depends on the machine's speed: the parents run every 500 ms and the checks
//! wait for runs to appear (bounded by `WAIT`), then compare slots, which are exact.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use lock_cluster::{ClusterProvider, RunState};
use lock_core::{FireKind, InMemoryLockProvider, JobContext};
use lock_scheduler::{Job, Overlap, Scheduler, Trigger};
use test_support::process::eventually;

const PERIOD: Duration = Duration::from_millis(500);
const WAIT: Duration = Duration::from_secs(20);

/// One run as its body saw it: job, instance, slot, kind.
#[derive(Clone, Debug, PartialEq)]
struct Run {
    job: String,
    instance: String,
    slot: Option<DateTime<Utc>>,
    kind: FireKind,
}

type Runs = Arc<Mutex<Vec<Run>>>;

/// A job that notes its runs in `runs` and succeeds, or fails when `fail`.
fn job(name: &str, trigger: Trigger, runs: &Runs, fail: bool) -> Job {
    let (runs, name) = (runs.clone(), name.to_owned());
    Job::new(name.clone(), trigger, move |ctx: JobContext| {
        let (runs, name) = (runs.clone(), name.clone());
        async move {
            runs.lock().unwrap().push(Run {
                job: name,
                instance: ctx.instance_id().to_owned(),
                slot: ctx.scheduled_at(),
                kind: ctx.fire_kind(),
            });
            if fail {
                Err("the parent failed")
            } else {
                Ok(())
            }
        }
    })
}

fn every() -> Trigger {
    Trigger::fixed_rate(PERIOD).unwrap()
}

/// `instances` schedulers on `provider`, each with the jobs `jobs()` makes.
async fn cluster(
    provider: &Arc<InMemoryLockProvider>,
    instances: &[&str],
    jobs: impl Fn() -> Vec<Job>,
) -> Vec<Scheduler> {
    let mut schedulers = Vec::new();
    for instance in instances {
        schedulers.push(
            Scheduler::builder()
                .lock_provider(provider.clone())
                .instance_id(*instance)
                .heartbeat_interval(Duration::from_millis(200))
                .jobs(jobs())
                .start()
                .await
                .unwrap(),
        );
    }
    schedulers
}

async fn stop(schedulers: Vec<Scheduler>) {
    for scheduler in schedulers {
        scheduler.shutdown().await.unwrap();
    }
}

fn of<'a>(runs: &'a [Run], job: &str) -> Vec<&'a Run> {
    runs.iter().filter(|r| r.job == job).collect()
}

/// Waits until `job` has run `n` times; every run so far.
async fn until_runs(runs: &Runs, job: &str, n: usize) -> Vec<Run> {
    eventually(WAIT, "enough runs", || async {
        let all = runs.lock().unwrap().clone();
        (of(&all, job).len() >= n).then_some(all)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_runs_once_per_parent_run_with_its_slot_on_any_instance() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
    let jobs = || {
        vec![
            job("import", every(), &runs, false),
            job("bill", Trigger::after("import").unwrap(), &runs, false),
        ]
    };
    let schedulers = cluster(&provider, &["a", "b", "c"], jobs).await;
    until_runs(&runs, "bill", 6).await;
    stop(schedulers).await;
    let all = runs.lock().unwrap().clone();
    let parents = of(&all, "import");
    let children = of(&all, "bill");
    let mut child_slots: Vec<_> = children.iter().map(|r| r.slot).collect();
    child_slots.sort();
    let before = child_slots.len();
    child_slots.dedup();
    assert_eq!(
        child_slots.len(),
        before,
        "a slot's child ran twice: {all:?}"
    );
    for child in &children {
        assert_eq!(child.kind, FireKind::Dependency, "{child:?}");
        assert!(
            parents.iter().any(|p| p.slot == child.slot),
            "every child run has a parent run's slot: {child:?} in {all:?}"
        );
    }
    // Every parent run but the ones whose child was still to come at the stop has its child.
    let last_child = child_slots.last().copied().flatten().unwrap();
    for parent in parents.iter().filter(|p| p.slot.unwrap() <= last_child) {
        assert!(
            children.iter().any(|c| c.slot == parent.slot),
            "the parent's run at {:?} has no child run: {all:?}",
            parent.slot
        );
    }
    let history = provider
        .cluster()
        .unwrap()
        .history("bill", 50)
        .await
        .unwrap();
    assert!(
        history
            .iter()
            .filter(|r| r.outcome == RunState::Succeeded)
            .all(|r| r.fire_kind == FireKind::Dependency && r.slot.is_some()),
        "{history:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_parent_leaves_its_child_not_run_and_the_history_says_why() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
    let jobs = || {
        vec![
            job("import", every(), &runs, true),
            job("bill", Trigger::after("import").unwrap(), &runs, false),
        ]
    };
    let schedulers = cluster(&provider, &["a", "b"], jobs).await;
    until_runs(&runs, "import", 3).await;
    let store = provider.cluster().unwrap();
    let skipped = eventually(WAIT, "the child's skipped runs", || async {
        let history = store.history("bill", 50).await.unwrap();
        (history.len() >= 2).then_some(history)
    })
    .await;
    stop(schedulers).await;
    assert!(
        of(&runs.lock().unwrap(), "bill").is_empty(),
        "the child never ran"
    );
    for row in &skipped {
        assert_eq!(row.outcome, RunState::Skipped, "{row:?}");
        assert_eq!(row.fire_kind, FireKind::Dependency);
        assert_eq!(
            row.error.as_deref(),
            Some("parent `import` failed"),
            "{row:?}"
        );
        assert!(row.slot.is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_of_two_parents_runs_once_both_succeeded_for_the_slot() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
    let jobs = || {
        vec![
            job("orders", every(), &runs, false),
            job("refunds", every(), &runs, false),
            job(
                "ledger",
                Trigger::after_all(["orders", "refunds"]).unwrap(),
                &runs,
                false,
            ),
        ]
    };
    let schedulers = cluster(&provider, &["a", "b"], jobs).await;
    until_runs(&runs, "ledger", 3).await;
    stop(schedulers).await;
    let all = runs.lock().unwrap().clone();
    let ledger = of(&all, "ledger");
    let mut slots: Vec<_> = ledger.iter().map(|r| r.slot).collect();
    slots.dedup();
    assert_eq!(slots.len(), ledger.len(), "once per slot: {all:?}");
    for run in ledger {
        for parent in ["orders", "refunds"] {
            assert!(
                of(&all, parent).iter().any(|p| p.slot == run.slot),
                "`{parent}` ran the slot of {run:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_of_a_sharded_parent_runs_after_every_shard() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
    let jobs = || {
        vec![
            job("crawl", every(), &runs, false).with_shards(3),
            job("index", Trigger::after("crawl").unwrap(), &runs, false),
        ]
    };
    let schedulers = cluster(&provider, &["a", "b"], jobs).await;
    until_runs(&runs, "index", 2).await;
    stop(schedulers).await;
    let all = runs.lock().unwrap().clone();
    for run in of(&all, "index") {
        let shards = of(&all, "crawl")
            .into_iter()
            .filter(|p| p.slot == run.slot)
            .count();
        assert_eq!(shards, 3, "every shard ran the slot of {run:?}: {all:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_its_writer_did_not_fire_is_fired_by_another_instance() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
    // The parent never fires by itself here: the request is written as a parent's instance
    // that died right after writing it would leave it.
    let jobs = || {
        vec![
            job(
                "import",
                Trigger::cron("0 0 0 1 1 *").unwrap(),
                &runs,
                false,
            ),
            job("bill", Trigger::after("import").unwrap(), &runs, false),
        ]
    };
    let store = provider.cluster().unwrap();
    let slot = lock_core::FireSlot::new(Utc::now() - chrono::TimeDelta::seconds(30)).instant();
    store.request_after("bill", slot, "import").await.unwrap();
    let schedulers = cluster(&provider, &["b"], jobs).await;
    let all = until_runs(&runs, "bill", 1).await;
    // Deleted once run: no second run at the next heartbeats.
    eventually(WAIT, "the request deleted", || async {
        store
            .after_requests("bill", slot)
            .await
            .unwrap()
            .is_empty()
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    stop(schedulers).await;
    let bill = of(&all, "bill");
    assert_eq!(bill[0].slot, Some(slot));
    assert_eq!(bill[0].kind, FireKind::Dependency);
    assert_eq!(of(&runs.lock().unwrap(), "bill").len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_left_by_a_dead_writer_runs_before_the_next_parent_runs_child() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let runs = Runs::default();
    let jobs = || {
        vec![
            job("import", every(), &runs, false),
            job("bill", Trigger::after("import").unwrap(), &runs, false),
        ]
    };
    // An earlier slot's request, as an instance that died right after writing it leaves it;
    // no heartbeat comes within the test (a minute apart), so no hand-off fires it: the next
    // parent run's child must run it first, or its lock would refuse the older slot forever.
    let store = provider.cluster().unwrap();
    let left = lock_core::FireSlot::new(Utc::now() - chrono::TimeDelta::seconds(5)).instant();
    store.request_after("bill", left, "import").await.unwrap();
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id("b")
        .heartbeat_interval(Duration::from_secs(60))
        .jobs(jobs())
        .start()
        .await
        .unwrap();
    let all = until_runs(&runs, "bill", 2).await;
    scheduler.shutdown().await.unwrap();
    let bill = of(&all, "bill");
    assert_eq!(bill[0].slot, Some(left), "the left request first: {all:?}");
    let first_parent = of(&all, "import")[0].slot;
    assert_eq!(bill[1].slot, first_parent, "then the parent's own: {all:?}");
    assert!(store.after_requests("bill", left).await.unwrap().is_empty());
}

async fn start_error(jobs: Vec<Job>) -> String {
    match Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs(jobs)
        .start()
        .await
    {
        Ok(_) => panic!("start() refuses these jobs"),
        Err(error) => error.to_string(),
    }
}

fn noop(name: &str, trigger: Trigger) -> Job {
    Job::new(name, trigger, || async {})
}

#[tokio::test]
async fn start_refuses_an_unknown_parent_naming_both_jobs() {
    let message = start_error(vec![
        noop("import_orders", every()),
        noop("bill_orders", Trigger::after("import_order").unwrap()),
    ])
    .await;
    assert!(
        message.contains("`bill_orders`")
            && message.contains("`import_order`")
            && message.contains("import_orders"),
        "{message}"
    );
}

#[tokio::test]
async fn start_refuses_a_cycle_naming_its_jobs() {
    let message = start_error(vec![
        noop("a", Trigger::after("c").unwrap()),
        noop("b", Trigger::after("a").unwrap()),
        noop("c", Trigger::after("b").unwrap()),
    ])
    .await;
    assert!(message.contains("circle"), "{message}");
    for name in ["`a`", "`b`", "`c`"] {
        assert!(message.contains(name), "{message}");
    }
}

#[tokio::test]
async fn start_refuses_parents_of_different_kinds() {
    let message = start_error(vec![
        noop("orders", every()),
        noop("refunds", Trigger::fixed_delay(PERIOD).unwrap()),
        noop("ledger", Trigger::after_all(["orders", "refunds"]).unwrap()),
    ])
    .await;
    assert!(
        message.contains("`ledger`") && message.contains("`refunds` (no slots)"),
        "{message}"
    );
    let message = start_error(vec![
        noop("sync", every()),
        noop("census", every()).broadcast(),
        noop("report", Trigger::after("census").unwrap()),
    ])
    .await;
    assert!(
        message.contains("`report`") && message.contains("broadcast"),
        "{message}"
    );
    let message = start_error(vec![
        noop("sync", every()),
        noop("report", Trigger::after("sync").unwrap()).with_overlap(Overlap::Replace),
    ])
    .await;
    assert!(
        message.contains("`report`") && message.contains("replace"),
        "{message}"
    );
}
