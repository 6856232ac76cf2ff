//! `#[scheduled]` and `#[scheduler_lock]` in either order, and with full paths.

#![deny(warnings)]

use std::time::Duration;

use lock_scheduler::__private::{CronSpec, ScheduledJob, TriggerKind, TriggerSpec, inventory};
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(cron = "0 5 1 * * *", zone = "Asia/Shanghai")]
#[scheduler_lock(name = "sync_bill", lock_at_most_for = "30m", lock_at_least_for = "10s")]
async fn sync_bill() {}

#[scheduler_lock(name = "send_reports", lock_at_most_for = "5m", keep_alive = true)]
#[scheduled(fixed_delay = "1m")]
async fn send_reports() {}

#[lock_core::scheduler_lock(name = "full_paths")]
#[lock_scheduler::scheduled(fixed_rate = "10s")]
async fn full_paths() {}

fn job(lock: &str) -> &'static ScheduledJob {
    inventory::iter::<ScheduledJob>
        .into_iter()
        .find(|job| job.lock.spec.name == lock)
        .unwrap_or_else(|| panic!("job locked by {lock} not registered"))
}

fn main() {
    let ms = Duration::from_millis;
    let bill = job("sync_bill");
    assert_eq!(bill.name, "sync_bill");
    assert_eq!(bill.lock.spec.lock_at_most_for, Some(ms(1_800_000)));
    assert_eq!(bill.lock.spec.lock_at_least_for, ms(10_000));
    assert_eq!(bill.lock.spec.keep_alive, None);
    assert_eq!(
        bill.trigger,
        TriggerSpec::new(TriggerKind::Cron(CronSpec { expr: "0 5 1 * * *", zone: Some("Asia/Shanghai") }))
    );

    let reports = job("send_reports");
    assert_eq!(reports.lock.spec.keep_alive, Some(true));
    assert_eq!(
        reports.trigger,
        TriggerSpec { initial_delay: ms(0), ..TriggerSpec::new(TriggerKind::FixedDelay { delay: ms(60_000) }) }
    );

    assert_eq!(
        job("full_paths").trigger,
        TriggerSpec { initial_delay: ms(0), ..TriggerSpec::new(TriggerKind::FixedRate { period: ms(10_000) }) }
    );
    assert_eq!(inventory::iter::<ScheduledJob>.into_iter().count(), 3);
}
