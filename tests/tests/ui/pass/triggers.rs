//! Each trigger kind with its options, checked in the registry; durations become milliseconds.

#![deny(warnings)]

use lock_core::__private::{ScheduledJob, TriggerSpec, inventory};
use lock_core::scheduled;

#[scheduled(cron = "0 5 1 * * *", zone = "Asia/Shanghai")]
async fn cron_in_zone() {}

#[scheduled(cron = "0 0 12 ? * MON-FRI")]
async fn cron_utc_names() {}

#[scheduled(cron = "@daily")]
async fn cron_macro() {}

#[scheduled(cron = "0 0 0 L * ?", zone = "UTC")]
async fn cron_last_day() {}

#[scheduled(cron = "0 0 9 ? * FRI#2")]
async fn cron_second_friday() {}

#[scheduled(fixed_rate = "1h 30m 500ms")]
async fn rate() {}

#[scheduled(fixed_rate = "5s", initial_delay = "0s")]
async fn rate_zero_initial_delay() {}

#[scheduled(fixed_delay = "250ms", initial_delay = "1m")]
async fn delay() {}

fn trigger(function: &str) -> TriggerSpec {
    let name = format!("{}::{function}", module_path!());
    inventory::iter::<ScheduledJob>
        .into_iter()
        .find(|job| job.name == name)
        .unwrap_or_else(|| panic!("{name} not registered"))
        .trigger
}

fn main() {
    assert!(matches!(
        trigger("cron_in_zone"),
        TriggerSpec::Cron { expr: "0 5 1 * * *", zone: Some("Asia/Shanghai") }
    ));
    assert!(matches!(
        trigger("cron_utc_names"),
        TriggerSpec::Cron { expr: "0 0 12 ? * MON-FRI", zone: None }
    ));
    assert!(matches!(trigger("cron_macro"), TriggerSpec::Cron { expr: "@daily", zone: None }));
    assert!(matches!(trigger("cron_last_day"), TriggerSpec::Cron { zone: Some("UTC"), .. }));
    assert!(matches!(trigger("cron_second_friday"), TriggerSpec::Cron { .. }));
    assert!(matches!(
        trigger("rate"),
        TriggerSpec::FixedRate { period_ms: 5_400_500, initial_delay_ms: 0 }
    ));
    assert!(matches!(
        trigger("rate_zero_initial_delay"),
        TriggerSpec::FixedRate { period_ms: 5_000, initial_delay_ms: 0 }
    ));
    assert!(matches!(
        trigger("delay"),
        TriggerSpec::FixedDelay { delay_ms: 250, initial_delay_ms: 60_000 }
    ));
    assert_eq!(inventory::iter::<ScheduledJob>.into_iter().count(), 8);
}
