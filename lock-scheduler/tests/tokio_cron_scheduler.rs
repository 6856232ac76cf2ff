//! Locked jobs on tokio-cron-scheduler: two schedulers (two instances), every slot once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::{
    InMemoryLockProvider, JobContext, LockConfiguration, LockProvider, LockingTaskExecutor,
};
use lock_scheduler::tcs::{locked_job, tokio_cron_scheduler::JobScheduler};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_job_schedulers_share_each_slot() {
    let provider: Arc<dyn LockProvider> = Arc::new(InMemoryLockProvider::new());
    let runs = Arc::new(Mutex::new(Vec::new()));
    let mut schedulers = Vec::new();
    for i in 0..2 {
        let executor = LockingTaskExecutor::from_shared(provider.clone())
            .with_instance_id(format!("tcs-{i}"))
            .unwrap();
        let config =
            LockConfiguration::new("tcs-every-second", Duration::from_secs(30), Duration::ZERO)
                .unwrap();
        let runs = runs.clone();
        let job = locked_job(
            executor,
            "* * * * * *",
            Some("Europe/Berlin"),
            config,
            move || {
                let runs = runs.clone();
                async move {
                    let ctx = JobContext::current().unwrap();
                    runs.lock()
                        .unwrap()
                        .push((ctx.scheduled_at().unwrap(), ctx.fence()));
                }
            },
        )
        .unwrap();
        let scheduler = JobScheduler::new().await.unwrap();
        scheduler.add(job).await.unwrap();
        scheduler.start().await.unwrap();
        schedulers.push(scheduler);
    }
    tokio::time::sleep(Duration::from_millis(4_600)).await;
    for mut scheduler in schedulers {
        scheduler.shutdown().await.unwrap();
    }
    let mut runs = runs.lock().unwrap().clone();
    runs.sort();
    assert!(runs.len() >= 3, "{runs:?}");
    for pair in runs.windows(2) {
        assert!(pair[1].0 > pair[0].0, "a slot ran twice: {pair:?}");
        assert!(pair[1].1 > pair[0].1, "fences must increase: {pair:?}");
    }
    assert!(
        locked_job(
            LockingTaskExecutor::from_shared(provider),
            "* * * * *",
            None,
            LockConfiguration::new("x", Duration::from_secs(1), Duration::ZERO).unwrap(),
            || async {}
        )
        .is_err()
    );
}
