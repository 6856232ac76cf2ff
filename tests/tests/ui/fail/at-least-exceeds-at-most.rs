use lock_core::scheduler_lock;

#[scheduler_lock(name = "held_too_long", lock_at_most_for = "30m", lock_at_least_for = "1h")]
async fn held_too_long() {}

fn main() {}
