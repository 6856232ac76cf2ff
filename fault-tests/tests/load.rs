//! Scenario 8: 3 instances x 200 jobs firing every second for 30 s on PostgreSQL: zero
//! duplicates, zero missed slots, no errors. Alone in its own test binary, so that the other
//! scenarios' processes do not share the machine with it.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use common::{Fixture, Instance, Provider, duplicate_slots, seconds_between, sleep_until_db};

const JOBS: usize = 200;
const INSTANCES: [&str; 3] = ["A", "B", "C"];
const WINDOW_MS: i64 = 30_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_postgres() {
    let Some(fx) = Fixture::new(Provider::Postgres, "load").await else {
        return;
    };
    let mut instances: Vec<Instance> = INSTANCES
        .iter()
        .map(|letter| {
            fx.service(letter)
                .arg("--load-jobs")
                .arg(&JOBS.to_string())
                // 600 fires a second: log warnings and errors only (they are counted anyway).
                .env("RUST_LOG", "warn")
                .spawn()
        })
        .collect();
    for instance in &mut instances {
        instance.ready().await;
    }
    // The window starts at the second whole second after every instance is up.
    let up = fx.now().await;
    let from = (up.div_euclid(1000) + 2) * 1000;
    let to = from + WINDOW_MS;
    sleep_until_db(&fx, to + 1_500).await;
    for instance in &mut instances {
        let (errors, warnings) = instance.stop(Duration::from_secs(15)).await;
        assert_eq!(
            (errors, warnings),
            (0, 0),
            "{}: errors or warnings logged:\n{}",
            instance.name,
            instance.stderr.text()
        );
    }

    let runs = fx.all_runs().await;
    let duplicates = duplicate_slots(&runs);
    assert!(
        duplicates.is_empty(),
        "{} slots ran twice, e.g. {:?}",
        duplicates.len(),
        &duplicates[..duplicates.len().min(5)]
    );
    let ran: HashMap<(&str, i64), &str> = runs
        .iter()
        .map(|r| ((r.job.as_str(), r.slot.unwrap()), r.instance.as_str()))
        .collect();
    let mut missed = Vec::new();
    let mut per_instance: BTreeMap<&str, usize> = BTreeMap::new();
    let mut lags = Vec::new();
    for job in (0..JOBS).map(|i| format!("load_{i:03}")) {
        for slot in seconds_between(from, to) {
            match ran.get(&(job.as_str(), slot)) {
                Some(instance) => *per_instance.entry(instance).or_default() += 1,
                None => missed.push(format!("{job}@{slot}")),
            }
        }
    }
    for run in runs
        .iter()
        .filter(|r| (from..to).contains(&r.slot.unwrap()))
    {
        lags.push(run.started - run.slot.unwrap());
    }
    lags.sort_unstable();
    let pct = |p: usize| lags[(lags.len() - 1) * p / 100];
    eprintln!(
        "load: {} jobs x {} slots = {} runs in the window, by instance {per_instance:?}; \
         start lag after the slot (database clock) p50 {} ms, p99 {} ms, max {} ms",
        JOBS,
        WINDOW_MS / 1000,
        lags.len(),
        pct(50),
        pct(99),
        pct(100)
    );
    assert!(
        missed.is_empty(),
        "{} slots missed, e.g. {:?}",
        missed.len(),
        &missed[..missed.len().min(10)]
    );
    assert_eq!(lags.len(), JOBS * (WINDOW_MS / 1000) as usize);
    fx.cleanup().await;
}
