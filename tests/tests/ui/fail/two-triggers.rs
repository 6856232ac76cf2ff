use lock_scheduler::scheduled;

#[scheduled(cron = "0 0 * * * *", fixed_rate = "1h", name = "cron_and_rate")]
async fn cron_and_rate() {}

#[scheduled(fixed_rate = "1m", fixed_delay = "1m", cron = "@daily", name = "all_three")]
async fn all_three() {}

fn main() {}
