// Over 1000 years is refused at compile time, as `LockConfiguration::new` and the run-time
// `Trigger` constructors refuse it (lock_trigger::MAX_DURATION).
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduler_lock(name = "lease_too_long", lock_at_most_for = "1001years")]
async fn lease_too_long() {}

#[scheduled(fixed_rate = "2000y", name = "rate_too_long")]
async fn rate_too_long() {}

#[scheduled(fixed_delay = "1s", initial_delay = "1001years", name = "initial_delay_too_long")]
async fn initial_delay_too_long() {}

fn main() {}
