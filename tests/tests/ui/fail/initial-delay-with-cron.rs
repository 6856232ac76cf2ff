use lock_scheduler::scheduled;

#[scheduled(cron = "0 0 * * * *", initial_delay = "10s", name = "delayed_cron")]
async fn delayed_cron() {}

fn main() {}
