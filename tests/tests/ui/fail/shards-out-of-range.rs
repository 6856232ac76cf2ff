// `shards` takes an integer literal from 1 to 1024.
use lock_scheduler::scheduled;

#[scheduled(fixed_rate = "1m", shards = 0, name = "no_shards")]
async fn no_shards() {}

#[scheduled(fixed_rate = "1m", shards = 1025, name = "too_many")]
async fn too_many() {}

#[scheduled(fixed_rate = "1m", shards = "4", name = "quoted")]
async fn quoted() {}

#[scheduled(fixed_rate = "1m", shards = -1, name = "negative")]
async fn negative() {}

#[scheduled(fixed_rate = "1m", shards, name = "bare")]
async fn bare() {}

fn main() {}
