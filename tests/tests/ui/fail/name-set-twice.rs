// The lock's name is written once: in #[scheduled] or in #[scheduler_lock], not in both.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m", name = "rate")]
#[scheduler_lock(name = "rate", lock_at_most_for = "5m")]
async fn named_twice() {}

#[scheduler_lock(name = "first")]
#[scheduled(cron = "@hourly", name = "second")]
async fn lock_first_named_twice() {}

fn main() {}
