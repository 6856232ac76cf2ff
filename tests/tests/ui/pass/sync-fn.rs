//! Synchronous functions: scheduled ones are registered as blocking jobs, locked ones block
//! the calling thread while the lock is taken.

#![deny(warnings)]

use lock_scheduler::__private::{JobBody, ScheduledJob, inventory};
use lock_core::{InMemoryLockProvider, JobContext, LockingTaskExecutor};
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1h")]
#[scheduler_lock(name = "sync-cleanup")]
fn cleanup() {
    assert_eq!(JobContext::current().unwrap().lock_name(), "sync-cleanup");
}

#[scheduler_lock(name = "sync-sum")]
fn add_into(total: &mut u64, values: Vec<u64>) {
    *total += values.iter().sum::<u64>();
}

fn main() {
    let job = inventory::iter::<ScheduledJob>.into_iter().next().unwrap();
    assert!(matches!(job.body, JobBody::Blocking(_)));

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        lock_core::install_default_executor(LockingTaskExecutor::new(InMemoryLockProvider::new()));
        tokio::task::spawn_blocking(|| {
            cleanup();
            let mut total = 1;
            add_into(&mut total, vec![2, 3]);
            assert_eq!(total, 6);
        })
        .await
        .unwrap();
        // The scheduler's path: the body without the function's own lock wrapper.
        let JobBody::Blocking(body) = job.body else { unreachable!() };
        let executor = lock_core::default_executor().unwrap();
        let config = job.lock.configuration(&executor).unwrap();
        let state = lock_scheduler::StateMap::default();
        let out = executor.execute_blocking_in_slot(&config, None, move || body(&state)).await.unwrap();
        assert_eq!(out.executed(), Some(Ok(())));
    });
}
