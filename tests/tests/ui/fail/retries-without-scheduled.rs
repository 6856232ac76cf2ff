use lock_core::scheduler_lock;

// A direct call runs its body once: retries and a timeout belong to scheduled runs.
#[scheduler_lock(name = "export", retries = 3, retry_backoff = "1s", timeout = "5m")]
async fn export() {}

fn main() {}
