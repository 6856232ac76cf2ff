//! Sharded and broadcast jobs across real service processes, on PostgreSQL and MariaDB (issue
//! 18). Every run of a shard writes a row to the runs table (`<lock name>/<total>` as its job,
//! the slot, the instance), so what ran is counted per (slot, shard) from the database, never
//! from timing.
//!
//! - `sharded_instance_killed`: three instances of an every-second job with `shards = 4`: every
//!   (slot, shard) runs exactly once and every instance runs shards; one instance is killed
//!   with `SIGKILL`: from the slot after its leases end, every (slot, shard) still runs exactly
//!   once, on the two survivors.
//! - `broadcast_instance_stopped`: three instances of an every-second `broadcast` job: each
//!   slot runs three times, ranks 0, 1, 2 of 3; one instance stops gracefully: each slot then
//!   runs twice, ranks 0, 1 of 2.
//!
//! `cargo test -p fault-tests --test shards_processes`

#[macro_use]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::{Fixture, Instance, Provider, duplicate_slots, seconds_between, sleep_until_db};
use fault_tests::Run;

const SECOND: Duration = Duration::from_secs(1);

scenario!(sharded_instance_killed: postgres => Postgres, mysql => MySql);
scenario!(broadcast_instance_stopped: postgres => Postgres, mysql => MySql);

/// Starts instances `letters` running the annotated job `job`; waits until each is ready.
async fn start(fx: &Fixture, letters: &[&str], job: &str) -> Vec<Instance> {
    let mut instances: Vec<Instance> = letters
        .iter()
        .map(|l| fx.service(l).jobs(job).spawn())
        .collect();
    for instance in &mut instances {
        instance.ready().await;
    }
    instances
}

/// What one slot ran: `(index, total, instance)` of each run, sorted.
type SlotRuns = Vec<(u32, u32, String)>;

/// The runs of `job`'s shards (job column `<job>#<index>/<total>`) by slot, for the slots in
/// `[from, to)`, every whole second of it present (an empty list for a slot nothing ran).
fn by_slot(runs: &[Run], job: &str, from: i64, to: i64) -> BTreeMap<i64, SlotRuns> {
    let mut slots: BTreeMap<i64, SlotRuns> =
        seconds_between(from, to).map(|s| (s, Vec::new())).collect();
    for run in runs {
        let Some(slot) = run.slot.filter(|s| slots.contains_key(s)) else {
            continue;
        };
        let shard = run
            .job
            .strip_prefix(job)
            .and_then(|rest| rest.strip_prefix('#'))
            .and_then(|rest| rest.split_once('/'))
            .and_then(|(index, total)| Some((index.parse().ok()?, total.parse().ok()?)));
        let Some((index, total)) = shard else {
            panic!("a run of another job or an unsharded run: {run:?}");
        };
        slots
            .get_mut(&slot)
            .expect("kept above")
            .push((index, total, run.instance.clone()));
    }
    for runs in slots.values_mut() {
        runs.sort();
    }
    slots
}

/// The slots whose shards are not exactly `expected` (index, total), once each.
fn wrong_slots(slots: &BTreeMap<i64, SlotRuns>, expected: &[(u32, u32)]) -> Vec<String> {
    slots
        .iter()
        .filter(|(_, runs)| {
            let shards: Vec<(u32, u32)> = runs.iter().map(|(i, t, _)| (*i, *t)).collect();
            shards != expected
        })
        .map(|(slot, runs)| format!("slot {slot}: {runs:?}"))
        .collect()
}

/// How many runs each instance made, for the log (`-- --nocapture`).
fn runs_per_instance(slots: &BTreeMap<i64, SlotRuns>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for (_, _, instance) in slots.values().flatten() {
        *counts.entry(instance.clone()).or_default() += 1;
    }
    counts
}

fn instances_in(slots: &BTreeMap<i64, SlotRuns>) -> BTreeSet<String> {
    slots
        .values()
        .flatten()
        .map(|(_, _, instance)| instance.clone())
        .collect()
}

async fn sharded_instance_killed(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "shard").await else {
        return;
    };
    // `sharded`: every second, 4 shards, each on a 3 s lease.
    let mut instances = start(&fx, &["A", "B", "C"], "sharded").await;
    let names: BTreeSet<String> = instances.iter().map(|i| i.name.clone()).collect();
    // From three heartbeats (1 s each) after the last start, every instance sees the three.
    let from = fx.now().await + 3000;
    sleep_until_db(&fx, from + 6000).await;

    let mut victim = instances.remove(1);
    // A shard it was running keeps its lease until lock_at_most_for: its leases end at the
    // latest of those (or at the kill, if it held none).
    let shards = (0..4).map(|index| format!("sharded#{index}"));
    let (killed_at, leases_end) = fx.kill(&mut victim, shards).await;
    // The slot after its leases end; then 8 s: the registry counts it gone after 5 s, so the
    // survivors run its shards first by takeover, then by their new ranks.
    let after = leases_end.div_euclid(1000) * 1000 + 1000;
    sleep_until_db(&fx, after + 8000).await;
    // The last slot taken is 1.5 s old: its takeovers (250 ms after the slot) are in.
    let end = fx.now().await - 1500;
    let runs = fx.all_runs().await;
    for survivor in &mut instances {
        survivor.assert_no_panic();
    }

    assert_eq!(duplicate_slots(&runs), Vec::<String>::new());
    let all_four = [(0, 4), (1, 4), (2, 4), (3, 4)];
    // Before the kill (the slot under way at the kill left out).
    let before = by_slot(&runs, "sharded", from, killed_at - 1000);
    assert!(before.len() >= 5, "{before:?}");
    assert_eq!(wrong_slots(&before, &all_four), Vec::<String>::new());
    assert_eq!(instances_in(&before), names, "every instance runs shards");

    let later = by_slot(&runs, "sharded", after, end);
    println!(
        "{provider:?}: shard runs per instance: before the kill {:?} over {} slots, after {:?} \
         over {} slots",
        runs_per_instance(&before),
        before.len(),
        runs_per_instance(&later),
        later.len()
    );
    assert!(later.len() >= 6, "{later:?}");
    assert_eq!(wrong_slots(&later, &all_four), Vec::<String>::new());
    let survivors: BTreeSet<String> = instances.iter().map(|i| i.name.clone()).collect();
    assert_eq!(
        instances_in(&later),
        survivors,
        "the survivors run every shard"
    );
    fx.cleanup().await;
}

async fn broadcast_instance_stopped(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "bcast").await else {
        return;
    };
    // `everywhere`: every second, broadcast. The ranks follow the sorted instance names.
    let mut instances = start(&fx, &["A", "B", "C"], "everywhere").await;
    let [a, b, c] = [0, 1, 2].map(|i| instances[i].name.clone());
    let from = fx.now().await + 3000;
    sleep_until_db(&fx, from + 5000).await;

    let mut stopped = instances.remove(1);
    let (errors, _) = stopped.stop(10 * SECOND).await;
    assert_eq!(errors, 0, "{}", stopped.stderr.text());
    let stopped_at = fx.now().await;
    // It left the registry as it stopped; the others re-rank at their next heartbeat (1 s).
    let after = stopped_at + 2000;
    sleep_until_db(&fx, after + 5000).await;
    let end = fx.now().await - 1000;
    let runs = fx.all_runs().await;
    for instance in &mut instances {
        instance.assert_no_panic();
    }

    assert_eq!(duplicate_slots(&runs), Vec::<String>::new());
    let three = by_slot(&runs, "everywhere", from, stopped_at - 1000);
    assert!(three.len() >= 4, "{three:?}");
    let expected: SlotRuns = vec![(0, 3, a.clone()), (1, 3, b), (2, 3, c.clone())];
    let wrong: Vec<_> = three.iter().filter(|(_, r)| **r != expected).collect();
    assert!(
        wrong.is_empty(),
        "each slot runs ranks 0, 1, 2 of 3: {wrong:?}"
    );

    let two = by_slot(&runs, "everywhere", after, end);
    assert!(two.len() >= 4, "{two:?}");
    let expected: SlotRuns = vec![(0, 2, a), (1, 2, c)];
    let wrong: Vec<_> = two.iter().filter(|(_, r)| **r != expected).collect();
    assert!(
        wrong.is_empty(),
        "each slot runs ranks 0, 1 of 2: {wrong:?}"
    );
    fx.cleanup().await;
}
