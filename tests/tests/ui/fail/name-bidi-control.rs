// U+202E reverses the text shown after it: `\u{202e}fdp.exe` reads as `exe.pdf`.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduler_lock(name = "\u{202e}x")]
async fn reversed() {}

#[scheduled(cron = "0 * * * * *", name = "report\u{2066}")]
async fn isolated() {}

fn main() {}
