//! Redis restarts under a running service: a private `redis-server` of the test's own (never
//! the shared one on 6379), killed with `SIGKILL` and started again on the same port and
//! directory while two instances fire an every-second job. The runs are recorded in the
//! PostgreSQL test database, which the restart does not touch.
//!
//! - With the append-only file on (`appendfsync always`): no slot runs twice, and fences keep
//!   increasing across the restart.
//! - With no persistence (the machine's own Redis is so configured): every instance warned at
//!   connect, and the restart forgets the locks: fences start over at 1, as the provider's
//!   README says.

mod common;

use std::time::Duration;

use common::{Fixture, Instance, Provider, duplicate_slots, eventually};
use fault_tests::{Backend, Run};
use test_support::redis_server::{Durability, PrivateRedis};

const SECOND: Duration = Duration::from_secs(1);
/// The provider's warning at connect when a restart would lose fences.
const WARNING: &str = "a restart of this Redis server forgets the locks, fences and last_fire";

/// Two instances firing `tick` on `redis`, which is killed after a few runs, kept down for
/// two seconds and started again; returns the runs before and after, and the instances.
async fn tick_through_a_restart(
    redis: &mut PrivateRedis,
    scenario: &str,
) -> Option<(Fixture, Vec<Run>, Vec<Run>, Vec<Instance>)> {
    let fx = Fixture::on(Provider::Redis, scenario, Backend::Redis(redis.url()), None).await?;
    let mut instances: Vec<Instance> = ["A", "B"]
        .iter()
        .map(|letter| fx.service(letter).jobs("tick").spawn())
        .collect();
    for instance in &mut instances {
        instance.ready().await;
    }
    eventually(10 * SECOND, "three runs of `tick`", || async {
        (fx.runs_of("tick").await.len() >= 3).then_some(())
    })
    .await;
    redis.kill();
    let killed_at = fx.now().await;
    tokio::time::sleep(2 * SECOND).await;
    redis.restart();
    let after: Vec<Run> = eventually(15 * SECOND, "three runs after the restart", || async {
        // By slot, not by start: a run granted just before the kill may record its start a
        // moment after it; every slot after the kill was granted by the restarted server (the
        // two seconds down refuse every acquire).
        let runs: Vec<Run> = fx
            .runs_of("tick")
            .await
            .into_iter()
            .filter(|r| r.slot > Some(killed_at))
            .collect();
        (runs.len() >= 3).then_some(runs)
    })
    .await;
    let before = fx
        .runs_of("tick")
        .await
        .into_iter()
        .filter(|r| r.slot <= Some(killed_at))
        .collect();
    Some((fx, before, after, instances))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_append_only_file_keeps_slots_and_fences() {
    let Some(mut redis) = PrivateRedis::start(Durability::AppendOnly) else {
        return;
    };
    let Some((fx, before, after, mut instances)) = tick_through_a_restart(&mut redis, "aof").await
    else {
        return;
    };
    for instance in &mut instances {
        instance.stop(10 * SECOND).await;
        assert!(
            !instance.stderr.text().contains(WARNING),
            "warned about a server with an append-only file:\n{}",
            instance.stderr.text()
        );
    }
    let all = fx.runs_of("tick").await;
    let duplicates = duplicate_slots(&all);
    assert!(duplicates.is_empty(), "slots run twice: {duplicates:?}");
    // In slot order, every run's fence is above the last: the restart forgot no grant.
    let mut by_slot = all.clone();
    by_slot.sort_by_key(|r| r.slot);
    for pair in by_slot.windows(2) {
        assert!(
            pair[1].fence > pair[0].fence,
            "the fence went back across the restart: {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    let last_before = before.iter().map(|r| r.fence).max().expect("runs before");
    let first_after = after.iter().map(|r| r.fence).min().expect("runs after");
    assert!(first_after > last_before, "{before:?} / {after:?}");
    // A new connection: the fixture's own saw the restart break it, and its next command
    // fails (the provider reconnects at the one after).
    let reader = lock_provider_redis::RedisLockProvider::connect(&redis.url())
        .await
        .expect("connect after the restart")
        .with_key_prefix(&fx.lock_table)
        .expect("the fixture's prefix");
    let row = lock_core::LockProvider::read_lock(&reader, "tick")
        .await
        .expect("read")
        .expect("the lock row survived");
    assert!(row.fence as i64 >= after.iter().map(|r| r.fence).max().unwrap());
    fx.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_without_persistence_warned_and_starts_fences_over() {
    let Some(mut redis) = PrivateRedis::start(Durability::Nothing) else {
        return;
    };
    let Some((fx, before, after, mut instances)) =
        tick_through_a_restart(&mut redis, "noaof").await
    else {
        return;
    };
    for instance in &mut instances {
        instance.stop(10 * SECOND).await;
        assert!(
            instance.stderr.text().contains(WARNING),
            "no warning at connect:\n{}",
            instance.stderr.text()
        );
    }
    let last_before = before.iter().map(|r| r.fence).max().expect("runs before");
    assert!(last_before >= 3, "{before:?}");
    // What the README says: the restart forgot the lock, so its fence started over. (Slots
    // still ran once each here: every instance fires only slots after its last one; the
    // record that would stop a late or restarted instance, last_fire, is what was lost.)
    let mut after = after;
    after.sort_by_key(|r| r.slot);
    assert_eq!(
        after[0].fence, 1,
        "fences start over after the restart: {after:?}"
    );
    let duplicates = duplicate_slots(&fx.runs_of("tick").await);
    assert!(duplicates.is_empty(), "slots run twice: {duplicates:?}");
    fx.cleanup().await;
}
