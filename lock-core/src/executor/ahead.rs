//! How far ahead of its slot a scheduled fire asks for its lock: the configured acquire-ahead
//! as a floor, grown with how long the provider took to decide this executor's recent
//! acquires.
//!
//! Decisions, and why:
//! - **Grown from what was measured, not configured by guess.** A burst's grants take what the
//!   database needs for it: a few milliseconds for a hundred jobs, 100-300 ms for 2,500 jobs
//!   per instance on a loaded 2-core PostgreSQL (BENCHMARKS.md, bursts). A fixed window either
//!   starts such bodies late or asks every small deployment's locks earlier than it needs.
//!   The executor keeps the slowest answer of the last one to two minutes and asks that much
//!   ahead, and half again, with the configured value as the floor.
//! - **Asking too early costs little, too late costs lag**, so the memory is long (a burst a
//!   minute still sees the previous one's answer) and the growth is by the slowest answer, not
//!   an average. What asking early costs is bounded where it always was: the job loop asks at
//!   most half the lease and half the gap back to the previous slot ahead, and never more than
//!   half of `max_slot_lead`; and the growth itself stops at [`MAX_GROWN_AHEAD`].
//! - **Only answers count**: an acquire that failed (a timeout, a connection gone) says nothing
//!   about how long a decision takes, and the misfire recovery handles it.
//! - **Lock-free**: every slotted acquire records its answer's time; three atomics, no lock
//!   shared by a burst's thousands of fires.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How long one memory window lasts: the slowest answer is kept for one to two of them.
const WINDOW: Duration = Duration::from_secs(60);

/// The longest the measured answers make a scheduler's acquire-ahead (a longer configured one
/// stays as configured): a database that took seconds to answer once (a stall) does not have
/// every fire ask seconds early for the next minutes.
///
/// ```
/// assert_eq!(lock_core::MAX_GROWN_AHEAD, std::time::Duration::from_secs(1));
/// ```
pub const MAX_GROWN_AHEAD: Duration = Duration::from_secs(1);

/// The slowest acquire answer of the current and the previous window, in microseconds.
pub(super) struct AnswerTimes {
    base: Instant,
    /// The current window's number (time since `base` / `WINDOW`).
    window: AtomicU64,
    current: AtomicU64,
    previous: AtomicU64,
}

impl Default for AnswerTimes {
    fn default() -> Self {
        AnswerTimes {
            base: Instant::now(),
            window: AtomicU64::new(0),
            current: AtomicU64::new(0),
            previous: AtomicU64::new(0),
        }
    }
}

impl AnswerTimes {
    fn window_at(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.base).as_secs() / WINDOW.as_secs()
    }

    /// Records that an acquire sent at `sent` was answered at `now`.
    pub(super) fn record(&self, sent: Instant, now: Instant) {
        let took =
            u64::try_from(now.saturating_duration_since(sent).as_micros()).unwrap_or(u64::MAX);
        let at = self.window_at(now);
        let seen = self.window.load(Ordering::Acquire);
        if at > seen
            && self
                .window
                .compare_exchange(seen, at, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            // This call moved the window on: the current becomes the previous (none when a
            // whole window passed without an answer).
            let ended = self.current.swap(0, Ordering::AcqRel);
            let kept = if at == seen + 1 { ended } else { 0 };
            self.previous.store(kept, Ordering::Release);
        }
        self.current.fetch_max(took, Ordering::AcqRel);
    }

    /// The slowest answer of the last one to two windows at `now`.
    pub(super) fn slowest(&self, now: Instant) -> Duration {
        let at = self.window_at(now);
        let seen = self.window.load(Ordering::Acquire);
        let (current, previous) = (
            self.current.load(Ordering::Acquire),
            self.previous.load(Ordering::Acquire),
        );
        let micros = match at.saturating_sub(seen) {
            0 => current.max(previous),
            // No answer yet in this window: the last window's is the previous one.
            1 => current,
            _ => 0,
        };
        Duration::from_micros(micros)
    }

    /// How far ahead to ask: `floor` (the configured acquire-ahead; zero asks at the slot and
    /// stays zero), or the slowest recent answer and half again, whichever is longer.
    pub(super) fn ahead(&self, floor: Duration, now: Instant) -> Duration {
        if floor.is_zero() {
            return floor;
        }
        let slowest = self.slowest(now);
        floor.max((slowest + slowest / 2).min(MAX_GROWN_AHEAD))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOOR: Duration = Duration::from_millis(100);

    #[tokio::test(start_paused = true)]
    async fn asks_ahead_by_the_slowest_recent_answer_and_half_again() {
        let times = AnswerTimes::default();
        let now = Instant::now();
        assert_eq!(
            times.ahead(FLOOR, now),
            FLOOR,
            "nothing measured: the floor"
        );
        times.record(now, now + Duration::from_millis(20));
        assert_eq!(
            times.ahead(FLOOR, now),
            FLOOR,
            "fast answers keep the floor"
        );
        times.record(now, now + Duration::from_millis(240));
        times.record(now, now + Duration::from_millis(90));
        assert_eq!(
            times.ahead(FLOOR, now + Duration::from_millis(240)),
            Duration::from_millis(360),
            "the slowest answer and half again"
        );
        assert_eq!(
            times.ahead(Duration::ZERO, now),
            Duration::ZERO,
            "at the slot stays at the slot"
        );
        times.record(now, now + Duration::from_secs(5));
        assert_eq!(
            times.ahead(FLOOR, now),
            MAX_GROWN_AHEAD,
            "a stall grows it to the cap"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn forgets_a_slow_answer_after_one_to_two_windows() {
        let times = AnswerTimes::default();
        let start = Instant::now();
        times.record(start, start + Duration::from_millis(300));
        // The next window remembers it, with or without answers of its own.
        tokio::time::advance(WINDOW).await;
        let now = Instant::now();
        assert_eq!(times.slowest(now), Duration::from_millis(300));
        times.record(now, now + Duration::from_millis(10));
        assert_eq!(times.slowest(now), Duration::from_millis(300));
        // The one after only its own.
        tokio::time::advance(WINDOW).await;
        let now = Instant::now();
        times.record(now, now + Duration::from_millis(50));
        assert_eq!(times.slowest(now), Duration::from_millis(50));
        // Two windows without an answer: nothing is remembered.
        tokio::time::advance(WINDOW * 2).await;
        assert_eq!(times.slowest(Instant::now()), Duration::ZERO);
    }
}
