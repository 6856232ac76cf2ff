use lock_scheduler::scheduled;

#[scheduled(fixed_rate = "1h", zone = "Europe/Berlin", name = "rate_in_zone")]
async fn rate_in_zone() {}

fn main() {}
