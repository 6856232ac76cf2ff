//! The signals between an overlapping fire (`overlap.rs`) and its body: the holder's
//! `lock_until` a refused fire reports, and the replace token a `replace` job's body watches.
//! Task-locals, so a skip job's fire sets none and pays nothing.

use std::cell::Cell;
use std::pin::pin;

use chrono::{DateTime, Utc};
use lock_core::{JobContext, Refusal, RefusalReason};
use tokio_util::sync::CancellationToken;

tokio::task_local! {
    /// Set around a `replace` job's fire: cancelled when the next slot replaces the run.
    pub(super) static REPLACED: CancellationToken;
    /// Set around a `queue` or `replace` job's fire: the holder's `lock_until` when the fire
    /// was refused because the lock is held (not because the slot ran).
    pub(super) static HELD_UNTIL: Cell<Option<DateTime<Utc>>>;
}

/// Notes a refused fire's holder for the fire around it (`fire_overlapping`); nothing for a
/// skip job's fire, which sets no task-local.
pub(super) fn note_refusal(refusal: &Refusal) {
    let held = matches!(refusal.reason, RefusalReason::Held | RefusalReason::Unknown);
    let until = refusal.lock_until.filter(|_| held);
    let _ = HELD_UNTIL.try_with(|cell| cell.set(until));
}

/// The body `fut`, whose `cancelled()` resolves when the fire around it is replaced; `fut`
/// itself when the fire is not a `replace` job's (no wrapper, so it is not held twice). Made
/// inside the fire around it; polled where the body's context is current.
pub(super) fn replaceable<T>(
    fut: impl Future<Output = T>,
) -> futures_util::future::Either<impl Future<Output = T>, impl Future<Output = T>> {
    use futures_util::future::Either;
    match REPLACED.try_with(CancellationToken::clone) {
        Ok(replaced) => Either::Left(replacing(fut, replaced)),
        Err(_) => Either::Right(fut),
    }
}

/// [`replaceable`] for a `replace` job's fire.
async fn replacing<T>(fut: impl Future<Output = T>, replaced: CancellationToken) -> T {
    let ctx = JobContext::current();
    let mut fut = pin!(fut);
    tokio::select! {
        biased;
        out = fut.as_mut() => return out,
        _ = replaced.cancelled() => {}
    }
    if let Some(ctx) = ctx {
        ctx.cancel_token().cancel();
    }
    fut.await
}

/// What a blocking body's thread needs to watch for its replacement (it has no task-local):
/// None outside a `replace` job's fire, so a skip job's blocking fire pays nothing.
pub(super) fn blocking_watch() -> Option<(CancellationToken, tokio::runtime::Handle)> {
    let replaced = REPLACED.try_with(CancellationToken::clone).ok()?;
    Some((replaced, tokio::runtime::Handle::current()))
}

/// Watches a blocking body's replacement; the watch stops when dropped (the body ended).
pub(super) struct ReplaceWatch(tokio::task::AbortHandle);

impl Drop for ReplaceWatch {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// On a blocking body's thread, inside its context: cancels the context when the fire is
/// replaced.
pub(super) fn watch_blocking(
    watch: Option<(CancellationToken, tokio::runtime::Handle)>,
) -> Option<ReplaceWatch> {
    let ((replaced, handle), ctx) = (watch?, JobContext::current()?);
    let task = handle.spawn(async move {
        replaced.cancelled().await;
        ctx.cancel_token().cancel();
    });
    Some(ReplaceWatch(task.abort_handle()))
}
