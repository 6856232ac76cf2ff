use lock_scheduler::scheduled;

#[scheduled(fixed_rate = "1m", name = "generic")]
async fn generic<T: Default>() {}

#[scheduled(fixed_rate = "1m", name = "with_lifetime")]
fn with_lifetime<'a>() {}

fn main() {}
