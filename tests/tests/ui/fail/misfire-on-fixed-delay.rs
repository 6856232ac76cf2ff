use lock_scheduler::scheduled;

// A fixed-delay job has no slots that could be missed: every misfire key is refused.
#[scheduled(
    fixed_delay = "5s",
    misfire = "fire_once",
    misfire_grace = "1h",
    misfire_max = 3,
    name = "poll"
)]
async fn poll() {}

fn main() {}
