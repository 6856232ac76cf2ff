//! `shards = N` and `broadcast = true` as they reach the runtime's `ScheduledJob`, and the
//! longest lock names they leave room for.

#![deny(warnings)]

use lock_scheduler::__private::{Distribution, ScheduledJob, inventory};
use lock_scheduler::scheduled;

#[scheduled(cron = "0 0 2 * * *", shards = 4, name = "sync_bill")]
async fn sync_bill() {}

#[scheduled(fixed_rate = "1m", broadcast = true, name = "evict_cache")]
async fn evict_cache() {}

#[scheduled(fixed_rate = "1m", broadcast = false, name = "not_broadcast")]
async fn not_broadcast() {}

#[scheduled(fixed_rate = "1m", name = "single")]
async fn single() {}

// 62 bytes: with 10 shards the longest shard name is `..#9`, 64 bytes.
#[scheduled(fixed_rate = "1m", shards = 10, name = "a-lock-name-of-sixty-two-bytes-leaves-two-for-the-shard-suffix")]
async fn longest_sharded() {}

// 59 bytes: a broadcast rank goes up to `#1023`, 5 bytes.
#[scheduled(fixed_rate = "1m", broadcast = true, name = "a-name-of-fifty-nine-bytes-leaves-five-for-the-rank-suffix_")]
async fn longest_broadcast() {}

// The largest count.
#[scheduled(fixed_rate = "1m", shards = 1024, name = "many")]
async fn many() {}

fn job(name: &str) -> &'static ScheduledJob {
    inventory::iter::<ScheduledJob>.into_iter().find(|job| job.name == name).unwrap()
}

fn main() {
    assert_eq!(job("sync_bill").distribution, Distribution::Shards(4));
    assert_eq!(job("evict_cache").distribution, Distribution::Broadcast);
    assert_eq!(job("not_broadcast").distribution, Distribution::Single);
    assert_eq!(job("single").distribution, Distribution::Single);
    assert_eq!(job("many").distribution, Distribution::Shards(1024));
    let sharded = "a-lock-name-of-sixty-two-bytes-leaves-two-for-the-shard-suffix";
    assert_eq!((sharded.len(), job(sharded).distribution), (62, Distribution::Shards(10)));
    let broadcast = "a-name-of-fifty-nine-bytes-leaves-five-for-the-rank-suffix_";
    assert_eq!((broadcast.len(), job(broadcast).distribution), (59, Distribution::Broadcast));
}
