use lock_scheduler::__private::lock_trigger::Overlap;
use lock_scheduler::__private::{ScheduledJob, TriggerKind, TriggerSpec, inventory};
use lock_scheduler::{scheduled, scheduler_lock};
use std::time::Duration;

#[scheduled(cron = "0 0 2 * * *", group = "imports")]
#[scheduler_lock(name = "import_orders", overlap = "queue", pause_after_failures = 3, pause_for = "PT10M")]
async fn import_orders() {}

#[scheduled(cron = "0 0 2 * * *", name = "import_refunds")]
#[scheduler_lock(overlap = "replace", pause_after_failures = 1000)]
fn import_refunds() {}

// After both, in a group, with a breaker an operator lifts (no `pause_for`).
#[scheduled(after = ["import_orders", "import_refunds"], group = "reports")]
#[scheduler_lock(name = "daily_report", overlap = "skip", pause_after_failures = 1)]
async fn daily_report() -> Result<(), String> {
    Ok(())
}

#[scheduled(after = "daily_report", name = "mail_report")]
async fn mail_report() {}

fn job(name: &str) -> &'static ScheduledJob {
    inventory::iter::<ScheduledJob>
        .into_iter()
        .find(|job| job.name == name)
        .unwrap_or_else(|| panic!("{name} not registered"))
}

fn main() {
    let orders = job("import_orders");
    assert_eq!(orders.group, Some("imports"));
    assert!(orders.after.is_empty());
    assert_eq!(orders.lock.spec.overlap, Overlap::Queue);
    assert_eq!(orders.lock.spec.pause_after_failures, 3);
    assert_eq!(orders.lock.spec.pause_for, Some(Duration::from_secs(600)));
    let refunds = job("import_refunds");
    assert_eq!(refunds.group, None);
    assert_eq!(refunds.lock.spec.overlap, Overlap::Replace);
    assert_eq!(refunds.lock.spec.pause_after_failures, 1000);
    assert_eq!(refunds.lock.spec.pause_for, None);
    let report = job("daily_report");
    assert_eq!(report.trigger, TriggerSpec::new(TriggerKind::After));
    assert_eq!(report.after, ["import_orders", "import_refunds"]);
    assert_eq!(report.group, Some("reports"));
    assert_eq!(report.lock.spec.overlap, Overlap::Skip);
    assert_eq!(report.lock.spec.pause_after_failures, 1);
    assert_eq!(job("mail_report").after, ["daily_report"]);
    // Without the keys: the defaults.
    assert_eq!(job("mail_report").lock.spec.overlap, Overlap::Skip);
    assert_eq!(job("mail_report").lock.spec.pause_after_failures, 0);
}
