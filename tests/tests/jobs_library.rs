//! A binary finds the jobs of a library crate through one line naming the crate: the fix the
//! scheduler's zero-jobs warning gives (see `jobs_library_unlinked.rs` for the warning).

use jobs_lib as _;

#[test]
fn a_library_crates_jobs_are_registered_once_the_binary_names_it() {
    let names: Vec<String> = lock_scheduler::registered_jobs()
        .unwrap()
        .iter()
        .map(|job| job.name().to_owned())
        .collect();
    assert_eq!(names, ["nightly_report"]);
}
