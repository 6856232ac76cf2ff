// Every lock names itself: a name derived from the module path would change when the function
// moves, and old and new instances would take different locks during a rolling deploy. The
// error proposes the function's name and says what the former default was.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
async fn scheduled_alone() {}

#[scheduled(cron = "0 0 * * * *")]
#[scheduler_lock(lock_at_most_for = "5m")]
async fn lock_without_name() {}

// Also when #[scheduler_lock] runs first.
#[scheduler_lock(keep_alive = true)]
#[scheduled(fixed_delay = "10s")]
fn lock_first_without_name() {}

#[scheduler_lock]
async fn locked_call() {}

// The proposed name is written without `r#`.
#[scheduler_lock(lock_at_most_for = "1m")]
fn r#match() {}

fn main() {}
