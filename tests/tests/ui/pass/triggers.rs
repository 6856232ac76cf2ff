//! Each trigger kind with its options, checked in the registry; durations are whole milliseconds.

#![deny(warnings)]

use std::time::Duration;

use lock_scheduler::__private::{CronSpec, ScheduledJob, TriggerKind, TriggerSpec, inventory};
use lock_scheduler::scheduled;

#[scheduled(cron = "0 5 1 * * *", zone = "Asia/Shanghai", name = "cron_in_zone")]
async fn cron_in_zone() {}

#[scheduled(cron = "0 0 12 ? * MON-FRI", name = "cron_utc_names")]
async fn cron_utc_names() {}

#[scheduled(cron = "@daily", name = "cron_macro")]
async fn cron_macro() {}

#[scheduled(cron = "0 0 0 L * ?", zone = "UTC", name = "cron_last_day")]
async fn cron_last_day() {}

#[scheduled(cron = "0 0 9 ? * FRI#2", name = "cron_second_friday")]
async fn cron_second_friday() {}

#[scheduled(fixed_rate = "1h 30m 500ms", name = "rate")]
async fn rate() {}

#[scheduled(fixed_rate = "5s", initial_delay = "0s", name = "rate_zero_initial_delay")]
async fn rate_zero_initial_delay() {}

#[scheduled(fixed_delay = "250ms", initial_delay = "1m", name = "delay")]
async fn delay() {}

/// The trigger of the job `name` (each job here is named after its function).
fn trigger(name: &str) -> TriggerSpec {
    inventory::iter::<ScheduledJob>
        .into_iter()
        .find(|job| job.name == name)
        .unwrap_or_else(|| panic!("{name} not registered"))
        .trigger
}

fn cron(expr: &'static str, zone: Option<&'static str>) -> TriggerSpec {
    TriggerSpec::new(TriggerKind::Cron(CronSpec { expr, zone }))
}

fn main() {
    let ms = Duration::from_millis;
    assert_eq!(trigger("cron_in_zone"), cron("0 5 1 * * *", Some("Asia/Shanghai")));
    assert_eq!(trigger("cron_utc_names"), cron("0 0 12 ? * MON-FRI", None));
    assert_eq!(trigger("cron_macro"), cron("@daily", None));
    assert!(matches!(
        trigger("cron_last_day").kind,
        TriggerKind::Cron(CronSpec { zone: Some("UTC"), .. })
    ));
    assert!(matches!(trigger("cron_second_friday").kind, TriggerKind::Cron(_)));
    assert_eq!(
        trigger("rate"),
        TriggerSpec { initial_delay: ms(0), ..TriggerSpec::new(TriggerKind::FixedRate { period: ms(5_400_500) }) }
    );
    assert_eq!(
        trigger("rate_zero_initial_delay"),
        TriggerSpec { initial_delay: ms(0), ..TriggerSpec::new(TriggerKind::FixedRate { period: ms(5_000) }) }
    );
    assert_eq!(
        trigger("delay"),
        TriggerSpec { initial_delay: ms(60_000), ..TriggerSpec::new(TriggerKind::FixedDelay { delay: ms(250) }) }
    );
    assert_eq!(inventory::iter::<ScheduledJob>.into_iter().count(), 8);
}
