use lock_core::scheduled;

#[scheduled(cron = "0 0 * * * *", initial_delay = "10s")]
async fn delayed_cron() {}

fn main() {}
