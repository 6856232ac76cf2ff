//! The fault service's jobs for missed slots, retries, timeouts, shards and broadcast
//! (`fault-tests/tests/misfire.rs`, `shards.rs`): each run writes one row with its fire kind,
//! attempt or shard.

use std::time::Duration;

use lock_core::{BoxError, JobContext};
use lock_scheduler::{scheduled, scheduler_lock};

use super::{context, record_fire, runs, slot_ms};

/// Every 2 s, misfire `fire_once`: the latest slot missed while no instance ran it runs once
/// (the default grace, one period, always covers the latest slot).
#[scheduled(fixed_rate = "2s", misfire = "fire_once")]
#[scheduler_lock(name = "misfire_once", lock_at_most_for = "10s")]
async fn misfire_once() -> Result<(), BoxError> {
    record_fire().await
}

/// Every 2 s, misfire `catch_up` over the last minute: each missed slot runs once, in order.
#[scheduled(fixed_rate = "2s", misfire = "catch_up", misfire_grace = "1m")]
#[scheduler_lock(name = "misfire_catch_up", lock_at_most_for = "10s")]
async fn misfire_catch_up() -> Result<(), BoxError> {
    record_fire().await
}

/// Every 2 s, misfire `skip` (the default, written out): missed slots do not run.
#[scheduled(fixed_rate = "2s", misfire = "skip")]
#[scheduler_lock(name = "misfire_skip", lock_at_most_for = "10s")]
async fn misfire_skip() -> Result<(), BoxError> {
    record_fire().await
}

/// Every 2 s, misfire `fire_once` over the last minute: a slot missed during a database
/// outage longer than a period still runs once after the heal.
#[scheduled(fixed_rate = "2s", misfire = "fire_once", misfire_grace = "1m")]
#[scheduler_lock(name = "misfire_outage", lock_at_most_for = "10s")]
async fn misfire_outage() -> Result<(), BoxError> {
    record_fire().await
}

/// Every 4 s: the first two attempts fail, the third succeeds (retries 2, from 500 ms).
#[scheduled(fixed_rate = "4s")]
#[scheduler_lock(
    name = "retry_twice",
    lock_at_most_for = "10s",
    retries = 2,
    retry_backoff = "500ms"
)]
async fn retry_twice() -> Result<(), BoxError> {
    record_fire().await?;
    match context().attempt() {
        1 | 2 => Err("failing on purpose".into()),
        _ => Ok(()),
    }
}

/// Every 4 s: the first attempt panics, the retry succeeds.
#[scheduled(fixed_rate = "4s")]
#[scheduler_lock(
    name = "retry_panic",
    lock_at_most_for = "10s",
    retries = 1,
    retry_backoff = "500ms"
)]
async fn retry_panic() -> Result<(), BoxError> {
    record_fire().await?;
    if context().attempt() == 1 {
        panic!("panicking on purpose");
    }
    Ok(())
}

/// Every 5 s, a body that ignores `cancelled()` and would run 60 s, with a 1 s timeout (grace
/// 1 s) on a 30 s lease: dropped after 2 s, its drop recorded as the run's end.
#[scheduled(fixed_rate = "5s")]
#[scheduler_lock(name = "hang", lock_at_most_for = "30s", timeout = "1s")]
async fn hang() -> Result<(), BoxError> {
    let ctx = context();
    let kind = format!("{:?}", ctx.fire_kind());
    let id = runs()
        .start_fire(
            ctx.lock_name(),
            ctx.instance_id(),
            slot_ms(&ctx),
            ctx.fence(),
            &kind,
            ctx.attempt(),
        )
        .await?;
    /// Records the end when the body is dropped (or returns).
    struct EndOnDrop(i64);
    impl Drop for EndOnDrop {
        fn drop(&mut self) {
            let id = self.0;
            let cancelled = JobContext::current().is_some_and(|ctx| ctx.is_cancelled());
            tokio::spawn(async move {
                if let Err(e) = runs().finish(id, cancelled, None, None).await {
                    tracing::error!(error = %e, "could not record the end of a dropped run");
                }
            });
        }
    }
    let _end = EndOnDrop(id);
    tokio::time::sleep(Duration::from_secs(60)).await;
    Ok(())
}

/// Every second, four shards, each on a 3 s lease: the shards spread over the instances, one
/// instance is killed. Each run records `sharded#<index>/<total>` (its lock name and total).
#[scheduled(cron = "* * * * * *", shards = 4)]
#[scheduler_lock(name = "sharded", lock_at_most_for = "3s")]
async fn sharded() -> Result<(), BoxError> {
    record_shard().await
}

/// Every second on every live instance: each run records `everywhere#<rank>/<instances>`.
#[scheduled(cron = "* * * * * *", broadcast = true)]
#[scheduler_lock(name = "everywhere", lock_at_most_for = "3s")]
async fn everywhere() -> Result<(), BoxError> {
    record_shard().await
}

/// A whole run of one shard in one row, its job written `<lock name>/<total>`; the lock name
/// must end in the shard's index (`JobContext::shard`).
async fn record_shard() -> Result<(), BoxError> {
    let ctx = context();
    let (index, total) = ctx.shard().ok_or("a sharded job's run has a shard")?;
    if !ctx.lock_name().ends_with(&format!("#{index}")) {
        return Err(format!("shard {index} runs under the lock {}", ctx.lock_name()).into());
    }
    runs()
        .record(
            &format!("{}/{total}", ctx.lock_name()),
            ctx.instance_id(),
            slot_ms(&ctx),
            ctx.fence(),
        )
        .await
}
