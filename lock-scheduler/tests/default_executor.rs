//! Which executor direct calls use when a process starts several schedulers. A test binary of
//! its own: the process-wide default is what it tests.

use lock_core::{InMemoryLockProvider, default_executor};
use lock_scheduler::Scheduler;

async fn scheduler(id: &str) -> Scheduler {
    Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .instance_id(id)
        .jobs([])
        .start()
        .await
        .unwrap()
}

fn installed() -> String {
    default_executor()
        .expect("a started scheduler installs its executor")
        .instance_id()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_scheduler_does_not_take_over_direct_calls_until_the_first_shuts_down() {
    let (logs, _guard) = test_support::logs::capture();
    let first = scheduler("first").await;
    assert_eq!(installed(), "first");
    let second = scheduler("second").await;
    assert_eq!(
        installed(),
        "first",
        "the second scheduler replaced a live default"
    );
    assert!(
        logs.text()
            .contains("a default executor is installed already"),
        "the kept default is logged: {}",
        logs.text()
    );
    // Explicitly asked for: the second one takes over.
    lock_core::install_default_executor(second.executor().clone());
    assert_eq!(installed(), "second");
    second.shutdown().await.unwrap();
    // The installed default belongs to a scheduler that shut down: the next one replaces it.
    let third = scheduler("third").await;
    assert_eq!(installed(), "third");
    first.shutdown().await.unwrap();
    third.shutdown().await.unwrap();
}
