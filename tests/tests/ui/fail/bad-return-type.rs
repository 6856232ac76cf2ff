// A skipped call has nothing to return, so only `()` and `Result<(), E>` are allowed.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m", name = "count")]
async fn count() -> u32 {
    0
}

#[scheduler_lock(name = "maybe")]
async fn maybe() -> Option<()> {
    None
}

#[scheduler_lock(name = "computed")]
fn computed() -> Result<u32, String> {
    Ok(1)
}

#[scheduler_lock(name = "returns_a_future")]
fn returns_a_future() -> impl std::future::Future<Output = ()> {
    async {}
}

fn main() {}
