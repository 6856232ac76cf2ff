// Each shard is locked under `<name>#<index>`, which must fit the lock table's 64 bytes: with
// 10 shards the name may have 62 bytes, with 11 only 61; a broadcast rank takes up to 5.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m", shards = 11)]
#[scheduler_lock(name = "a-lock-name-of-sixty-two-bytes-leaves-two-for-the-shard-suffix")]
async fn eleven_shards() {}

#[scheduled(fixed_rate = "1m", broadcast = true, name = "a-name-of-sixty-bytes-is-one-too-long-for-a-broadcast-job-xx")]
async fn broadcast() {}

fn main() {}
