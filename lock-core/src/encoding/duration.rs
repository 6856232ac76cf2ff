//! The one rounding rule for durations on their way to SQL.
//!
//! Every lock table stores times with millisecond precision (`TIMESTAMP(3)`, `DATETIME(3)`,
//! SQLite's `%f`), and every provider takes "now" from the database already truncated to the
//! millisecond. A duration is therefore sent as whole milliseconds, and the rule is:
//!
//! - **rounded up** to the next whole millisecond, so a lease is never shorter than asked (and
//!   `lock_at_least_for` never holds for less);
//! - a **lease** (`lock_at_most_for`, on acquire and extend) is **at least one millisecond**:
//!   a lease of 0 ms would end at the instant it is taken, i.e. never be held;
//!   `lock_at_least_for` may be 0 (release ends the lease now);
//! - **capped** at [`MAX_INTERVAL`], so that `now + duration` stays a valid timestamp in every
//!   database.
//!
//! Before this rule the providers disagreed: PostgreSQL rounded up, MySQL clamped to at least
//! 1 ms but let the column round sub-millisecond parts, SQLite truncated (a 0.5 ms lease was 0).

use std::time::Duration;

/// The longest duration written to SQL: the vocabulary's one cap (1000 years), the same limit
/// the macros enforce at compile time; longer ones are cut to it, so that `now + duration`
/// stays far inside every database's timestamp range.
pub use lock_trigger::MAX_DURATION as MAX_INTERVAL;

/// The smallest unit of the lock table's time columns.
pub const COLUMN_UNIT: Duration = Duration::from_millis(1);

/// A lease length (`lock_at_most_for`, on acquire and extend) as whole milliseconds for SQL:
/// rounded up, at least 1, at most [`MAX_INTERVAL`].
///
/// ```
/// use lock_core::encoding::lease_millis;
/// use std::time::Duration;
///
/// assert_eq!(lease_millis(Duration::from_millis(1500)), 1500);
/// assert_eq!(lease_millis(Duration::from_micros(1001)), 2); // never shorter than asked
/// assert_eq!(lease_millis(Duration::from_micros(1)), 1);
/// assert_eq!(lease_millis(Duration::ZERO), 1); // never 0
/// ```
pub fn lease_millis(lease: Duration) -> i64 {
    round_up_millis(lease).max(1)
}

/// A `lock_at_least_for` as whole milliseconds for SQL: rounded up, at most [`MAX_INTERVAL`];
/// 0 stays 0 (the release ends the lease now).
///
/// ```
/// use lock_core::encoding::at_least_millis;
/// use std::time::Duration;
///
/// assert_eq!(at_least_millis(Duration::ZERO), 0);
/// assert_eq!(at_least_millis(Duration::from_nanos(1)), 1);
/// assert_eq!(at_least_millis(Duration::from_secs(10)), 10_000);
/// ```
pub fn at_least_millis(at_least: Duration) -> i64 {
    round_up_millis(at_least)
}

/// Whole milliseconds, rounded up, capped at [`MAX_INTERVAL`].
fn round_up_millis(d: Duration) -> i64 {
    let d = d.min(MAX_INTERVAL);
    let ms = d.as_millis() + u128::from(!d.subsec_nanos().is_multiple_of(1_000_000));
    // The cap is about 3.2e13 ms: always fits.
    i64::try_from(ms).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_up_and_cap() {
        assert_eq!(lease_millis(Duration::from_millis(1500)), 1500);
        assert_eq!(lease_millis(Duration::from_micros(1)), 1);
        assert_eq!(lease_millis(Duration::from_micros(1001)), 2);
        assert_eq!(at_least_millis(Duration::ZERO), 0);
        assert_eq!(lease_millis(Duration::ZERO), 1);
        assert_eq!(lease_millis(Duration::MAX), MAX_INTERVAL.as_millis() as i64);
        assert_eq!(
            at_least_millis(Duration::MAX),
            MAX_INTERVAL.as_millis() as i64
        );
    }
}
