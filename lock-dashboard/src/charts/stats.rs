//! The figures the charts draw and print: percentiles, success rates, time buckets.
//!
//! Decisions, and why:
//! - **Nearest rank**, the definition the benches use (`test_support::stats`): the `p`th
//!   percentile of `n` sorted values is the value at rank `ceil(p * n / 100)` (1-based, at
//!   least 1). Every figure shown is a value that was measured, never an interpolation, and
//!   the arithmetic is on integers (no rounding to argue about).
//! - **Success rate**: succeeded ÷ runs that ended. A run still going has no outcome yet and a
//!   skipped run did not run (its parent failed: the parent's failure, not this job's); both
//!   are left out. A missed, cancelled or unfinished run counts as not succeeded.

use chrono::{DateTime, TimeDelta, Utc};
use lock_cluster::RunState;

/// The `pct`th percentile (0 to 100) of `sorted` (ascending) by nearest rank; None when empty.
pub(crate) fn percentile(sorted: &[i64], pct: u32) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = (n * pct.min(100) as usize).div_ceil(100).clamp(1, n);
    Some(sorted[rank - 1])
}

/// The spread of a set of values: how many, p50, p95 and the largest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spread {
    pub(crate) count: usize,
    pub(crate) p50: i64,
    pub(crate) p95: i64,
    pub(crate) max: i64,
}

impl Spread {
    /// The spread of `sorted` (ascending); None when empty.
    pub(crate) fn of_sorted(sorted: &[i64]) -> Option<Spread> {
        Some(Spread {
            count: sorted.len(),
            p50: percentile(sorted, 50)?,
            p95: percentile(sorted, 95)?,
            max: *sorted.last()?,
        })
    }
}

/// Whether a run counts in the success rate, and as what: None for one that is left out.
pub(crate) fn succeeded(outcome: RunState) -> Option<bool> {
    match outcome {
        RunState::Running | RunState::Skipped => None,
        RunState::Succeeded => Some(true),
        _ => Some(false),
    }
}

/// Succeeded runs of the runs counted (see the module's decisions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rate {
    pub(crate) succeeded: usize,
    pub(crate) counted: usize,
}

impl Rate {
    /// The rate of `outcomes`.
    pub(crate) fn of(outcomes: impl IntoIterator<Item = RunState>) -> Rate {
        let mut rate = Rate::default();
        for outcome in outcomes {
            rate.add(outcome);
        }
        rate
    }

    pub(crate) fn add(&mut self, outcome: RunState) {
        if let Some(ok) = succeeded(outcome) {
            self.counted += 1;
            self.succeeded += usize::from(ok);
        }
    }

    /// The rate in per mille (None when no run counted): integer, so 2 of 3 is 666, shown
    /// as 66.6 %.
    pub(crate) fn per_mille(self) -> Option<u32> {
        (self.counted > 0).then(|| (self.succeeded * 1000 / self.counted) as u32)
    }

    /// `66.6 % (2 of 3)`, or `no ended run`.
    pub(crate) fn text(self) -> String {
        match self.per_mille() {
            Some(pm) => format!(
                "{}.{} % ({} of {})",
                pm / 10,
                pm % 10,
                self.succeeded,
                self.counted
            ),
            None => "no ended run".to_owned(),
        }
    }
}

/// `count` equal buckets from `first` to `last` (both included): the start of each and its
/// width. The last bucket ends just after `last`, so every instant of the span is in one.
pub(crate) fn buckets(
    first: DateTime<Utc>,
    last: DateTime<Utc>,
    count: usize,
) -> (Vec<DateTime<Utc>>, TimeDelta) {
    let count = count.max(1);
    let span_ms = (last - first).num_milliseconds().max(0) + 1;
    let width_ms = ((span_ms + count as i64 - 1) / count as i64).max(1);
    let width = TimeDelta::milliseconds(width_ms);
    let starts = (0..count as i32).map(|i| first + width * i).collect();
    (starts, width)
}

/// The bucket `at` falls in (clamped to the buckets).
pub(crate) fn bucket_of(
    at: DateTime<Utc>,
    first: DateTime<Utc>,
    width: TimeDelta,
    count: usize,
) -> usize {
    let offset = (at - first).num_milliseconds().max(0);
    ((offset / width.num_milliseconds().max(1)) as usize).min(count.saturating_sub(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn percentiles_are_nearest_rank() {
        let hundred: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&hundred, 50), Some(50));
        assert_eq!(percentile(&hundred, 95), Some(95));
        assert_eq!(percentile(&hundred, 100), Some(100));
        assert_eq!(percentile(&hundred, 0), Some(1));
        // 10 values: rank ceil(9.5) = 10 for p95, ceil(5) = 5 for p50.
        let ten: Vec<i64> = (1..=10).map(|v| v * 10).collect();
        assert_eq!(percentile(&ten, 50), Some(50));
        assert_eq!(percentile(&ten, 95), Some(100));
        // 21 values: rank ceil(19.95) = 20 for p95, ceil(10.5) = 11 for p50.
        let odd: Vec<i64> = (1..=21).collect();
        assert_eq!(percentile(&odd, 95), Some(20));
        assert_eq!(percentile(&odd, 50), Some(11));
        assert_eq!(percentile(&[7], 95), Some(7));
        assert_eq!(percentile(&[], 50), None);
        // A measured value, never one in between.
        assert_eq!(percentile(&[10, 1000], 50), Some(10));
        assert_eq!(
            Spread::of_sorted(&[1, 2, 3, 40]),
            Some(Spread {
                count: 4,
                p50: 2,
                p95: 40,
                max: 40
            })
        );
    }

    #[test]
    fn the_success_rate_counts_ended_runs_that_ran() {
        use RunState::*;
        let rate = Rate::of([Succeeded, Failed, Running, Skipped, Succeeded, Missed]);
        assert_eq!(
            rate,
            Rate {
                succeeded: 2,
                counted: 4
            }
        );
        assert_eq!(rate.per_mille(), Some(500));
        assert_eq!(rate.text(), "50.0 % (2 of 4)");
        assert_eq!(
            Rate::of([Succeeded, Succeeded, Panicked]).text(),
            "66.6 % (2 of 3)"
        );
        assert_eq!(Rate::of([Running, Skipped]).text(), "no ended run");
    }

    #[test]
    fn buckets_cover_the_span_and_every_instant_falls_in_one() {
        let first = Utc.with_ymd_and_hms(2026, 1, 2, 3, 0, 0).unwrap();
        let last = first + TimeDelta::seconds(99);
        let (starts, width) = buckets(first, last, 10);
        assert_eq!(starts.len(), 10);
        assert_eq!(starts[0], first);
        assert!(
            starts[9] + width > last,
            "the last bucket holds the last run"
        );
        assert_eq!(bucket_of(first, first, width, 10), 0);
        assert_eq!(bucket_of(last, first, width, 10), 9);
        assert_eq!(
            bucket_of(first + TimeDelta::seconds(50), first, width, 10),
            5
        );
        // One instant: one bucket of a millisecond, and every run is in the first.
        let (starts, width) = buckets(first, first, 10);
        assert_eq!(width, TimeDelta::milliseconds(1));
        assert_eq!(bucket_of(first, first, width, starts.len()), 0);
    }
}
