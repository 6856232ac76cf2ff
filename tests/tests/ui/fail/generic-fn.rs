use lock_core::scheduled;

#[scheduled(fixed_rate = "1m")]
async fn generic<T: Default>() {}

#[scheduled(fixed_rate = "1m")]
fn with_lifetime<'a>() {}

fn main() {}
