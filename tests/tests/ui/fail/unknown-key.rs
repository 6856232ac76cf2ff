// An unknown key lists the valid ones; a key of the other attribute says where it belongs.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(crontab = "0 0 * * * *", name = "misspelled")]
async fn misspelled() {}

#[scheduled(cron = "0 0 * * * *", keep_alive = true, name = "job")]
async fn lock_key_in_scheduled() {}

#[scheduler_lock(name = "misspelled_and_misplaced", lock_at_most = "1m", fixed_rate = "1s")]
async fn misspelled_and_misplaced() {}

#[scheduler_lock(name = "keyword_as_key", type = "x")]
async fn keyword_as_key() {}

fn main() {}
