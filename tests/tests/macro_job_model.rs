//! The job-model keys of the attributes (`after`, `group`, `overlap`, `pause_after_failures`,
//! `pause_for`) reach the `Job` the scheduler builds from the registration: what
//! `Scheduler::jobs()` and `testing::registered_job` show is what the attributes say.

use lock_scheduler::testing::registered_job;
use lock_scheduler::{Overlap, scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m", group = "g")]
#[scheduler_lock(
    name = "jm-sync",
    overlap = "queue",
    pause_after_failures = 3,
    pause_for = "1m"
)]
async fn sync() {}

#[scheduled(after = ["jm-sync", "jm-other"], name = "jm-report")]
#[scheduler_lock(overlap = "replace")]
async fn report() {}

#[test]
fn overlap_and_group_reach_the_registered_job() {
    let sync = registered_job("jm-sync").expect("linked into this test binary");
    assert_eq!(sync.overlap(), Overlap::Queue);
    assert_eq!(sync.group(), Some("g"));
    assert_eq!(sync.trigger().parents().count(), 0);
}

#[test]
fn the_parents_of_after_reach_the_registered_trigger() {
    let report = registered_job("jm-report").expect("linked into this test binary");
    assert_eq!(
        report.trigger().parents().collect::<Vec<_>>(),
        ["jm-sync", "jm-other"]
    );
    assert_eq!(
        report.trigger().to_string(),
        "after `jm-sync` and `jm-other`"
    );
    assert_eq!(report.overlap(), Overlap::Replace);
    assert_eq!(report.group(), None);
}
