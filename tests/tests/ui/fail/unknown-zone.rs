use lock_core::scheduled;

#[scheduled(cron = "0 5 1 * * *", zone = "Mars/Olympus_Mons")]
async fn on_mars() {}

#[scheduled(cron = "0 5 1 * * *", zone = "CEST")]
async fn abbreviation_is_not_a_zone() {}

fn main() {}
