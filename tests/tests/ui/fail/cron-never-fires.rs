// A cron that can never fire is refused at compile time, not logged at run time.
use lock_scheduler::scheduled;

#[scheduled(cron = "0 0 0 30 2 *", name = "february_thirtieth")]
async fn february_thirtieth() {}

#[scheduled(cron = "0 0 0 ? * 5#6", name = "sixth_friday")]
async fn sixth_friday() {}

fn main() {}
