use lock_scheduler::scheduled;

// `after` is a trigger of its own: with a clock trigger, the job would have two.
#[scheduled(cron = "0 0 * * * *", after = "import_orders", name = "cron_and_after")]
async fn cron_and_after() {}

#[scheduled(after = ["a", "b"], fixed_delay = "1m", name = "after_and_delay")]
async fn after_and_delay() {}

fn main() {}
