// Invisible, and a MySQL table made by ShedLock's DDL ignores trailing spaces.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduler_lock(name = " x")]
async fn leading() {}

#[scheduled(cron = "0 * * * * *", name = "x ")]
async fn trailing() {}

fn main() {}
