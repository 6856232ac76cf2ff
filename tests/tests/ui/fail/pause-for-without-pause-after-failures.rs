use lock_scheduler::{scheduled, scheduler_lock};

// `pause_for` is how long the circuit breaker pauses the job; without a breaker it means nothing.
#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "no_breaker", pause_for = "10m")]
async fn no_breaker() {}

fn main() {}
