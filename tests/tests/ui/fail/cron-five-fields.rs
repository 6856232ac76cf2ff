// Spring cron has six fields (seconds first); a Unix five-field expression gets a hint.
use lock_core::scheduled;

#[scheduled(cron = "*/5 * * * *")]
async fn every_five_minutes() {}

#[scheduled(cron = "0 0 0 * * * 2030")]
async fn with_year() {}

fn main() {}
