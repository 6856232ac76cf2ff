use lock_scheduler::__private::lock_trigger::MisfirePolicy;
use lock_scheduler::__private::{ScheduledJob, inventory};
use lock_scheduler::{scheduled, scheduler_lock};
use std::time::Duration;

#[scheduled(cron = "0 0 3 * * *", misfire = "fire_once", misfire_grace = "6h")]
#[scheduler_lock(name = "nightly", lock_at_most_for = "30m", retries = 3, retry_backoff = "10s", timeout = "20m")]
async fn nightly() -> Result<(), String> {
    Ok(())
}

#[scheduled(fixed_rate = "1m", misfire = "catch_up", misfire_max = 5, name = "minutely")]
fn minutely() {}

// Keep-alive: the retry plan need not fit in the lease, which is extended as the run goes.
#[scheduled(fixed_rate = "1h")]
#[scheduler_lock(name = "long_plan", lock_at_most_for = "1m", keep_alive = true, retries = 5, retry_backoff = "1m")]
async fn long_plan() {}

fn job(name: &str) -> &'static ScheduledJob {
    inventory::iter::<ScheduledJob>
        .into_iter()
        .find(|job| job.name == name)
        .unwrap_or_else(|| panic!("{name} not registered"))
}

fn main() {
    let nightly = job("nightly");
    assert_eq!(nightly.trigger.misfire, MisfirePolicy::FireOnce);
    assert_eq!(nightly.trigger.misfire_grace, Some(Duration::from_secs(6 * 3600)));
    assert_eq!(nightly.trigger.misfire_max, 10);
    assert_eq!(nightly.lock.spec.retries, 3);
    assert_eq!(nightly.lock.spec.retry_backoff, Duration::from_secs(10));
    assert_eq!(nightly.lock.spec.timeout, Some(Duration::from_secs(20 * 60)));
    let minutely = job("minutely");
    assert_eq!(minutely.trigger.misfire, MisfirePolicy::CatchUp);
    assert_eq!(minutely.trigger.misfire_max, 5);
    assert_eq!(minutely.lock.spec.retries, 0);
    assert_eq!(job("long_plan").lock.spec.retries, 5);
}
