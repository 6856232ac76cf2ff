//! The lock's name, from either attribute, is the job's name too: both stay the same when the
//! function moves.

#![deny(warnings)]

use lock_scheduler::__private::{ScheduledJob, inventory};
use lock_scheduler::{scheduled, scheduler_lock};

mod billing {
    use super::*;

    #[scheduled(fixed_rate = "1m", name = "billing-sync")]
    pub async fn sync() {}

    #[scheduled(cron = "@daily")]
    #[scheduler_lock(name = "billing-report", lock_at_most_for = "10m")]
    pub fn report() {}
}

fn main() {
    let mut jobs: Vec<(&str, &str)> = inventory::iter::<ScheduledJob>
        .into_iter()
        .map(|job| (job.name, job.lock.spec.name))
        .collect();
    jobs.sort();
    assert_eq!(
        jobs,
        [("billing-report", "billing-report"), ("billing-sync", "billing-sync")]
    );
}
