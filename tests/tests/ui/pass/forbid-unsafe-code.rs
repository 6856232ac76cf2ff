//! A crate that forbids unsafe code (and denies warnings) can use both macros: the registration
//! (`inventory`) expands its `unsafe` inside lock-core's dependency, not in this crate.

#![forbid(unsafe_code)]
#![deny(warnings)]

use lock_scheduler::__private::{ScheduledJob, inventory};
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(cron = "0 */5 * * * *")]
#[scheduler_lock(name = "no-unsafe")]
async fn no_unsafe() {}

#[scheduled(fixed_delay = "1s", name = "no_unsafe_sync")]
fn no_unsafe_sync() {}

fn main() {
    assert_eq!(inventory::iter::<ScheduledJob>.into_iter().count(), 2);
}
