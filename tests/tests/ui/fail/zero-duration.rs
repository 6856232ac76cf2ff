// A zero lease, period or delay is refused; a zero initial delay or at-least is fine.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduler_lock(name = "zero_lease", lock_at_most_for = "0s", lock_at_least_for = "0s")]
async fn zero_lease() {}

#[scheduled(fixed_rate = "0ms", initial_delay = "0s", name = "zero_rate")]
async fn zero_rate() {}

#[scheduled(fixed_delay = "0s", name = "zero_delay")]
async fn zero_delay() {}

fn main() {}
