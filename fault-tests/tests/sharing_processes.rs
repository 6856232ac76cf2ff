//! Shared-out jobs (`SchedulerBuilder::share_jobs`) across real service processes, on
//! PostgreSQL and MariaDB (issue 37): three instances of 30 every-second jobs, each slot asked
//! for by its owner alone; one instance killed with `SIGKILL`: its jobs are handed on within
//! the stated bound (the registry counts it gone after 5 heartbeats, 2.5 s here, and the
//! others take its jobs at their next beat), no slot runs twice, and from then on every slot
//! runs again. What ran is counted from the runs table, per (job, slot), never from timing;
//! what was asked, from each survivor's `scheduled_lock_attempts_total` at its graceful stop.
//!
//! `cargo test -p fault-tests --test sharing_processes`

#[macro_use]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{Fixture, Instance, Provider, duplicate_slots, seconds_between, sleep_until_db};
use fault_tests::Run;

const SECOND: Duration = Duration::from_secs(1);
const JOBS: usize = 30;
const HEARTBEAT_MS: i64 = 500;
/// When a killed owner's jobs are asked for again at the latest: gone after 5 missed beats
/// (`GONE_AFTER_HEARTBEATS`), seen at the survivors' next beat, plus the statement's time.
const HAND_ON_MS: i64 = 6 * HEARTBEAT_MS + 500;

scenario!(owner_killed: postgres => Postgres, mysql => MySql);

fn job(n: usize) -> String {
    format!("load_{n:03}")
}

/// The `(job, slot)`s of `[from, to)` that did not run exactly once, each with its count.
fn not_once(runs: &[Run], from: i64, to: i64) -> Vec<(String, i64, usize)> {
    let mut counts: BTreeMap<(String, i64), usize> = BTreeMap::new();
    for n in 0..JOBS {
        for slot in seconds_between(from, to) {
            counts.insert((job(n), slot), 0);
        }
    }
    for run in runs {
        if let Some(slot) = run.slot
            && let Some(count) = counts.get_mut(&(run.job.clone(), slot))
        {
            *count += 1;
        }
    }
    counts
        .into_iter()
        .filter(|(_, count)| *count != 1)
        .map(|((job, slot), count)| (job, slot, count))
        .collect()
}

/// The `attempts=` of an instance's `EXIT` line.
fn attempts(instance: &Instance) -> u64 {
    let line = instance
        .stdout
        .find(|l| l.starts_with("EXIT "))
        .unwrap_or_else(|| panic!("{}: no EXIT line", instance.name));
    line.split(' ')
        .find_map(|part| part.strip_prefix("attempts="))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}: no attempts in {line:?}", instance.name))
}

async fn owner_killed(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "share").await else {
        return;
    };
    let mut instances: Vec<Instance> = ["A", "B", "C"]
        .iter()
        .map(|letter| {
            fx.service(letter)
                .arg("--load-jobs")
                .arg(&JOBS.to_string())
                .arg("--share-jobs")
                .arg("--heartbeat-ms")
                .arg(&HEARTBEAT_MS.to_string())
                .spawn()
        })
        .collect();
    for instance in &mut instances {
        instance.ready().await;
    }
    // A few beats after the last start, every instance sees the three.
    let from = fx.now().await + 4 * HEARTBEAT_MS;
    sleep_until_db(&fx, from + 6000).await;

    let mut victim = instances.remove(1);
    // A body it was running at the kill keeps its lease (10 s): that job waits for it, with or
    // without sharing. The hand-over is measured from the later of the two.
    let (killed_at, leases_end) = fx.kill(&mut victim, (0..JOBS).map(job)).await;
    let after = (killed_at + HAND_ON_MS).max(leases_end);
    sleep_until_db(&fx, after + 6000).await;
    // The last slot counted is 1.5 s old: its runs are in.
    let end = fx.now().await - 1500;
    for survivor in &mut instances {
        let (errors, _) = survivor.stop(30 * SECOND).await;
        assert_eq!(errors, 0, "{}", survivor.stderr.text());
    }
    let runs = fx.all_runs().await;

    assert_eq!(duplicate_slots(&runs), Vec::<String>::new());
    let before = not_once(&runs, from, killed_at - 1000);
    assert_eq!(before, [], "before the kill, every slot runs once");
    let later = not_once(&runs, after, end);
    assert_eq!(
        later,
        [],
        "once its jobs are handed on, every slot runs once"
    );
    let lost = not_once(&runs, killed_at - 1000, after);
    println!(
        "{provider:?}: killed at {killed_at}, handed on by {after} ({} ms); slots lost in \
         between: {}",
        after - killed_at,
        lost.len()
    );

    // Every instance owned jobs; the survivors asked for about one lock per run they made.
    let names: BTreeSet<&str> = runs
        .iter()
        .filter(|r| r.slot.is_some_and(|s| s < killed_at - 1000))
        .map(|r| r.instance.as_str())
        .collect();
    assert_eq!(names.len(), 3, "every instance ran jobs: {names:?}");
    let asked: u64 = instances.iter().map(attempts).sum();
    let ran = runs
        .iter()
        .filter(|r| instances.iter().any(|i| i.name == r.instance))
        .count() as f64;
    let per_run = asked as f64 / ran;
    println!("{provider:?}: the survivors asked {asked} times for {ran} runs: {per_run:.2}");
    // Without sharing each survivor asks for every slot of every job: 2 to 3 per run here.
    assert!(per_run < 1.5, "{asked} acquires for {ran} runs");
    fx.cleanup().await;
}
