use lock_scheduler::scheduled;

#[scheduled(cron = "0 5 1 * * *", zone = "Mars/Olympus_Mons", name = "on_mars")]
async fn on_mars() {}

#[scheduled(cron = "0 5 1 * * *", zone = "CEST", name = "abbreviation_is_not_a_zone")]
async fn abbreviation_is_not_a_zone() {}

fn main() {}
