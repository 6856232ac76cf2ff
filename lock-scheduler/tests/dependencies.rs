//! Dependent jobs (`Trigger::after`): until every store keeps the parents' requests, `start()`
//! refuses them with a message that says so, instead of starting a job that never fires.

use std::time::Duration;

use lock_core::InMemoryLockProvider;
use lock_scheduler::{Job, Scheduler, Trigger};

#[tokio::test]
async fn a_dependent_job_is_refused_at_start_naming_it_and_its_parent() {
    let parent = Job::new(
        "import_orders",
        Trigger::fixed_rate(Duration::from_secs(60)).unwrap(),
        || async {},
    );
    let child = Job::new(
        "bill_orders",
        Trigger::after("import_orders").unwrap(),
        || async {},
    );
    let Err(error) = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .no_history()
        .jobs([parent, child])
        .start()
        .await
    else {
        panic!("a dependent job is refused");
    };
    let message = error.to_string();
    assert!(
        message.contains("`bill_orders`") && message.contains("after `import_orders`"),
        "{message}"
    );
    assert!(message.contains("not available"), "{message}");
}
