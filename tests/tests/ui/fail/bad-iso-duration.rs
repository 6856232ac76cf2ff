// A malformed ISO-8601 duration says what is wrong with it and names both accepted forms.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "PT", name = "rate")]
async fn rate() {}

#[scheduled(fixed_delay = "P1M", initial_delay = "PT1M30", name = "delay")]
async fn delay() {}

#[scheduler_lock(name = "lock", lock_at_most_for = "-PT30M", lock_at_least_for = "PT0.0001S")]
async fn lock() {}

fn main() {}
