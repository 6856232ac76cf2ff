// A newline would forge a row in `lockctl list`; ESC sequences would reach the terminal.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduler_lock(name = "nl\nbilling  free")]
async fn forged_row() {}

#[scheduled(cron = "0 * * * * *", name = "\u{1b}[2J")]
async fn clears_the_screen() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "bell\x07")]
async fn rings() {}

fn main() {}
