use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "near_miss", overlap = "queu")]
async fn near_miss() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "unknown_policy", overlap = "always")]
async fn unknown_policy() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "not_a_string", overlap = queue)]
async fn not_a_string() {}

fn main() {}
