use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(cron = 5)]
#[scheduler_lock(name = "literal_of_the_wrong_kind", keep_alive = "yes")]
async fn literal_of_the_wrong_kind() {}

#[scheduled(fixed_rate = 5s)]
#[scheduler_lock(name = sync_bill, lock_at_most_for = Duration::from_secs(60))]
async fn not_a_literal() {}

#[scheduled(fixed_delay)]
#[scheduler_lock(name = "missing_values", keep_alive)]
async fn missing_values() {}

fn main() {}
