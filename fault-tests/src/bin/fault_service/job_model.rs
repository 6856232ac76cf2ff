//! The fault service's jobs for issue 35's job model (`fault-tests/tests/job_model.rs`):
//! dependent jobs, overlap `queue` and `replace`, the circuit breaker, and the job whose fires
//! go to the instance with room under run limits (the busy instances' hog comes from `--hog`).
//! Each run writes a row with its fire kind; the overlap jobs' runs also write their end, and
//! whether `cancelled()` had resolved by then.

use std::time::Duration;

use lock_core::BoxError;
use lock_scheduler::{scheduled, scheduler_lock};

use super::{context, record_fire, runs, slot_ms};

/// An overlap job's run of a slot at a multiple of this (Unix ms) is its long run; the others
/// take a moment. Every third slot of a 2 s schedule: the two after it come due while it runs.
const LONG_SLOT_EVERY_MS: i64 = 6000;

// ---- Dependent jobs. ----

/// Every 2 s: `dep_child`'s parent.
#[scheduled(cron = "*/2 * * * * *")]
#[scheduler_lock(name = "dep_parent", lock_at_most_for = "3s")]
async fn dep_parent() -> Result<(), BoxError> {
    record_fire().await
}

/// After each successful run of `dep_parent`, with its slot.
#[scheduled(after = "dep_parent")]
#[scheduler_lock(name = "dep_child", lock_at_most_for = "3s")]
async fn dep_child() -> Result<(), BoxError> {
    record_fire().await
}

/// Every second: `dep_fast_child`'s parent, whose next run comes before a request left by a
/// dead instance is a heartbeat interval (1 s) old.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "dep_fast_parent", lock_at_most_for = "3s")]
async fn dep_fast_parent() -> Result<(), BoxError> {
    record_fire().await
}

/// After each successful run of `dep_fast_parent`, with its slot.
#[scheduled(after = "dep_fast_parent")]
#[scheduler_lock(name = "dep_fast_child", lock_at_most_for = "3s")]
async fn dep_fast_child() -> Result<(), BoxError> {
    record_fire().await
}

/// Every second, a run that fails: `dep_after_failing`'s parent.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "dep_failing", lock_at_most_for = "10s")]
async fn dep_failing() -> Result<(), BoxError> {
    record_fire().await?;
    Err("failing on purpose".into())
}

/// After `dep_failing` succeeds: never.
#[scheduled(after = "dep_failing")]
#[scheduler_lock(name = "dep_after_failing", lock_at_most_for = "10s")]
async fn dep_after_failing() -> Result<(), BoxError> {
    record_fire().await
}

// ---- Overlap. ----

/// Every 2 s, overlap `queue`: a long run lasts 4.4 s, so the next two slots come due while it
/// runs; the newer of them runs queued right after it.
#[scheduled(cron = "*/2 * * * * *")]
#[scheduler_lock(name = "queue_long", lock_at_most_for = "10s", overlap = "queue")]
async fn queue_long() -> Result<(), BoxError> {
    overlapping(Duration::from_millis(4400)).await
}

/// Every 2 s, overlap `queue` on a 3 s lease: a long run lasts until its instance is killed;
/// the next slot, refused on the others while the lease is held, is asked for again at the
/// lease's end and runs there, queued.
#[scheduled(cron = "*/2 * * * * *")]
#[scheduler_lock(name = "queue_handoff", lock_at_most_for = "3s", overlap = "queue")]
async fn queue_handoff() -> Result<(), BoxError> {
    overlapping(Duration::from_secs(30)).await
}

/// Every 2 s, overlap `replace`: a long run would last 30 s; the next slot resolves its
/// `cancelled()`, and runs (replacing) once it returned.
#[scheduled(cron = "*/2 * * * * *")]
#[scheduler_lock(name = "replace_long", lock_at_most_for = "10s", overlap = "replace")]
async fn replace_long() -> Result<(), BoxError> {
    overlapping(Duration::from_secs(30)).await
}

// ---- Circuit breaker and run limits. ----

/// Every 2 s, a run that fails; paused cluster-wide after 3 failed runs in a row, for 3 s.
#[scheduled(cron = "*/2 * * * * *")]
#[scheduler_lock(
    name = "breaker_failing",
    lock_at_most_for = "10s",
    pause_after_failures = 3,
    pause_for = "3s"
)]
async fn breaker_failing() -> Result<(), BoxError> {
    record_fire().await?;
    Err("upstream down".into())
}

/// Every second, a short run: under run limits, the instance with room runs each fire.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "limited_tick", lock_at_most_for = "10s")]
async fn limited_tick() -> Result<(), BoxError> {
    record_fire().await
}

/// Records the start with the fire kind; runs `long` for a long slot (50 ms for the others),
/// or until `cancelled()` resolves; records the end and whether it was cancelled.
async fn overlapping(long: Duration) -> Result<(), BoxError> {
    let ctx = context();
    let slot = slot_ms(&ctx).ok_or("an overlap job's fire has a slot")?;
    let work = match slot % LONG_SLOT_EVERY_MS {
        0 => long,
        _ => Duration::from_millis(50),
    };
    let kind = format!("{:?}", ctx.fire_kind());
    let id = runs()
        .start_fire(
            ctx.lock_name(),
            ctx.instance_id(),
            Some(slot),
            ctx.fence(),
            &kind,
            ctx.attempt(),
        )
        .await?;
    tokio::select! {
        _ = tokio::time::sleep(work) => {}
        _ = ctx.cancelled() => {}
    }
    runs().finish(id, ctx.is_cancelled(), None, None).await
}
