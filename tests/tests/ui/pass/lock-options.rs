//! `#[scheduler_lock]` options as they reach the runtime's `LockSpec`, and the defaults of a
//! `#[scheduled]` function without one.

#![deny(warnings)]

use std::time::Duration;

use lock_scheduler::__private::{ScheduledJob, inventory};
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m", name = "defaults")]
async fn defaults() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "keep_alive_on", keep_alive = true)]
async fn keep_alive_on() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "at_least_only", keep_alive = false, lock_at_least_for = "2h")]
async fn at_least_only() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "at_least_equals_at_most", lock_at_most_for = "10m", lock_at_least_for = "10m")]
async fn at_least_equals_at_most() {}

// A raw identifier: the proposed name (in the missing-name error) is written without `r#`.
#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "match")]
async fn r#match() {}

// Exactly 64 bytes, the longest name the lock table stores.
#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "a-lock-name-of-exactly-sixty-four-bytes-which-is-the-upper-limit")]
async fn longest_name() {}

/// The job `name` (each job here is locked under its function's name).
fn job(name: &str) -> &'static ScheduledJob {
    inventory::iter::<ScheduledJob>.into_iter().find(|job| job.name == name).unwrap()
}

fn main() {
    let ms = Duration::from_millis;
    let spec = job("defaults").lock.spec;
    assert_eq!(spec.name, "defaults");
    assert_eq!((spec.lock_at_most_for, spec.lock_at_least_for, spec.keep_alive), (None, ms(0), None));

    assert_eq!(job("keep_alive_on").lock.spec.keep_alive, Some(true));
    let spec = job("at_least_only").lock.spec;
    assert_eq!((spec.lock_at_most_for, spec.lock_at_least_for, spec.keep_alive), (None, ms(7_200_000), Some(false)));
    let spec = job("at_least_equals_at_most").lock.spec;
    assert_eq!((spec.lock_at_most_for, spec.lock_at_least_for), (Some(ms(600_000)), ms(600_000)));
    assert_eq!(job("match").lock.spec.name, "match");
    assert_eq!(job("a-lock-name-of-exactly-sixty-four-bytes-which-is-the-upper-limit").lock.spec.name.len(), 64);
}
