//! Every duration key accepts ISO-8601 as ShedLock writes it (`PT30M`, `PT0.5S`, `P1D`), in
//! either case, and means what Java's `Duration.parse` means.

#![deny(warnings)]

use std::time::Duration;

use lock_scheduler::__private::{ScheduledJob, TriggerKind, inventory};
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "PT0.5S", initial_delay = "PT1M")]
#[scheduler_lock(name = "iso_rate", lock_at_most_for = "PT30M", lock_at_least_for = "PT0.25S")]
async fn iso_rate() {}

#[scheduled(fixed_delay = "pt1h30m")]
#[scheduler_lock(name = "iso_delay", lock_at_most_for = "P1D", retries = 2, retry_backoff = "PT10S", timeout = "PT20M")]
async fn iso_delay() -> Result<(), String> {
    Ok(())
}

#[scheduled(cron = "0 0 3 * * *", misfire = "fire_once", misfire_grace = "P1DT6H", name = "iso_cron")]
async fn iso_cron() {}

fn job(name: &str) -> &'static ScheduledJob {
    inventory::iter::<ScheduledJob>
        .into_iter()
        .find(|job| job.name == name)
        .unwrap_or_else(|| panic!("{name} not registered"))
}

fn main() {
    let ms = Duration::from_millis;
    let rate = job("iso_rate");
    assert!(matches!(rate.trigger.kind, TriggerKind::FixedRate { period } if period == ms(500)));
    assert_eq!(rate.trigger.initial_delay, ms(60_000));
    assert_eq!(rate.lock.spec.lock_at_most_for, Some(ms(30 * 60_000)));
    assert_eq!(rate.lock.spec.lock_at_least_for, ms(250));
    let delay = job("iso_delay");
    assert!(matches!(delay.trigger.kind, TriggerKind::FixedDelay { delay } if delay == ms(5_400_000)));
    assert_eq!(delay.lock.spec.lock_at_most_for, Some(ms(86_400_000)));
    assert_eq!(delay.lock.spec.retry_backoff, ms(10_000));
    assert_eq!(delay.lock.spec.timeout, Some(ms(20 * 60_000)));
    assert_eq!(job("iso_cron").trigger.misfire_grace, Some(ms(30 * 3_600_000)));
}
