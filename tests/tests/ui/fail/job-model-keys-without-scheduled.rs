use lock_scheduler::scheduler_lock;

// A direct call runs its body once, as the caller wrote it: no overlap policy, no breaker.
#[scheduler_lock(name = "direct", overlap = "queue", pause_after_failures = 3, pause_for = "1m")]
async fn direct() {}

// `group` and `after` are keys of #[scheduled].
#[scheduler_lock(name = "misplaced", group = "reports", after = "x")]
async fn misplaced() {}

fn main() {}
