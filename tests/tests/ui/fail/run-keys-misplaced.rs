use lock_scheduler::{scheduled, scheduler_lock};

// Retries and timeout are the lock's keys; the misfire policy is the trigger's.
#[scheduled(fixed_rate = "1m", retries = 3, timeout = "5m")]
#[scheduler_lock(name = "misplaced", misfire = "fire_once")]
async fn misplaced() {}

fn main() {}
