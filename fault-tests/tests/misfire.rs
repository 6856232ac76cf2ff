//! Missed, failed and runaway runs across real service processes (issue 17): the misfire
//! policies after every instance was down and after a database outage, retries under one
//! lease, and the run timeout. Every time compared is the database's clock.
//!
//! Tests are named `<scenario>::<provider>`; `cargo test -p fault-tests --test misfire
//! catch_up` runs one scenario for every provider.

#[macro_use]
mod common;

use std::time::Duration;

use common::proxy::{Proxy, proxied, upstream_of};
use common::{Fixture, Instance, Provider, duplicate_slots, sleep_until_db};
use fault_tests::Run;

const SECOND: Duration = Duration::from_secs(1);
/// The period of the misfire jobs (`fixed_rate = "2s"`).
const PERIOD_MS: i64 = 2_000;

scenario!(fire_once: postgres => Postgres, sqlite => Sqlite);
scenario!(catch_up: postgres => Postgres, sqlite => Sqlite);
scenario!(skip: postgres => Postgres, sqlite => Sqlite);
scenario!(outage_fire_once: postgres => Postgres);
scenario!(retries: postgres => Postgres, sqlite => Sqlite);
scenario!(retry_after_panic: postgres => Postgres, sqlite => Sqlite);
scenario!(timeout: postgres => Postgres, sqlite => Sqlite);

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

fn runs_of<'a>(runs: &'a [Run], job: &str) -> Vec<&'a Run> {
    runs.iter().filter(|r| r.job == job).collect()
}

fn kind(run: &Run) -> &str {
    run.kind.as_deref().unwrap_or("")
}

/// What the scenario after the restart found: the lock's last slot before the stop, the
/// first regular slot after the restart, and the runs of slots in between.
struct Restarted {
    last_before: i64,
    first_after: i64,
    /// When the first restarted instance was ready (database clock).
    ready_at: i64,
    between: Vec<Run>,
    all: Vec<Run>,
}

/// Two instances run `job` (every 2 s) until it has run; both stop; the test waits until
/// three slots have passed with no instance up; two instances start again; the test waits
/// for two regular fires after the restart.
async fn down_across_three_fires(fx: &Fixture, job: &'static str) -> Restarted {
    let mut instances = start(fx, &["A", "B"], job).await;
    fx.wait_for_run(5 * SECOND, "a first regular run", |runs| {
        runs.iter()
            .find(|r| r.job == job && kind(r) == "Scheduled")
            .cloned()
    })
    .await;
    for instance in &mut instances {
        instance.stop(10 * SECOND).await;
    }
    let last_before = fx
        .lock_row(job)
        .await
        .and_then(|row| row.last_fire)
        .expect("the job ran: its lock row has a last fire")
        .timestamp_millis();
    // Three slots pass with every instance down (plus half a period, so the third is well
    // behind the database's now when the instances come back).
    sleep_until_db(fx, last_before + 3 * PERIOD_MS + PERIOD_MS / 2).await;
    let mut again: Vec<Instance> = ["C", "D"]
        .iter()
        .map(|l| fx.service(l).jobs(job).spawn())
        .collect();
    again[0].ready().await;
    let ready_at = fx.now().await;
    again[1].ready().await;
    let regular_after = |runs: &[Run]| -> Vec<Run> {
        runs.iter()
            .filter(|r| {
                r.job == job && kind(r) == "Scheduled" && r.slot.is_some_and(|s| s > last_before)
            })
            .cloned()
            .collect()
    };
    let second = fx
        .wait_for_run(10 * SECOND, "two regular runs after the restart", |runs| {
            regular_after(runs).get(1).cloned()
        })
        .await;
    for instance in &mut again {
        instance.stop(10 * SECOND).await;
    }
    let all = fx.all_runs().await;
    let first_after = regular_after(&all)
        .iter()
        .filter_map(|r| r.slot)
        .min()
        .expect("a regular run after the restart");
    assert!(second.slot.unwrap() > first_after);
    let between = all
        .iter()
        .filter(|r| r.job == job && r.slot.is_some_and(|s| s > last_before && s < first_after))
        .cloned()
        .collect();
    assert!(
        duplicate_slots(&all).is_empty(),
        "{:?}",
        duplicate_slots(&all)
    );
    // The scenario held: at least three slots had no instance.
    assert!(
        first_after - last_before >= 4 * PERIOD_MS,
        "last slot before the stop {last_before}, first after the restart {first_after}"
    );
    Restarted {
        last_before,
        first_after,
        ready_at,
        between,
        all,
    }
}

/// `fire_once`: exactly one catch-up run, for the latest slot missed while every instance was
/// down, within 2 s of the restart; then regular fires.
async fn fire_once(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "mfonce").await else {
        return;
    };
    let r = down_across_three_fires(&fx, "misfire_once").await;
    let catch_ups: Vec<&Run> = r.between.iter().filter(|r| kind(r) == "CatchUp").collect();
    assert_eq!(
        catch_ups.len(),
        1,
        "one catch-up run between {} and {}: {:?}",
        r.last_before,
        r.first_after,
        r.between
    );
    assert_eq!(r.between.len(), 1, "nothing else ran the missed slots");
    let run = catch_ups[0];
    // The latest missed slot: the regular fires go on from the one after it.
    assert_eq!(run.slot, Some(r.first_after - PERIOD_MS));
    // The catch-up starts as the scheduler starts, which is before READY is printed: 2 s
    // after the first instance's READY (read on the database's clock) is the bound,
    // with the whole of it as margin for a loaded machine.
    assert!(
        run.started <= r.ready_at + 2_000,
        "catch-up started at {}, first instance ready at {}",
        run.started,
        r.ready_at
    );
    assert_eq!(
        runs_of(&r.all, "misfire_once")
            .iter()
            .filter(|r| kind(r) == "CatchUp")
            .count(),
        1
    );
    fx.cleanup().await;
}

/// `catch_up`: each missed slot exactly once, oldest first, as catch-up runs.
async fn catch_up(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "mfcatch").await else {
        return;
    };
    let r = down_across_three_fires(&fx, "misfire_catch_up").await;
    let expected: Vec<i64> = ((r.last_before + PERIOD_MS)..r.first_after)
        .step_by(PERIOD_MS as usize)
        .collect();
    // In insertion order: the order they ran in.
    let ran: Vec<i64> = r.between.iter().filter_map(|r| r.slot).collect();
    assert_eq!(ran, expected, "every missed slot once, oldest first");
    assert!(
        r.between.iter().all(|r| kind(r) == "CatchUp"),
        "{:?}",
        r.between
    );
    assert!(expected.len() >= 3, "three fires were missed: {expected:?}");
    fx.cleanup().await;
}

/// `skip`: the missed slots do not run.
async fn skip(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "mfskip").await else {
        return;
    };
    let r = down_across_three_fires(&fx, "misfire_skip").await;
    assert!(r.between.is_empty(), "missed slots ran: {:?}", r.between);
    assert!(r.all.iter().all(|r| kind(r) != "CatchUp"));
    fx.cleanup().await;
}

/// A database outage (both instances' links cut) across fires of a `fire_once` job: one run
/// soon after the heal (the catch-up of the latest missed slot, or the first regular slot
/// after the heal, which supersedes it), and nothing during the outage.
async fn outage_fire_once(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "mfout").await else {
        return;
    };
    let job = "misfire_outage";
    let url = fx.backend.location();
    let upstream = upstream_of(&url, 5432).await;
    let proxies = [Proxy::start(upstream).await, Proxy::start(upstream).await];
    let mut instances = Vec::new();
    for (letter, proxy) in ["A", "B"].iter().zip(&proxies) {
        let mut instance = fx
            .service(letter)
            .jobs(job)
            .lock_url(&proxied(&url, proxy.port()))
            .spawn();
        instance.ready().await;
        instances.push(instance);
    }
    fx.wait_for_run(5 * SECOND, "a first regular run", |runs| {
        runs.iter().find(|r| r.job == job).cloned()
    })
    .await;
    for proxy in &proxies {
        proxy.cut();
    }
    let cut_at = fx.now().await;
    // At least two slots pass with the database out of reach.
    sleep_until_db(&fx, cut_at + 2 * PERIOD_MS + PERIOD_MS / 2).await;
    let heal_at = fx.now().await;
    for proxy in &proxies {
        proxy.heal();
    }
    // The first run after the heal: the catch-up of the latest missed slot, when a retry (500 ms
    // doubling to 5 s) reaches the database first, or the first regular slot after the heal,
    // which supersedes the missed ones (`fire_once` runs the latest; a retry's timer never holds
    // a regular slot back). Within a period of the heal either way, one more for reconnecting.
    let first = fx
        .wait_for_run(10 * SECOND, "a run after the heal", |runs| {
            runs.iter()
                .find(|r| r.job == job && r.slot.is_some_and(|s| s > cut_at))
                .cloned()
        })
        .await;
    let slot = first.slot.expect("a fire with a slot");
    assert!(
        slot <= heal_at + 2 * PERIOD_MS,
        "{} of slot {slot}: the outage was from {cut_at} to {heal_at}",
        kind(&first)
    );
    assert!(first.started >= heal_at, "ran after the heal");
    // Regular fires go on; at most one catch-up in all, and no slot twice.
    fx.wait_for_run(6 * SECOND, "a regular run after the first", |runs| {
        runs.iter()
            .find(|r| r.job == job && kind(r) == "Scheduled" && r.slot > Some(slot))
            .cloned()
    })
    .await;
    for instance in &mut instances {
        instance.stop(10 * SECOND).await;
    }
    let all = fx.all_runs().await;
    let catch_ups: Vec<&Run> = all
        .iter()
        .filter(|r| r.job == job && kind(r) == "CatchUp")
        .collect();
    assert!(catch_ups.len() <= 1, "{catch_ups:?}");
    // Nothing ran during the outage: the slots between the cut and the first run's slot are
    // coalesced into it.
    assert!(
        all.iter()
            .filter(|r| r.job == job && r.slot.is_some_and(|s| s > cut_at && s < slot))
            .count()
            == 0
    );
    assert!(
        duplicate_slots(&all).is_empty(),
        "{:?}",
        duplicate_slots(&all)
    );
    fx.cleanup().await;
}

/// The attempts of the first slot of `job` that reached `attempts` attempts, in order.
async fn attempts_of_a_slot(fx: &Fixture, job: &'static str, attempts: i64) -> Vec<Run> {
    let last = fx
        .wait_for_run(12 * SECOND, "a slot's last attempt", move |runs| {
            runs.iter()
                .find(|r| r.job == job && r.attempt == Some(attempts))
                .cloned()
        })
        .await;
    // The next slot's first attempt: the slot is done, the lease released.
    let slot = last.slot.expect("a slot");
    fx.wait_for_run(8 * SECOND, "the next slot", move |runs| {
        runs.iter()
            .find(|r| r.job == job && r.slot > Some(slot))
            .cloned()
    })
    .await;
    fx.all_runs()
        .await
        .into_iter()
        .filter(|r| r.job == job && r.slot == Some(slot))
        .collect()
}

/// A body failing twice then succeeding runs three times on one instance, under one lease
/// (one fence), with growing pauses; no other instance runs that slot.
async fn retries(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "retry").await else {
        return;
    };
    let mut instances = start(&fx, &["A", "B"], "retry_twice").await;
    let runs = attempts_of_a_slot(&fx, "retry_twice", 3).await;
    for instance in &mut instances {
        instance.stop(10 * SECOND).await;
    }
    let attempts: Vec<Option<i64>> = runs.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [Some(1), Some(2), Some(3)], "{runs:?}");
    assert!(
        runs.iter()
            .all(|r| r.instance == runs[0].instance && r.fence == runs[0].fence),
        "one instance, one lease: {runs:?}"
    );
    assert!(runs.iter().all(|r| kind(r) == "Scheduled"));
    // Pauses of 500 ms then 1 s, less up to a quarter of jitter: at least 375 ms and 750 ms
    // (sleeps never end early; 5 ms for the clocks' millisecond rounding). The second's
    // lower bound is above the first's upper bound, 500 ms: the pauses grow.
    let gaps = [
        runs[1].started - runs[0].started,
        runs[2].started - runs[1].started,
    ];
    println!("pauses between attempts (database clock): {gaps:?} ms");
    assert!(gaps[0] >= 370, "{gaps:?}");
    assert!(gaps[1] >= 745, "{gaps:?}");
    let all = fx.all_runs().await;
    assert!(duplicate_fences(&all, "retry_twice").is_empty());
    fx.cleanup().await;
}

/// Leases (fences) used by more than one slot: a retry must stay in its slot's lease, and a
/// lease in its slot.
fn duplicate_fences(runs: &[Run], job: &str) -> Vec<i64> {
    let mut seen = std::collections::BTreeMap::new();
    for run in runs.iter().filter(|r| r.job == job) {
        seen.entry(run.fence)
            .or_insert_with(Vec::new)
            .push(run.slot);
    }
    seen.into_iter()
        .filter(|(_, slots)| slots.iter().any(|s| *s != slots[0]))
        .map(|(fence, _)| fence)
        .collect()
}

/// A panicking body is retried too, under the same lease.
async fn retry_after_panic(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "rpanic").await else {
        return;
    };
    // Not stopped with `stop()`: that asserts no panic in the log, and this job panics.
    let _instances = start(&fx, &["A", "B"], "retry_panic").await;
    let runs = attempts_of_a_slot(&fx, "retry_panic", 2).await;
    let attempts: Vec<Option<i64>> = runs.iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [Some(1), Some(2)], "{runs:?}");
    assert_eq!(
        (runs[1].instance.as_str(), runs[1].fence),
        (runs[0].instance.as_str(), runs[0].fence)
    );
    assert!(runs[1].started - runs[0].started >= 370);
    fx.cleanup().await;
}

/// A body ignoring `cancelled()` past its 1 s timeout is dropped after timeout + grace (1 s)
/// and its lease released: the next slot runs, although the lease was 30 s.
async fn timeout(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "tmo").await else {
        return;
    };
    let mut instances = start(&fx, &["A", "B"], "hang").await;
    let first = fx
        .wait_for_run(8 * SECOND, "a dropped run", |runs| {
            runs.iter()
                .find(|r| r.job == "hang" && r.ended.is_some())
                .cloned()
        })
        .await;
    let ended = first.ended.unwrap();
    let took = ended - first.started;
    println!("dropped after {took} ms (timeout 1 s + grace 1 s)");
    // The timer starts just before the body's first statement (the insert that reads
    // `started`): 100 ms covers that round trip. The upper bound only says it was dropped,
    // not left to run its 60 s: 3 s of margin for the drop's own write on a loaded machine.
    assert!((1_900..5_000).contains(&took), "took {took} ms");
    assert!(
        first.cancelled,
        "cancelled() had resolved when it was dropped"
    );
    // The service records the end from the dropped body's guard, in a task of its own, while
    // the executor releases the lease (coalesced over a few milliseconds): the end row can be
    // visible before the release is, so the release is waited for, and its time bounded.
    let row = test_support::process::eventually(
        2 * SECOND,
        "the dropped run's lease released",
        || async {
            let row = fx.lock_row("hang").await.expect("the lock row");
            (row.fence as i64 != first.fence || !row.held).then_some(row)
        },
    )
    .await;
    if row.fence as i64 == first.fence {
        assert!(
            row.lock_until.timestamp_millis() <= ended + 1_000,
            "released within a second of the drop: {row:?}"
        );
    }
    let slot = first.slot.unwrap();
    let next = fx
        .wait_for_run(8 * SECOND, "the next slot's run", move |runs| {
            runs.iter()
                .find(|r| r.job == "hang" && r.slot > Some(slot))
                .cloned()
        })
        .await;
    assert_eq!(
        next.slot,
        Some(slot + 5_000),
        "the next slot ran: lease released"
    );
    assert!(next.fence > first.fence);
    for instance in &mut instances {
        instance.stop(10 * SECOND).await;
    }
    fx.cleanup().await;
}
