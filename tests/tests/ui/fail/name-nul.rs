// Databases end or refuse a string at NUL.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduler_lock(name = "a\0b")]
async fn cut_short() {}

#[scheduled(fixed_delay = "5s", name = "\0")]
async fn only_nul() {}

fn main() {}
