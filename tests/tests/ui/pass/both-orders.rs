//! `#[scheduled]` and `#[scheduler_lock]` in either order, and with full paths.

#![deny(warnings)]

use lock_core::__private::{ScheduledJob, TriggerSpec, inventory};
use lock_core::{scheduled, scheduler_lock};

#[scheduled(cron = "0 5 1 * * *", zone = "Asia/Shanghai")]
#[scheduler_lock(name = "sync_bill", lock_at_most_for = "30m", lock_at_least_for = "10s")]
async fn sync_bill() {}

#[scheduler_lock(name = "send_reports", lock_at_most_for = "5m", keep_alive = true)]
#[scheduled(fixed_delay = "1m")]
async fn send_reports() {}

#[lock_core::scheduler_lock(name = "full_paths")]
#[lock_core::scheduled(fixed_rate = "10s")]
async fn full_paths() {}

fn job(lock: &str) -> &'static ScheduledJob {
    inventory::iter::<ScheduledJob>
        .into_iter()
        .find(|job| job.lock.name == lock)
        .unwrap_or_else(|| panic!("job locked by {lock} not registered"))
}

fn main() {
    let bill = job("sync_bill");
    assert_eq!(bill.name, concat!(module_path!(), "::sync_bill"));
    assert_eq!(bill.lock.lock_at_most_for_ms, Some(1_800_000));
    assert_eq!(bill.lock.lock_at_least_for_ms, 10_000);
    assert_eq!(bill.lock.keep_alive, None);
    assert!(matches!(
        bill.trigger,
        TriggerSpec::Cron { expr: "0 5 1 * * *", zone: Some("Asia/Shanghai") }
    ));

    let reports = job("send_reports");
    assert_eq!(reports.lock.keep_alive, Some(true));
    assert!(matches!(
        reports.trigger,
        TriggerSpec::FixedDelay { delay_ms: 60_000, initial_delay_ms: 0 }
    ));

    assert!(matches!(
        job("full_paths").trigger,
        TriggerSpec::FixedRate { period_ms: 10_000, initial_delay_ms: 0 }
    ));
    assert_eq!(inventory::iter::<ScheduledJob>.into_iter().count(), 3);
}
