// A name of spaces only is invisible wherever it is shown.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduler_lock(name = "   ")]
async fn spaces() {}

#[scheduled(cron = "0 * * * * *", name = "\u{3000}")]
async fn ideographic_space() {}

fn main() {}
