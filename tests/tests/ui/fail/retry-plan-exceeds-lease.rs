use lock_scheduler::{scheduled, scheduler_lock};

// 10 s + 20 s + 40 s of pauses cannot fit in a 60 s lease without keep-alive.
#[scheduled(cron = "0 */5 * * * *")]
#[scheduler_lock(name = "sync", lock_at_most_for = "1m", retries = 3, retry_backoff = "10s")]
async fn sync() -> Result<(), String> {
    Ok(())
}

// The default backoff (1 s): 1 s + 2 s + 4 s do not fit in 5 s.
#[scheduled(cron = "0 */5 * * * *")]
#[scheduler_lock(name = "default_backoff", lock_at_most_for = "5s", retries = 3)]
async fn default_backoff() {}

fn main() {}
