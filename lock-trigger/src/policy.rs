//! What happens around a slot's run: the misfire policy (what a missed slot becomes), the retry
//! plan (how a failed run is tried again) and the run timeout's grace. The macros check the
//! values with these at compile time, the scheduler applies them at run time, so both read
//! one definition.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What a slot that no instance ran becomes (every instance was down, or none could reach the
/// database at the slot).
///
/// ```
/// use lock_trigger::MisfirePolicy;
/// assert_eq!("fire_once".parse::<MisfirePolicy>(), Ok(MisfirePolicy::FireOnce));
/// assert_eq!(MisfirePolicy::CatchUp.as_str(), "catch_up");
/// assert_eq!(MisfirePolicy::default(), MisfirePolicy::Skip);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MisfirePolicy {
    /// A missed slot does not run (the next slot does, as usual).
    #[default]
    Skip,
    /// The latest missed slot runs once, as soon as an instance can run it; older missed slots
    /// are coalesced into it.
    FireOnce,
    /// Every missed slot runs once, oldest first (at most `misfire_max` of them, the most
    /// recent ones).
    CatchUp,
}

/// The values of `misfire`, as written.
pub const MISFIRE_POLICIES: &[&str] = &["skip", "fire_once", "catch_up"];

/// How many missed slots `catch_up` runs at most when `misfire_max` is not given.
pub const DEFAULT_MISFIRE_MAX: u32 = 10;

/// The largest `misfire_max` accepted.
pub const MAX_MISFIRE_MAX: u32 = 1000;

impl MisfirePolicy {
    /// As written in `#[scheduled(misfire = "..")]`.
    pub const fn as_str(self) -> &'static str {
        match self {
            MisfirePolicy::Skip => "skip",
            MisfirePolicy::FireOnce => "fire_once",
            MisfirePolicy::CatchUp => "catch_up",
        }
    }
}

impl fmt::Display for MisfirePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for MisfirePolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "skip" => Ok(MisfirePolicy::Skip),
            "fire_once" => Ok(MisfirePolicy::FireOnce),
            "catch_up" => Ok(MisfirePolicy::CatchUp),
            other => Err(format!(
                "unknown misfire policy `{other}`; expected one of `skip`, `fire_once`, `catch_up`"
            )),
        }
    }
}

/// What a fire does when it finds the job's previous run still holding the lock, on any
/// instance (`#[scheduler_lock(.., overlap = "..")]`).
///
/// ```
/// use lock_trigger::Overlap;
/// assert_eq!("queue".parse::<Overlap>(), Ok(Overlap::Queue));
/// assert_eq!(Overlap::default(), Overlap::Skip);
/// assert!("cover".parse::<Overlap>().unwrap_err().contains("`skip`, `queue`, `replace`"));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Overlap {
    /// The fire does not run (the default; ShedLock's behaviour).
    #[default]
    Skip,
    /// The fire runs once, right after the running one ends, on whichever instance gets the
    /// lock; at most one waits, and later fires coalesce into it.
    Queue,
    /// The running body is told to stop (its `cancelled()` resolves), and the fire runs once
    /// the lock is released, or at the running lease's end.
    Replace,
}

/// The values of `overlap`, as written.
pub const OVERLAP_POLICIES: &[&str] = &["skip", "queue", "replace"];

impl Overlap {
    /// As written in `#[scheduler_lock(overlap = "..")]`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Queue => "queue",
            Overlap::Replace => "replace",
        }
    }
}

impl fmt::Display for Overlap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Overlap {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "skip" => Ok(Overlap::Skip),
            "queue" => Ok(Overlap::Queue),
            "replace" => Ok(Overlap::Replace),
            other => Err(format!(
                "unknown overlap policy `{other}`; expected one of `skip`, `queue`, `replace`"
            )),
        }
    }
}

/// The largest `pause_after_failures` accepted.
pub const MAX_PAUSE_AFTER_FAILURES: u32 = 1000;

/// The most retries a run may have.
pub const MAX_RETRIES: u32 = 100;

/// The longest pause between two attempts: the doubling stops here (or at `retry_backoff`
/// itself, if that is longer).
pub const MAX_RETRY_DELAY: Duration = Duration::from_secs(10 * 60);

/// The pause before attempt `attempt + 1` (after attempt `attempt` failed, `attempt` from 1),
/// before jitter: `backoff * 2^(attempt-1)`, capped at `max(backoff, MAX_RETRY_DELAY)`. Jitter
/// then takes up to a quarter off ([`jittered`]), so each pause is at least 3/4 of this and
/// the pauses still grow (the next one's lower bound, 3/2 of this, is above this one's upper
/// bound).
///
/// ```
/// use lock_trigger::retry_delay;
/// use std::time::Duration;
/// let s = Duration::from_secs;
/// assert_eq!(retry_delay(s(10), 1), s(10));
/// assert_eq!(retry_delay(s(10), 3), s(40));
/// assert_eq!(retry_delay(s(10), 30), s(600)); // capped at 10 minutes
/// assert_eq!(retry_delay(s(3600), 5), s(3600)); // a longer backoff is its own cap
/// ```
pub fn retry_delay(backoff: Duration, attempt: u32) -> Duration {
    let cap = backoff.max(MAX_RETRY_DELAY);
    let factor = 1u32
        .checked_shl(attempt.saturating_sub(1))
        .unwrap_or(u32::MAX);
    backoff.checked_mul(factor).map_or(cap, |d| d.min(cap))
}

/// `delay` less a jitter of up to a quarter of it; `unit` in `[0, 1)` picks how much.
///
/// ```
/// use std::time::Duration;
/// let d = Duration::from_secs(4);
/// assert_eq!(lock_trigger::jittered(d, 0.0), d);
/// assert_eq!(lock_trigger::jittered(d, 0.5), Duration::from_millis(3500));
/// ```
pub fn jittered(delay: Duration, unit: f64) -> Duration {
    delay.mul_f64(1.0 - 0.25 * unit.clamp(0.0, 1.0))
}

/// The longest the pauses of a retry plan add up to: the sum of [`retry_delay`] over the
/// `retries` pauses (jitter only shortens them).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(lock_trigger::retry_plan_total(3, Duration::from_secs(10)), Duration::from_secs(70));
/// assert_eq!(lock_trigger::retry_plan_total(0, Duration::from_secs(10)), Duration::ZERO);
/// ```
pub fn retry_plan_total(retries: u32, backoff: Duration) -> Duration {
    (1..=retries).fold(Duration::ZERO, |total, attempt| {
        total.saturating_add(retry_delay(backoff, attempt))
    })
}

/// Why a retry plan does not fit in `lock_at_most_for` without keep-alive, or `None` when it
/// does: the pauses alone must end before the lease does, or another instance could take the
/// lock (and run a later slot) while this one still retries.
///
/// ```
/// use std::time::Duration;
/// let s = Duration::from_secs;
/// assert!(lock_trigger::retry_plan_conflict(3, s(10), s(60)).is_some()); // 70 s of pauses
/// assert!(lock_trigger::retry_plan_conflict(2, s(10), s(60)).is_none()); // 30 s
/// ```
pub fn retry_plan_conflict(
    retries: u32,
    backoff: Duration,
    lock_at_most_for: Duration,
) -> Option<String> {
    let total = retry_plan_total(retries, backoff);
    (total >= lock_at_most_for).then(|| {
        format!(
            "{retries} retries with `retry_backoff` {} pause up to {} in all, which does not fit \
             in `lock_at_most_for` {} without keep-alive: the lease would end while the run \
             still retries; set `keep_alive = true`, a longer `lock_at_most_for`, or fewer \
             retries or a shorter backoff",
            humantime::format_duration(backoff),
            humantime::format_duration(total),
            humantime::format_duration(lock_at_most_for),
        )
    })
}

/// How long a body that ignores its cancellation after the run `timeout` may still run
/// before it is dropped: a tenth of the timeout, at least 1 s and at most 30 s.
///
/// ```
/// use lock_trigger::timeout_grace;
/// use std::time::Duration;
/// let s = Duration::from_secs;
/// assert_eq!(timeout_grace(s(5)), s(1));
/// assert_eq!(timeout_grace(s(120)), s(12));
/// assert_eq!(timeout_grace(s(3600)), s(30));
/// ```
pub fn timeout_grace(timeout: Duration) -> Duration {
    (timeout / 10).clamp(Duration::from_secs(1), Duration::from_secs(30))
}
