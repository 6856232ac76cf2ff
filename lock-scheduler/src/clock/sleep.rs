//! [`SleepUntil`]: a timer on the database's clock, the future every idle job loop waits on.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use chrono::{DateTime, Utc};
use tokio::sync::futures::Notified;
use tokio::time::Sleep;
use tokio_util::sync::WaitForCancellationFuture;

use super::DatabaseClock;

pin_project_lite::pin_project! {
    /// Sleeps until the database's clock reaches `at`, re-planned whenever the estimate
    /// moves; resolves to false if the stop token is cancelled first (checked first).
    ///
    /// Written by hand rather than as a `select!` in a loop: each of 10,000 idle jobs' tasks
    /// holds one while it sleeps, and the macro's copies of the arguments, its poll closure and
    /// flags made it 328 bytes, against 272 here; with it the job loop's task fits tokio's
    /// 512-byte cell (see `idle_cost`).
    #[must_use = "futures do nothing unless polled"]
    pub(crate) struct SleepUntil<'a> {
        clock: &'a DatabaseClock,
        at: DateTime<Utc>,
        #[pin]
        stopped: WaitForCancellationFuture<'a>,
        #[pin]
        sleep: Sleep,
        // Made before the deadline it guards is read: an estimate moved after that wakes it,
        // even before its first poll (a `Notified` sees `notify_waiters` from its creation).
        #[pin]
        replanned: Notified<'a>,
    }
}

impl<'a> SleepUntil<'a> {
    pub(super) fn new(
        clock: &'a DatabaseClock,
        at: DateTime<Utc>,
        stopped: WaitForCancellationFuture<'a>,
    ) -> Self {
        let replanned = clock.shared.replan.notified();
        let sleep = tokio::time::sleep_until(clock.instant_at(at));
        SleepUntil {
            clock,
            at,
            stopped,
            sleep,
            replanned,
        }
    }
}

impl Future for SleepUntil<'_> {
    type Output = bool;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let mut this = self.project();
        loop {
            if this.stopped.as_mut().poll(cx).is_ready() {
                return Poll::Ready(false);
            }
            if this.sleep.as_mut().poll(cx).is_ready() {
                return Poll::Ready(true);
            }
            if this.replanned.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // The estimate moved: wait for its next move, then read the deadline again.
            this.replanned.set(this.clock.shared.replan.notified());
            this.sleep.as_mut().reset(this.clock.instant_at(*this.at));
        }
    }
}
