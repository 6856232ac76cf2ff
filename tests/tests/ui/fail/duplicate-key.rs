use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(cron = "0 0 * * * *", cron = "0 30 * * * *")]
#[scheduler_lock(name = "a", keep_alive = true, name = "b")]
async fn twice() {}

fn main() {}
