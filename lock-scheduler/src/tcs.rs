//! Locked jobs on an existing [`tokio_cron_scheduler::JobScheduler`] (feature
//! `tokio-cron-scheduler`).
//!
//! For services that already run tokio-cron-scheduler: wrap a job so that each fire is taken
//! under a lock with its slot, exactly as the built-in [`Scheduler`](crate::Scheduler) does.
//! The built-in scheduler is more precise (tokio-cron-scheduler 0.15 polls every 500 ms, and
//! fixes a job's UTC offset when the job is created, which is wrong after a DST change); this
//! integration is for migrations.

use std::sync::Arc;

pub use tokio_cron_scheduler;

use chrono::Utc;
use futures_util::FutureExt;

use crate::__private::JobReturn;
use crate::Trigger;
use lock_core::{LockConfiguration, LockError, LockingTaskExecutor};

/// A `tokio_cron_scheduler::Job` for `cron` (Spring's six-field dialect) in `zone` (an IANA
/// name, `None` for UTC) that runs `body` under `config`'s lock, once per slot across all
/// instances.
///
/// The slot of a fire is the cron instant at or before the moment tokio-cron-scheduler calls
/// the job (it calls late, never early), so every instance names the same slot.
///
/// ```
/// use lock_scheduler::tcs::{locked_job, tokio_cron_scheduler::JobScheduler};
/// use lock_core::{InMemoryLockProvider, LockConfiguration, LockingTaskExecutor};
/// use std::time::Duration;
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
/// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
/// let job = locked_job(executor, "0 */5 * * * *", None, config, || async {
///     // ... build the report
/// })?;
/// let scheduler = JobScheduler::new().await.unwrap();
/// scheduler.add(job).await.unwrap();
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
pub fn locked_job<F, Fut, R>(
    executor: LockingTaskExecutor,
    cron: &str,
    zone: Option<&str>,
    config: LockConfiguration,
    body: F,
) -> Result<tokio_cron_scheduler::Job, LockError>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: JobReturn + Send + 'static,
{
    let mut trigger = Trigger::cron(cron)?;
    let tz = match zone {
        Some(zone) => {
            trigger = trigger.in_zone(zone)?;
            lock_trigger::parse_zone(zone)
                .map_err(|e| LockError::InvalidConfiguration(e.to_string()))?
        }
        None => lock_trigger::Tz::UTC,
    };
    let shared = Arc::new((executor, trigger, config, body));
    let job = tokio_cron_scheduler::Job::new_async_tz(cron, tz, move |_id, _scheduler| {
        let shared = shared.clone();
        Box::pin(async move {
            let (executor, trigger, config, body) = &*shared;
            let slot = trigger.slot_at_or_before(Utc::now());
            let run = executor.execute_in_slot(config, slot, body());
            match std::panic::AssertUnwindSafe(run).catch_unwind().await {
                Ok(Ok(outcome)) => {
                    if let Some(Err(error)) = outcome.executed().map(JobReturn::into_job_result) {
                        tracing::error!(lock = config.name(), %error, "job failed");
                    }
                }
                // Logged by the executor.
                Ok(Err(_)) => {}
                Err(_) => tracing::error!(lock = config.name(), "job panicked"),
            }
        })
    })
    .map_err(|e| {
        LockError::InvalidConfiguration(format!("tokio-cron-scheduler refused `{cron}`: {e:?}"))
    })?;
    Ok(job)
}
