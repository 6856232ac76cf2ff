//! Associated functions without `self`: scheduled ones (whose body names the type, as `Self`
//! is not visible in it) and locked ones (where `Self` works).

#![deny(warnings)]

use lock_scheduler::__private::{ScheduledJob, inventory};
use lock_core::{InMemoryLockProvider, JobContext, LockingTaskExecutor};
use lock_scheduler::{scheduled, scheduler_lock};

struct Billing;

impl Billing {
    const REGION: &'static str = "eu";

    #[scheduled(cron = "0 0 3 * * *")]
    #[scheduler_lock(name = "billing-nightly")]
    async fn nightly() {
        assert_eq!(Billing::REGION, "eu");
    }

    #[scheduler_lock(name = "billing-export")]
    async fn export(day: u32) -> Result<(), String> {
        assert_eq!(JobContext::current().unwrap().lock_name(), "billing-export");
        Self::check(day)
    }

    fn check(day: u32) -> Result<(), String> {
        if day > 0 { Ok(()) } else { Err(Self::REGION.to_owned()) }
    }
}

struct Repository<T>(T);

impl<T> Repository<T> {
    // In a generic impl: registered once, not per type argument.
    #[scheduled(fixed_rate = "1m")]
    #[scheduler_lock(name = "repository-sweep")]
    fn sweep() {}
}

#[tokio::main]
async fn main() {
    lock_core::install_default_executor(LockingTaskExecutor::new(InMemoryLockProvider::new()));
    let names: Vec<&str> = inventory::iter::<ScheduledJob>.into_iter().map(|j| j.lock.spec.name).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"repository-sweep"));
    let job = inventory::iter::<ScheduledJob>.into_iter().find(|j| j.lock.spec.name == "billing-nightly").unwrap();
    assert_eq!(job.name, "billing-nightly");
    Billing::nightly().await;
    Billing::export(3).await.unwrap();
    tokio::task::spawn_blocking(Repository::<u8>::sweep).await.unwrap();
    let _unused = Repository(0u8).0;
}
