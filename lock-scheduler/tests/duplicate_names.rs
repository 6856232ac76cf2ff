//! Two `#[scheduled]` functions with one name: `start()` names both functions and the fix.
//! A test binary of its own: every other test's registered jobs would meet these two.

use lock_core::InMemoryLockProvider;
use lock_scheduler::{Job, Scheduler, Trigger};

mod a {
    #[lock_scheduler::scheduled(fixed_rate = "1h", name = "nl_tick")]
    pub async fn tick() {}
}

mod b {
    #[lock_scheduler::scheduled(fixed_rate = "PT1H", name = "nl_tick")]
    pub async fn tick() {}
}

#[tokio::test]
async fn start_names_both_functions_of_a_duplicate_job_name_and_the_fix() {
    let error = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .start()
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("two jobs are named `nl_tick`"), "{error}");
    for path in ["`duplicate_names::a::tick`", "`duplicate_names::b::tick`"] {
        assert!(error.contains(path), "{path} missing: {error}");
    }
    assert!(error.contains("name = \"..\""), "{error}");
}

#[tokio::test]
async fn a_job_built_by_hand_is_named_as_such_beside_the_function() {
    let mut jobs = lock_scheduler::registered_jobs().unwrap();
    jobs.truncate(1);
    let trigger = Trigger::fixed_rate(std::time::Duration::from_secs(60)).unwrap();
    jobs.push(Job::new("nl_tick", trigger, || async {}));
    let error = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs(jobs)
        .start()
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("function `duplicate_names::"), "{error}");
    assert!(error.contains("a job built with `Job::new`"), "{error}");
}
