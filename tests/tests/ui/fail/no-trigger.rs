use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled]
async fn bare() {}

#[scheduled()]
async fn empty_parentheses() {}

#[scheduled(zone = "UTC", name = "zone_only")]
async fn zone_only() {}

// Reported at the #[scheduled] attribute also when #[scheduler_lock] runs first.
#[scheduler_lock(name = "x")]
#[scheduled(initial_delay = "1s")]
async fn lock_first() {}

fn main() {}
