// A job runs a fixed number of shards or once per live instance, not both.
use lock_scheduler::scheduled;

#[scheduled(cron = "0 * * * * *", shards = 4, broadcast = true, name = "both")]
async fn both() {}

#[scheduled(cron = "0 * * * * *", broadcast = "yes", name = "quoted_bool")]
async fn quoted_bool() {}

fn main() {}
