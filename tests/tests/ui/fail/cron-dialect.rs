// Spring's Quartz forms are accepted exactly where Spring accepts them.
use lock_core::scheduled;

// Spring: "No day-of-week before 'L'".
#[scheduled(cron = "0 0 0 ? * L")]
async fn bare_last_weekday() {}

#[scheduled(cron = "0 0 0 ? * 1#L")]
async fn ordinal_not_a_number() {}

#[scheduled(cron = "0 0 0 L-0 * ?")]
async fn last_day_offset_zero() {}

fn main() {}
