// An unknown key lists the valid ones; a key of the other attribute says where it belongs.
use lock_core::{scheduled, scheduler_lock};

#[scheduled(crontab = "0 0 * * * *")]
async fn misspelled() {}

#[scheduled(cron = "0 0 * * * *", name = "job")]
async fn lock_key_in_scheduled() {}

#[scheduler_lock(lock_at_most = "1m", fixed_rate = "1s")]
async fn misspelled_and_misplaced() {}

#[scheduler_lock(type = "x")]
async fn keyword_as_key() {}

fn main() {}
