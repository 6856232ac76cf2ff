// 65 bytes: one more than the lock table's VARCHAR(64) holds.
use lock_core::scheduler_lock;

#[scheduler_lock(name = "a-lock-name-of-sixty-five-bytes-which-is-one-over-the-upper-limit")]
async fn long_name() {}

fn main() {}
