//! Shared-out jobs (`SchedulerBuilder::share_jobs`) on three schedulers of one process sharing
//! an in-memory provider: each slot asked for by about one instance instead of three, no slot
//! run twice, and no slot lost when an instance stops gracefully and its jobs move. The
//! multi-process test with a killed instance is `fault-tests/tests/sharing_processes.rs`; that
//! sharing needs the registry, `operations.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use lock_cluster::testkit::CountingProvider;
use lock_core::{InMemoryLockProvider, JobContext};
use lock_scheduler::{Job, MisfirePolicy, Scheduler, Trigger};

const JOBS: usize = 24;
const PERIOD: Duration = Duration::from_millis(200);
// Gone after 5 missed beats: 1.25 s, far above a loaded machine's stalls.
const BEAT: Duration = Duration::from_millis(250);

/// The in-memory provider, counting the lock rows it is asked to decide.
type Counting = CountingProvider<Arc<InMemoryLockProvider>>;

/// Each run: (job, slot, instance).
type Runs = Arc<Mutex<Vec<(String, DateTime<Utc>, String)>>>;

fn jobs(runs: &Runs) -> Vec<Job> {
    (0..JOBS)
        .map(|n| {
            let runs = runs.clone();
            // `catch_up` with a long grace: a hand-over that takes longer than a period on a
            // loaded machine still loses no slot, so the test checks the hand-over, not the
            // machine's speed.
            let trigger = Trigger::fixed_rate(PERIOD)
                .unwrap()
                .with_misfire(MisfirePolicy::CatchUp)
                .unwrap()
                .with_misfire_grace(Duration::from_secs(30));
            Job::new(format!("job-{n}"), trigger, move |ctx: JobContext| {
                let runs = runs.clone();
                async move {
                    let slot = ctx.scheduled_at().expect("a scheduled fire has its slot");
                    let job = ctx.lock_name().to_owned();
                    let instance = ctx.instance_id().to_owned();
                    runs.lock().unwrap().push((job, slot, instance));
                }
            })
        })
        .collect()
}

async fn start(provider: &Arc<Counting>, id: &str, runs: &Runs, share: bool) -> Scheduler {
    Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id(id)
        .heartbeat_interval(BEAT)
        .no_history()
        .share_jobs(share)
        .jobs(jobs(runs))
        .start()
        .await
        .unwrap()
}

/// The acquire requests sent and the runs made over `window`.
async fn measure(provider: &Counting, runs: &Runs, window: Duration) -> (usize, usize) {
    let (asked, ran) = (provider.asked(), runs.lock().unwrap().len());
    tokio::time::sleep(window).await;
    (provider.asked() - asked, runs.lock().unwrap().len() - ran)
}

/// Slots run more than once, per job.
fn duplicates(runs: &Runs) -> Vec<(String, DateTime<Utc>)> {
    let mut seen = BTreeSet::new();
    runs.lock()
        .unwrap()
        .iter()
        .filter(|(job, slot, _)| !seen.insert((job.clone(), *slot)))
        .map(|(job, slot, _)| (job.clone(), *slot))
        .collect()
}

fn provider() -> Arc<Counting> {
    Arc::new(CountingProvider::new(Arc::new(InMemoryLockProvider::new())))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_slot_is_asked_for_by_one_instance_and_none_is_lost_when_one_stops() {
    let provider = provider();
    let runs: Runs = Default::default();
    let a = start(&provider, "a", &runs, true).await;
    let b = start(&provider, "b", &runs, true).await;
    let c = start(&provider, "c", &runs, true).await;
    // A few beats: every instance sees the three.
    tokio::time::sleep(BEAT * 6).await;

    let (asked, ran) = measure(&provider, &runs, PERIOD * 10).await;
    let per_run = asked as f64 / ran as f64;
    // Without sharing, each of the three asks for every slot (3.0, the test below); with it,
    // the owner alone (1.0). Nobody joins or leaves in the window.
    assert!(ran >= JOBS * 5, "the jobs ran: {ran}");
    assert!(
        per_run < 1.5,
        "{asked} acquires for {ran} runs: {per_run:.2}"
    );
    let by_instance: BTreeMap<String, usize> =
        runs.lock()
            .unwrap()
            .iter()
            .fold(BTreeMap::new(), |mut counts, (_, _, instance)| {
                *counts.entry(instance.clone()).or_default() += 1;
                counts
            });
    assert_eq!(
        by_instance.len(),
        3,
        "every instance owns some jobs: {by_instance:?}"
    );
    // A job's loop plans its next fire on its owner alone: on the others it waits for the
    // view to change, with no next fire (and no timer).
    let planned: Vec<BTreeSet<String>> = [&a, &b, &c]
        .iter()
        .map(|scheduler| {
            scheduler
                .jobs()
                .into_iter()
                // (A running fire has no next fire either.)
                .filter(|job| {
                    job.name.starts_with("job-") && (job.next_fire.is_some() || job.running)
                })
                .map(|job| job.name)
                .collect()
        })
        .collect();
    for n in 0..JOBS {
        let job = format!("job-{n}");
        let planners = planned.iter().filter(|jobs| jobs.contains(&job)).count();
        assert_eq!(
            planners, 1,
            "{job} planned on {planners} instances: {planned:?}"
        );
    }

    // c stops gracefully: its jobs move to a and b, and no slot is lost meanwhile.
    let stopped_at = Utc::now();
    c.shutdown().await.unwrap();
    tokio::time::sleep(PERIOD * 10).await;
    let ended_at = Utc::now();
    a.shutdown().await.unwrap();
    b.shutdown().await.unwrap();

    assert_eq!(duplicates(&runs), [], "slots run twice");
    let runs = runs.lock().unwrap();
    let after_c: Vec<_> = runs
        .iter()
        .filter(|(_, slot, _)| *slot > stopped_at + chrono::TimeDelta::seconds(1))
        .collect();
    assert!(
        after_c.iter().all(|(_, _, instance)| instance != "c"),
        "c ran after its stop"
    );
    // Every job's slots from before the stop to the end, each period: none missing.
    for n in 0..JOBS {
        let job = format!("job-{n}");
        let slots: Vec<DateTime<Utc>> = runs
            .iter()
            .filter(|(name, slot, _)| {
                *name == job
                    && *slot >= stopped_at - chrono::TimeDelta::milliseconds(600)
                    && *slot <= ended_at - chrono::TimeDelta::milliseconds(600)
            })
            .map(|(_, slot, _)| *slot)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let gaps: Vec<_> = slots
            .windows(2)
            .filter(|w| w[1] - w[0] != chrono::TimeDelta::from_std(PERIOD).unwrap())
            .collect();
        assert!(gaps.is_empty(), "{job}: slots missing between {gaps:?}");
        assert!(slots.len() >= 8, "{job}: {slots:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_sharing_every_instance_asks_for_every_slot() {
    let provider = provider();
    let runs: Runs = Default::default();
    let all = [
        start(&provider, "a", &runs, false).await,
        start(&provider, "b", &runs, false).await,
        start(&provider, "c", &runs, false).await,
    ];
    tokio::time::sleep(BEAT * 6).await;
    let (asked, ran) = measure(&provider, &runs, PERIOD * 10).await;
    for scheduler in &all {
        scheduler.shutdown().await.unwrap();
    }
    let per_run = asked as f64 / ran as f64;
    assert!(
        per_run > 2.5,
        "{asked} acquires for {ran} runs: {per_run:.2}"
    );
    assert_eq!(duplicates(&runs), [], "slots run twice");
}
