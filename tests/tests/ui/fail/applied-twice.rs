use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m", name = "scheduled_twice")]
#[scheduled(fixed_rate = "2m")]
async fn scheduled_twice() {}

#[scheduler_lock(name = "a")]
#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "b")]
async fn locked_twice() {}

fn main() {}
