// Spring's Quartz forms are accepted exactly where Spring accepts them.
use lock_scheduler::scheduled;

// Spring: "No day-of-week before 'L'".
#[scheduled(cron = "0 0 0 ? * L", name = "bare_last_weekday")]
async fn bare_last_weekday() {}

#[scheduled(cron = "0 0 0 ? * 1#L", name = "ordinal_not_a_number")]
async fn ordinal_not_a_number() {}

#[scheduled(cron = "0 0 0 L-0 * ?", name = "last_day_offset_zero")]
async fn last_day_offset_zero() {}

fn main() {}
