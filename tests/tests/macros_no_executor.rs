//! A locked function called before any lock provider is installed panics with a message that
//! says how to install one: the body never runs unlocked.
//!
//! Its own test binary, so that no other test has installed an executor.

use std::sync::atomic::{AtomicBool, Ordering};

use lock_core::scheduler_lock;

static RAN: AtomicBool = AtomicBool::new(false);

#[scheduler_lock(name = "no-executor")]
async fn needs_a_provider() {
    RAN.store(true, Ordering::SeqCst);
}

#[scheduler_lock(name = "no-executor-sync")]
fn needs_a_provider_sync() {
    RAN.store(true, Ordering::SeqCst);
}

fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    match panic.downcast::<String>() {
        Ok(message) => *message,
        Err(panic) => panic
            .downcast_ref::<&str>()
            .map_or_else(|| "(not a string)".to_owned(), |s| (*s).to_owned()),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn calls_without_an_executor_panic_and_say_how_to_install_one() {
    assert!(lock_core::default_executor().is_none());

    let panic = tokio::spawn(needs_a_provider())
        .await
        .unwrap_err()
        .into_panic();
    let message = panic_message(panic);
    assert!(message.contains("\"no-executor\""), "{message}");
    assert!(
        message.contains("no lock provider is installed"),
        "{message}"
    );
    assert!(message.contains("install_default_executor"), "{message}");
    assert!(message.contains("Scheduler::builder()"), "{message}");

    let panic = tokio::task::spawn_blocking(needs_a_provider_sync)
        .await
        .unwrap_err()
        .into_panic();
    let message = panic_message(panic);
    assert!(message.contains("\"no-executor-sync\""), "{message}");
    assert!(message.contains("install_default_executor"), "{message}");

    assert!(!RAN.load(Ordering::SeqCst), "a body ran without a lock");
}
