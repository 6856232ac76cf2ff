use lock_core::scheduler_lock;

#[scheduler_lock(name = "")]
async fn nameless() {}

fn main() {}
