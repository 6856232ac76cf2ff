//! When a job fires: cron in a zone, fixed rate aligned to the epoch, or fixed delay.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, DurationRound, Utc};
use lock_trigger::{Cron, Tz};

use crate::{FireSlot, LockError};

/// When a job fires.
///
/// - [`Trigger::cron`]: Spring's six-field cron dialect, evaluated on the wall clock of a zone
///   (UTC unless [`in_zone`](Trigger::in_zone)), DST-correct; each fire's slot is its
///   scheduled instant.
/// - [`Trigger::fixed_rate`]: every period, with slots aligned to the Unix epoch, so every
///   instance computes the same slots whenever it started.
/// - [`Trigger::fixed_delay`]: a pause after each run ends; fires have no slot, so the lock is
///   plain mutual exclusion.
///
/// ```
/// use lock_core::Trigger;
/// use std::time::Duration;
///
/// let nightly = Trigger::cron("0 5 1 * * *")?.in_zone("Asia/Shanghai")?;
/// let every_5s = Trigger::fixed_rate(Duration::from_secs(5))?;
/// let after_each = Trigger::fixed_delay(Duration::from_secs(5))?.with_initial_delay(Duration::from_secs(1));
/// assert!(Trigger::cron("* * * * *").is_err()); // five fields: the seconds field is missing
/// # let _ = (nightly, every_5s, after_each);
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone)]
pub struct Trigger {
    kind: Kind,
    initial_delay: Duration,
}

#[derive(Clone)]
enum Kind {
    Cron {
        expr: Arc<str>,
        cron: Arc<Cron>,
        zone: Tz,
    },
    FixedRate(Duration),
    FixedDelay(Duration),
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Cron { expr, zone, .. } => write!(f, "cron `{expr}` in {zone}")?,
            Kind::FixedRate(period) => write!(f, "fixed rate {period:?}")?,
            Kind::FixedDelay(delay) => write!(f, "fixed delay {delay:?}")?,
        }
        if !self.initial_delay.is_zero() {
            write!(f, " after {:?}", self.initial_delay)?;
        }
        Ok(())
    }
}

fn invalid(what: &str, error: impl fmt::Display) -> LockError {
    LockError::InvalidConfiguration(format!("{what}: {error}"))
}

impl Trigger {
    /// A cron trigger in UTC. Fails with the parser's explanation for an invalid expression.
    pub fn cron(expr: &str) -> Result<Self, LockError> {
        let cron =
            lock_trigger::parse_cron(expr).map_err(|e| invalid(&format!("cron `{expr}`"), e))?;
        Ok(Trigger {
            kind: Kind::Cron {
                expr: expr.into(),
                cron: Arc::new(cron),
                zone: Tz::UTC,
            },
            initial_delay: Duration::ZERO,
        })
    }

    /// Evaluates a cron trigger on the wall clock of an IANA zone.
    ///
    /// ```
    /// # use lock_core::Trigger;
    /// assert!(Trigger::cron("0 0 9 * * MON-FRI")?.in_zone("Europe/Berlin").is_ok());
    /// assert!(Trigger::cron("0 0 9 * * *")?.in_zone("Europe/Atlantis").is_err());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn in_zone(mut self, zone: &str) -> Result<Self, LockError> {
        let parsed = lock_trigger::parse_zone(zone).map_err(|e| invalid("zone", e))?;
        match &mut self.kind {
            Kind::Cron { zone, .. } => *zone = parsed,
            _ => return Err(invalid("zone", "only a cron trigger has a zone")),
        }
        Ok(self)
    }

    /// Every `period`, slots at whole multiples of `period` since the Unix epoch.
    pub fn fixed_rate(period: Duration) -> Result<Self, LockError> {
        if period.as_millis() == 0 {
            return Err(invalid("fixed_rate", "the period must be at least 1 ms"));
        }
        Ok(Trigger {
            kind: Kind::FixedRate(period),
            initial_delay: Duration::ZERO,
        })
    }

    /// `delay` after each run ends (slot-less).
    pub fn fixed_delay(delay: Duration) -> Result<Self, LockError> {
        Ok(Trigger {
            kind: Kind::FixedDelay(delay),
            initial_delay: Duration::ZERO,
        })
    }

    /// No fire earlier than `delay` after the scheduler starts.
    #[must_use]
    pub fn with_initial_delay(mut self, delay: Duration) -> Self {
        self.initial_delay = delay;
        self
    }

    /// The delay before the first fire.
    pub fn initial_delay(&self) -> Duration {
        self.initial_delay
    }

    /// The pause between runs for a fixed-delay trigger; `None` for slotted triggers.
    pub(crate) fn fixed_delay_pause(&self) -> Option<Duration> {
        match self.kind {
            Kind::FixedDelay(delay) => Some(delay),
            _ => None,
        }
    }

    /// The first slot strictly after `after` (cron, fixed rate); `None` for fixed-delay
    /// triggers and for a cron expression that never fires again.
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use lock_core::Trigger;
    /// use std::time::Duration;
    ///
    /// let rate = Trigger::fixed_rate(Duration::from_secs(10))?;
    /// let after = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 3).unwrap();
    /// assert_eq!(rate.next_slot(after).unwrap().instant(), Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 10).unwrap());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn next_slot(&self, after: DateTime<Utc>) -> Option<FireSlot> {
        match &self.kind {
            Kind::Cron { cron, zone, .. } => {
                lock_trigger::next_fire(cron, *zone, after).map(FireSlot::new)
            }
            Kind::FixedRate(period) => {
                let period = i64::try_from(period.as_millis()).ok()?;
                let next = (after.timestamp_millis().div_euclid(period) + 1).checked_mul(period)?;
                FireSlot::from_unix_millis(next)
            }
            Kind::FixedDelay(_) => None,
        }
    }

    /// The most recent slot at or before `at` (used by integrations that are told "now" rather
    /// than the scheduled instant).
    pub fn slot_at_or_before(&self, at: DateTime<Utc>) -> Option<FireSlot> {
        match &self.kind {
            Kind::Cron { cron, zone, .. } => {
                // croner keeps sub-second parts; slots are whole seconds.
                let at = at
                    .duration_trunc(chrono::TimeDelta::seconds(1))
                    .unwrap_or(at)
                    .with_timezone(zone);
                cron.find_previous_occurrence(&at, true)
                    .ok()
                    .map(|t| FireSlot::new(t.with_timezone(&Utc)))
            }
            Kind::FixedRate(period) => {
                let period = i64::try_from(period.as_millis()).ok()?;
                FireSlot::from_unix_millis(at.timestamp_millis().div_euclid(period) * period)
            }
            Kind::FixedDelay(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn fixed_rate_slots_are_epoch_aligned() {
        let rate = Trigger::fixed_rate(Duration::from_millis(1500)).unwrap();
        let at = Utc.timestamp_millis_opt(1_000_000_000_100).unwrap();
        let next = rate.next_slot(at).unwrap();
        assert_eq!(next.unix_millis() % 1500, 0);
        assert!(next.instant() > at && next.unix_millis() - at.timestamp_millis() <= 1500);
        // Exactly on a slot: the next one, not the same.
        assert_eq!(
            rate.next_slot(next.instant()).unwrap().unix_millis(),
            next.unix_millis() + 1500
        );
        assert_eq!(rate.slot_at_or_before(next.instant()).unwrap(), next);
    }

    #[test]
    fn cron_slot_at_or_before_is_inclusive() {
        let cron = Trigger::cron("*/10 * * * * *").unwrap();
        let at = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 20).unwrap();
        assert_eq!(cron.slot_at_or_before(at).unwrap().instant(), at);
        assert_eq!(
            cron.slot_at_or_before(at + chrono::TimeDelta::milliseconds(900))
                .unwrap()
                .instant(),
            at
        );
    }
}
