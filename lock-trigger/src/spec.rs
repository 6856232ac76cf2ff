//! The vocabulary: what a trigger is and how a lock is held, as constants that `lock-macros`
//! emits and `lock-core` reads, with the limits and checks both sides apply.
//!
//! A trigger kind is described here once: its variant of [`TriggerKind`], how it is checked,
//! when it fires ([`TriggerKind::next_slot`]) and how it is shown. The macros build it from
//! their key table; the scheduler matches on it (slotted or after-run).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::wall_clock::previous_fire;
use crate::{
    Cron, DEFAULT_MISFIRE_MAX, MisfirePolicy, TriggerError, Tz, next_fire, parse_cron, parse_zone,
};

/// The longest lease or interval written to a database (1000 years): providers cut longer ones
/// to it, so that `now + lease` stays a valid timestamp in every backend.
///
/// ```
/// assert_eq!(lock_trigger::MAX_DURATION.as_secs() / (365 * 24 * 3600), 1000);
/// ```
pub const MAX_DURATION: Duration = Duration::from_secs(1000 * 365 * 24 * 3600);

/// A cron schedule as written in `#[scheduled(cron = .., zone = ..)]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CronSpec {
    /// The expression, Spring's six fields (see [`parse_cron`]).
    pub expr: &'static str,
    /// The IANA zone name as written; `None` is UTC.
    pub zone: Option<&'static str>,
}

/// A cron schedule parsed, ready to compute fires: the expression (kept for display), the
/// parsed form and the zone. Cloning shares both.
///
/// ```
/// let nightly = lock_trigger::CronSchedule::parse("0 5 1 * * *")?.in_zone("Asia/Shanghai")?;
/// assert_eq!(nightly.zone(), lock_trigger::Tz::Asia__Shanghai);
/// # Ok::<(), lock_trigger::TriggerError>(())
/// ```
#[derive(Clone, Debug)]
pub struct CronSchedule {
    expr: Arc<str>,
    cron: Arc<Cron>,
    zone: Tz,
}

impl CronSchedule {
    /// Parses `expr`, evaluated in UTC; the error names the expression.
    /// Every schedule of the same expression shares one parsed form (see `intern.rs`).
    pub fn parse(expr: &str) -> Result<Self, TriggerError> {
        let (expr, cron) = crate::intern::intern(expr, |expr| {
            parse_cron(expr).map_err(|e| e.context(&format!("cron `{expr}`")))
        })?;
        Ok(CronSchedule {
            expr,
            cron,
            zone: Tz::UTC,
        })
    }

    /// Whether `self` and `other` share one parsed form (the same expression, parsed once).
    ///
    /// ```
    /// use lock_trigger::CronSchedule;
    /// let a = CronSchedule::parse("0 0 9 * * MON-FRI")?;
    /// let b = CronSchedule::parse("0 0 9 * * MON-FRI")?;
    /// assert!(a.shares_parsed_form(&b));
    /// # Ok::<(), lock_trigger::TriggerError>(())
    /// ```
    pub fn shares_parsed_form(&self, other: &CronSchedule) -> bool {
        Arc::ptr_eq(&self.cron, &other.cron)
    }

    /// Evaluates the schedule on the wall clock of the IANA zone `zone`.
    pub fn in_zone(mut self, zone: &str) -> Result<Self, TriggerError> {
        self.zone = parse_zone(zone).map_err(|e| e.context("zone"))?;
        Ok(self)
    }

    /// The expression as written.
    pub fn expr(&self) -> &str {
        &self.expr
    }

    /// The zone whose wall clock the expression is evaluated on.
    pub fn zone(&self) -> Tz {
        self.zone
    }
}

/// What a trigger is. `C` is how a cron schedule is held: as written ([`CronSpec`], in a
/// `static` of the expansion) or parsed ([`CronSchedule`], at run time).
///
/// Cron and fixed rate are **slotted**: each fire has an instant every instance computes alike,
/// and it runs once per slot. Fixed delay is **after-run**: no slot, the lock is plain mutual
/// exclusion.
///
/// ```
/// use lock_trigger::{TriggerKind, TriggerSpec};
/// use std::time::Duration;
///
/// const EVERY_5S: TriggerSpec = TriggerSpec::new(TriggerKind::FixedRate {
///     period: Duration::from_secs(5),
/// });
/// let parsed = EVERY_5S.parse()?;
/// assert_eq!(parsed.to_string(), "fixed rate 5s");
/// # Ok::<(), lock_trigger::TriggerError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerKind<C = CronSpec> {
    /// Slotted: at each wall-clock time the expression matches; the slot is that instant.
    Cron(C),
    /// Slotted: every `period`, slots at whole multiples of it since the Unix epoch.
    FixedRate {
        /// The period, 1 ms at least.
        period: Duration,
    },
    /// After-run: `delay` after the previous run ended.
    FixedDelay {
        /// The pause between runs.
        delay: Duration,
    },
    /// After its parents: one run for each successful run of its parent jobs (all of them,
    /// for the same slot), with the parents' slot. The parents are named next to the
    /// trigger (`#[scheduled(after = ..)]`, `Trigger::after`); the kind itself has no timer.
    After,
}

/// When a job fires: its [`TriggerKind`] and how long after start the first fire may come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TriggerSpec<C = CronSpec> {
    /// What the trigger is.
    pub kind: TriggerKind<C>,
    /// No fire earlier than this after the scheduler starts.
    pub initial_delay: Duration,
    /// What a slot no instance ran becomes (slotted triggers only).
    pub misfire: MisfirePolicy,
    /// How old a missed slot may be and still run; `None`: one period of the trigger (the gap
    /// between its next two slots).
    pub misfire_grace: Option<Duration>,
    /// How many missed slots `catch_up` runs at most (the most recent ones).
    pub misfire_max: u32,
}

impl<C> TriggerSpec<C> {
    /// `kind`, with no initial delay and the misfire policy `skip`.
    pub const fn new(kind: TriggerKind<C>) -> Self {
        TriggerSpec {
            kind,
            initial_delay: Duration::ZERO,
            misfire: MisfirePolicy::Skip,
            misfire_grace: None,
            misfire_max: DEFAULT_MISFIRE_MAX,
        }
    }
}

impl TriggerSpec<CronSpec> {
    /// Checks every value and parses the cron schedule; the error says which value.
    pub fn parse(&self) -> Result<TriggerSpec<CronSchedule>, TriggerError> {
        let kind = match self.kind {
            TriggerKind::Cron(CronSpec { expr, zone }) => {
                let cron = CronSchedule::parse(expr)?;
                TriggerKind::Cron(match zone {
                    Some(zone) => cron.in_zone(zone)?,
                    None => cron,
                })
            }
            TriggerKind::FixedRate { period } => TriggerKind::FixedRate { period },
            TriggerKind::FixedDelay { delay } => TriggerKind::FixedDelay { delay },
            TriggerKind::After => TriggerKind::After,
        };
        kind.check()?;
        Ok(TriggerSpec {
            kind,
            initial_delay: self.initial_delay,
            misfire: self.misfire,
            misfire_grace: self.misfire_grace,
            misfire_max: self.misfire_max,
        })
    }
}

impl<C> TriggerKind<C> {
    /// The run-time checks of the values (a parsed cron schedule is valid already).
    pub fn check(&self) -> Result<(), TriggerError> {
        match self {
            TriggerKind::FixedRate { period } if period.as_millis() == 0 => Err(TriggerError(
                "fixed_rate: the period must be at least 1 ms".into(),
            )),
            TriggerKind::Cron(_)
            | TriggerKind::FixedRate { .. }
            | TriggerKind::FixedDelay { .. }
            | TriggerKind::After => Ok(()),
        }
    }
}

/// How a trigger's fires are timed: what the scheduler's loop dispatches on.
///
/// ```
/// use lock_trigger::{Firing, TriggerKind};
/// use std::time::Duration;
///
/// let delay = Duration::from_secs(5);
/// let kind: TriggerKind = TriggerKind::FixedDelay { delay };
/// assert_eq!(kind.firing(), Firing::AfterRun { delay });
/// let kind: TriggerKind = TriggerKind::FixedRate { period: delay };
/// assert_eq!(kind.firing(), Firing::Slotted { min_gap: delay });
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Firing {
    /// At instants the trigger computes ([`TriggerKind::next_slot`]); each is a slot that runs
    /// at most once across the cluster. No two slots are closer than `min_gap`.
    Slotted {
        /// A lower bound of the time between two slots.
        min_gap: Duration,
    },
    /// `delay` after the previous run ended; no slots.
    AfterRun {
        /// The pause between runs.
        delay: Duration,
    },
    /// No timer: each successful run of the parents starts one run, with their slot.
    AfterParents,
}

impl<C> TriggerKind<C> {
    /// Slotted or after-run, the one question the scheduler asks of a trigger's kind.
    pub const fn firing(&self) -> Firing {
        match self {
            // Cron slots are whole seconds apart.
            TriggerKind::Cron(_) => Firing::Slotted {
                min_gap: Duration::from_secs(1),
            },
            TriggerKind::FixedRate { period } => Firing::Slotted { min_gap: *period },
            TriggerKind::FixedDelay { delay } => Firing::AfterRun { delay: *delay },
            TriggerKind::After => Firing::AfterParents,
        }
    }
}

impl TriggerKind<CronSchedule> {
    /// The first slot strictly after `after`, in whole milliseconds (whole seconds for cron);
    /// `None` for an after-run trigger (and past the calendar's end: a parsed cron expression
    /// always fires again, see [`next_fire`]).
    pub fn next_slot(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            TriggerKind::Cron(schedule) => next_fire(&schedule.cron, schedule.zone, after),
            TriggerKind::FixedRate { period } => {
                let period = i64::try_from(period.as_millis()).ok()?;
                let next = (after.timestamp_millis().div_euclid(period) + 1).checked_mul(period)?;
                DateTime::from_timestamp_millis(next)
            }
            TriggerKind::FixedDelay { .. } | TriggerKind::After => None,
        }
    }

    /// The most recent slot at or before `at`; `None` for an after-run trigger.
    pub fn slot_at_or_before(&self, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            TriggerKind::Cron(schedule) => previous_fire(&schedule.cron, schedule.zone, at),
            TriggerKind::FixedRate { period } => {
                let period = i64::try_from(period.as_millis()).ok()?;
                DateTime::from_timestamp_millis(at.timestamp_millis().div_euclid(period) * period)
            }
            TriggerKind::FixedDelay { .. } | TriggerKind::After => None,
        }
    }
}

impl fmt::Display for TriggerSpec<CronSchedule> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            TriggerKind::Cron(schedule) => {
                write!(f, "cron `{}` in {}", schedule.expr, schedule.zone)?
            }
            TriggerKind::FixedRate { period } => write!(f, "fixed rate {period:?}")?,
            TriggerKind::FixedDelay { delay } => write!(f, "fixed delay {delay:?}")?,
            TriggerKind::After => f.write_str("after its parents")?,
        }
        if !self.initial_delay.is_zero() {
            write!(f, " after {:?}", self.initial_delay)?;
        }
        Ok(())
    }
}

/// How a locked function's lock is held, as written in `#[scheduler_lock(..)]`; `None` takes
/// the executor's default at run time.
///
/// ```
/// use lock_trigger::LockSpec;
/// use std::time::Duration;
///
/// const SPEC: LockSpec = LockSpec {
///     name: "sync_bill",
///     lock_at_most_for: Some(Duration::from_secs(30 * 60)),
///     ..LockSpec::DEFAULT
/// };
/// assert_eq!(SPEC.lock_at_least_for, Duration::ZERO);
/// assert_eq!(SPEC.keep_alive, None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockSpec {
    /// The lock name: the `name` key of either attribute.
    pub name: &'static str,
    /// The lease ends this long after it was taken, even if the holder died.
    pub lock_at_most_for: Option<Duration>,
    /// On release the lease is kept until this long after it was taken.
    pub lock_at_least_for: Duration,
    /// Extend the lease while the body runs.
    pub keep_alive: Option<bool>,
    /// How many times a scheduled run whose body fails (returns `Err` or panics) is tried
    /// again, under the same lease and slot.
    pub retries: u32,
    /// The pause before the first retry; each further one doubles it (see
    /// [`retry_delay`](crate::retry_delay)).
    pub retry_backoff: Duration,
    /// How long one attempt of a scheduled run may take before its `cancelled()` resolves
    /// (and, a grace later, it is dropped); `None`: no limit.
    pub timeout: Option<Duration>,
    /// What a fire does when the previous run still holds the lock.
    pub overlap: crate::Overlap,
    /// After this many failed runs in a row, counted across the cluster, the job is paused
    /// cluster-wide (the circuit breaker); 0: never.
    pub pause_after_failures: u32,
    /// How long the circuit breaker's pause lasts before the job resumes by itself; `None`:
    /// until an operator resumes it.
    pub pause_for: Option<Duration>,
}

impl LockSpec {
    /// Every key at its default (and an empty name, which a spec always replaces).
    pub const DEFAULT: LockSpec = LockSpec {
        name: "",
        lock_at_most_for: None,
        lock_at_least_for: Duration::ZERO,
        keep_alive: None,
        retries: 0,
        retry_backoff: DEFAULT_RETRY_BACKOFF,
        timeout: None,
        overlap: crate::Overlap::Skip,
        pause_after_failures: 0,
        pause_for: None,
    };
}

/// The pause before the first retry when `retry_backoff` is not given: 1 s.
pub const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(1);

impl LockSpec {
    /// Whether a run can end in anything but its first attempt's outcome: retries or a timeout.
    ///
    /// ```
    /// assert!(!lock_trigger::LockSpec::DEFAULT.has_run_policy());
    /// ```
    pub const fn has_run_policy(&self) -> bool {
        self.retries > 0 || self.timeout.is_some()
    }
}

/// Why a lease's bounds were refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseError {
    /// `lock_at_most_for` is zero: the lease would expire as it is taken.
    ZeroAtMost,
    /// `lock_at_least_for` is longer than `lock_at_most_for`.
    AtLeastExceedsAtMost,
}

/// Checks a lease's bounds: `at_most` above zero and not below `at_least`.
///
/// ```
/// use lock_trigger::{LeaseError, check_lease};
/// use std::time::Duration;
/// let s = Duration::from_secs;
/// assert_eq!(check_lease(s(60), s(60)), Ok(()));
/// assert_eq!(check_lease(s(0), s(0)), Err(LeaseError::ZeroAtMost));
/// assert_eq!(check_lease(s(1), s(2)), Err(LeaseError::AtLeastExceedsAtMost));
/// ```
pub fn check_lease(at_most: Duration, at_least: Duration) -> Result<(), LeaseError> {
    if at_most.is_zero() {
        Err(LeaseError::ZeroAtMost)
    } else if at_least > at_most {
        Err(LeaseError::AtLeastExceedsAtMost)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn parsed(kind: TriggerKind) -> TriggerSpec<CronSchedule> {
        TriggerSpec::new(kind).parse().unwrap()
    }

    #[test]
    fn fixed_rate_slots_are_epoch_aligned() {
        let rate = parsed(TriggerKind::FixedRate {
            period: Duration::from_millis(1500),
        })
        .kind;
        let at = Utc.timestamp_millis_opt(1_000_000_000_100).unwrap();
        let next = rate.next_slot(at).unwrap();
        assert_eq!(next.timestamp_millis() % 1500, 0);
        assert!(next > at && next.timestamp_millis() - at.timestamp_millis() <= 1500);
        assert_eq!(
            rate.next_slot(next).unwrap().timestamp_millis(),
            next.timestamp_millis() + 1500
        );
        assert_eq!(rate.slot_at_or_before(next), Some(next));
    }

    #[test]
    fn slot_at_or_before_in_the_repeated_hour() {
        // New York, 2026-11-01: 06:00 UTC is 02:00 EDT falling back to 01:00 EST.
        let cron = |expr| {
            parsed(TriggerKind::Cron(CronSpec {
                expr,
                zone: Some("America/New_York"),
            }))
            .kind
        };
        let at = |h, m| Utc.with_ymd_and_hms(2026, 11, 1, h, m, 0).unwrap();
        // 01:10 EST, second pass: 01:30 fired at its first pass (01:30 EDT).
        assert_eq!(
            cron("0 30 1 * * *").slot_at_or_before(at(6, 10)),
            Some(at(5, 30))
        );
        assert_eq!(
            cron("0 */15 * * * *").slot_at_or_before(at(6, 10)),
            Some(at(6, 0))
        );
        assert_eq!(
            cron("0 */15 * * * *").slot_at_or_before(at(5, 50)),
            Some(at(5, 45))
        );
        assert_eq!(cron("0 */15 * * * *").next_slot(at(5, 50)), Some(at(6, 0)));
    }

    #[test]
    fn parse_names_the_bad_value() {
        let cron = |expr, zone| {
            TriggerSpec::new(TriggerKind::Cron(CronSpec { expr, zone }))
                .parse()
                .unwrap_err()
                .to_string()
        };
        assert!(cron("* * * * *", None).starts_with("cron `* * * * *`: "));
        assert!(cron("* * * * * *", Some("Mars/Olympus")).starts_with("zone: unknown time zone"));
        let zero = TriggerSpec::new(TriggerKind::FixedRate {
            period: Duration::from_micros(10),
        });
        assert_eq!(
            zero.parse().unwrap_err().to_string(),
            "fixed_rate: the period must be at least 1 ms"
        );
    }

    #[test]
    fn display_says_what_and_when() {
        let spec = TriggerSpec {
            kind: TriggerKind::Cron(CronSpec {
                expr: "0 5 1 * * *",
                zone: Some("Asia/Shanghai"),
            }),
            initial_delay: Duration::from_secs(1),
            ..TriggerSpec::new(TriggerKind::FixedRate {
                period: Duration::from_secs(1),
            })
        };
        assert_eq!(
            spec.parse().unwrap().to_string(),
            "cron `0 5 1 * * *` in Asia/Shanghai after 1s"
        );
    }
}
