//! The arithmetic of the estimate: what one round trip says about the database's clock, and
//! which of two estimates to keep.
//!
//! Nothing here reads a clock: every instant is handed in, so the bounds can be checked with
//! made-up round trips.

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use tokio::time::Instant;

/// How fast the database's clock and this host's monotonic clock may drift apart, in parts per
/// million, for ageing an estimate: both run on quartz (about 50 ppm each at worst), and NTP
/// keeps a database server much closer than that.
pub(crate) const DRIFT_PPM: u64 = 100;

/// One round trip: sent at `sent`, answered at `received` (this host's monotonic clock), the
/// database reading `server` somewhere in between.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    pub(crate) sent: Instant,
    pub(crate) received: Instant,
    pub(crate) server: DateTime<Utc>,
}

impl Sample {
    pub(crate) fn round_trip(&self) -> Duration {
        self.received.saturating_duration_since(self.sent)
    }
}

/// The database's clock as a straight line through one monotonic instant: at `at` the database
/// read `database`, give or take `half_width`.
///
/// Why this is a bound and not a guess: the server read its clock after the request left and
/// before the reply came back, so the database time at the midpoint of the round trip is within
/// half the round trip of what it read, however the delay split between the two directions
/// (an asymmetric link moves the truth inside the interval, never out of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Estimate {
    at: Instant,
    database: DateTime<Utc>,
    half_width: Duration,
}

impl Estimate {
    /// The estimate one round trip gives: centred on the midpoint, half the round trip wide.
    pub(crate) fn from_sample(sample: &Sample) -> Self {
        let half = sample.round_trip() / 2;
        Estimate {
            at: sample.sent + half,
            database: sample.server,
            half_width: half,
        }
    }

    /// The best of a round of samples: the one with the shortest round trip, whose interval is
    /// the narrowest (a slow round trip is one that queued somewhere, and says least).
    pub(crate) fn best_of(samples: &[Sample]) -> Option<Self> {
        samples
            .iter()
            .min_by_key(|sample| sample.round_trip())
            .map(Self::from_sample)
    }

    /// The database's time at monotonic instant `at`.
    pub(crate) fn database_at(&self, at: Instant) -> DateTime<Utc> {
        if at >= self.at {
            self.database + delta(at - self.at)
        } else {
            self.database - delta(self.at - at)
        }
    }

    /// The monotonic instant at which the database's clock reaches `database`.
    pub(crate) fn instant_at(&self, database: DateTime<Utc>) -> Instant {
        let ahead = database - self.database;
        match ahead.to_std() {
            Ok(ahead) => self
                .at
                .checked_add(ahead)
                // Centuries ahead: as good as never (tokio's own far future is 30 years).
                .unwrap_or_else(|| self.at + Duration::from_secs(30 * 365 * 86_400)),
            Err(_) => {
                let behind = (-ahead).to_std().unwrap_or(Duration::MAX);
                self.at.checked_sub(behind).unwrap_or(self.at)
            }
        }
    }

    /// The error bound at monotonic instant `now`: half the round trip, plus what the two clocks
    /// may have drifted apart since (see [`DRIFT_PPM`]).
    pub(crate) fn error_at(&self, now: Instant) -> Duration {
        let age = now.saturating_duration_since(self.at);
        self.half_width + drift_over(age)
    }

    /// Whether `newer` could describe the same database clock as `self` (their intervals,
    /// `self`'s aged to `newer`'s instant, overlap). When not, the database's clock was stepped
    /// (or this host's monotonic clock was), and `self` is worthless.
    fn agrees_with(&self, newer: &Estimate) -> bool {
        let predicted = self.database_at(newer.at);
        let gap = (predicted - newer.database)
            .abs()
            .to_std()
            .unwrap_or(Duration::MAX);
        gap <= self.error_at(newer.at) + newer.half_width
    }

    /// Which estimate to keep after a new round: `newer`, unless `self` agrees with it and is
    /// still the narrower one at `newer`'s instant (a quiet round trip measured earlier beats a
    /// busy one measured now, until drift has widened it).
    pub(crate) fn refined_by(self, newer: Estimate) -> Estimate {
        if self.agrees_with(&newer) && self.error_at(newer.at) < newer.half_width {
            self
        } else {
            newer
        }
    }

    /// How far the database time this estimate gives at `now` is from `other`'s.
    pub(crate) fn distance_at(&self, other: &Estimate, now: Instant) -> Duration {
        (self.database_at(now) - other.database_at(now))
            .abs()
            .to_std()
            .unwrap_or(Duration::MAX)
    }
}

fn delta(d: Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

fn drift_over(age: Duration) -> Duration {
    // age * DRIFT_PPM / 1e6, in nanoseconds without overflow for any age a process lives.
    Duration::from_nanos(
        u64::try_from(age.as_nanos() * u128::from(DRIFT_PPM) / 1_000_000).unwrap_or(u64::MAX),
    )
}
