// Independent mistakes are all reported in one compile, and the function is still emitted,
// so its caller in main() does not add "cannot find function" errors.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(cron = "* * * * *", zone = "Nowhere/Land", initial_delay = "1s", colour = "red")]
#[scheduler_lock(name = "", lock_at_most_for = "soon", keep_alive = 1)]
async fn everything_wrong(day: u32) -> u32 {
    day
}

fn main() {
    let _ = everything_wrong(1);
}
