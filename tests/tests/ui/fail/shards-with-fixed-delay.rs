// A fixed-delay job has no slots: neither shards nor broadcast apply.
use lock_scheduler::scheduled;

#[scheduled(fixed_delay = "5s", shards = 4, name = "sharded_delay")]
async fn sharded_delay() {}

#[scheduled(fixed_delay = "5s", broadcast = true, name = "broadcast_delay")]
async fn broadcast_delay() {}

fn main() {}
