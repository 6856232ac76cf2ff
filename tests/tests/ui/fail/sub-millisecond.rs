// Durations are stored in milliseconds; finer values are refused rather than rounded.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "500us")]
#[scheduler_lock(name = "too_fine", lock_at_most_for = "1s 1ns")]
async fn too_fine() {}

fn main() {}
