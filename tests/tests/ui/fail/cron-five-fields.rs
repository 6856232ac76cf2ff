// Spring cron has six fields (seconds first); a Unix five-field expression gets a hint.
use lock_scheduler::scheduled;

#[scheduled(cron = "*/5 * * * *", name = "every_five_minutes")]
async fn every_five_minutes() {}

#[scheduled(cron = "0 0 0 * * * 2030", name = "with_year")]
async fn with_year() {}

fn main() {}
