use lock_scheduler::{scheduled, scheduler_lock};

// A job among its own parents would wait for its own success: a cycle known at compile time.
#[scheduled(after = "report", name = "report")]
async fn report() {}

#[scheduled(after = ["import_orders", "export"])]
#[scheduler_lock(name = "export")]
async fn export() {}

fn main() {}
