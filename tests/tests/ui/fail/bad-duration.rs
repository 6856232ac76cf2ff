// Durations are humantime strings; the message shows the accepted shapes.
use lock_core::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "5 sec please")]
async fn rate() {}

#[scheduled(fixed_delay = "10", initial_delay = "one minute")]
async fn delay() {}

#[scheduler_lock(lock_at_most_for = "half an hour", lock_at_least_for = "-1s")]
async fn lock() {}

fn main() {}
