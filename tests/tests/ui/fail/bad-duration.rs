// Durations are humantime (or ISO-8601) strings; the message shows both accepted forms.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "5 sec please", name = "rate")]
async fn rate() {}

#[scheduled(fixed_delay = "10", initial_delay = "one minute", name = "delay")]
async fn delay() {}

#[scheduler_lock(name = "lock", lock_at_most_for = "half an hour", lock_at_least_for = "-1s")]
async fn lock() {}

fn main() {}
