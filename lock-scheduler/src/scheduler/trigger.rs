//! When a job fires: cron in a zone, fixed rate aligned to the epoch, or fixed delay.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use lock_trigger::{CronSchedule, MisfirePolicy, TriggerError, TriggerKind, TriggerSpec};

use lock_core::{FireSlot, LockError, MAX_DURATION};

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
/// use lock_scheduler::Trigger;
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
    spec: TriggerSpec<CronSchedule>,
    /// The parents of an [`after`](Trigger::after) trigger, in the order given; empty for the
    /// others.
    parents: Arc<[Arc<str>]>,
}

impl fmt::Debug for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let TriggerKind::After = self.spec.kind {
            f.write_str("after ")?;
            for (i, parent) in self.parents.iter().enumerate() {
                if i > 0 {
                    f.write_str(" and ")?;
                }
                write!(f, "`{parent}`")?;
            }
            return Ok(());
        }
        fmt::Display::fmt(&self.spec, f)
    }
}

fn invalid(error: TriggerError) -> LockError {
    LockError::InvalidConfiguration(error.to_string())
}

impl Trigger {
    /// A cron trigger in UTC. Fails with the parser's explanation for an invalid expression.
    pub fn cron(expr: &str) -> Result<Self, LockError> {
        let schedule = CronSchedule::parse(expr).map_err(invalid)?;
        Ok(Self::of(TriggerKind::Cron(schedule)))
    }

    /// Evaluates a cron trigger on the wall clock of an IANA zone.
    ///
    /// ```
    /// # use lock_scheduler::Trigger;
    /// assert!(Trigger::cron("0 0 9 * * MON-FRI")?.in_zone("Europe/Berlin").is_ok());
    /// assert!(Trigger::cron("0 0 9 * * *")?.in_zone("Europe/Atlantis").is_err());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn in_zone(mut self, zone: &str) -> Result<Self, LockError> {
        let TriggerKind::Cron(schedule) = self.spec.kind else {
            return Err(LockError::InvalidConfiguration(
                "zone: only a cron trigger has a zone".into(),
            ));
        };
        self.spec.kind = TriggerKind::Cron(schedule.in_zone(zone).map_err(invalid)?);
        Ok(self)
    }

    /// Every `period`, slots at whole multiples of `period` since the Unix epoch.
    pub fn fixed_rate(period: Duration) -> Result<Self, LockError> {
        Self::checked(TriggerKind::FixedRate { period })
    }

    /// `delay` after each run ends (slot-less).
    pub fn fixed_delay(delay: Duration) -> Result<Self, LockError> {
        Self::checked(TriggerKind::FixedDelay { delay })
    }

    /// After the job `parent`: the job runs once for each successful run of `parent`, across
    /// the cluster, whichever instance ran it, with the parent's slot
    /// ([`FireKind::Dependency`](lock_core::FireKind::Dependency)). `start()` refuses a parent
    /// no job has, and a cycle.
    ///
    /// ```
    /// use lock_scheduler::Trigger;
    /// let trigger = Trigger::after("import_orders")?;
    /// assert_eq!(trigger.to_string(), "after `import_orders`");
    /// assert_eq!(trigger.parents().collect::<Vec<_>>(), ["import_orders"]);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn after(parent: &str) -> Result<Self, LockError> {
        Self::after_all([parent])
    }

    /// After every one of `parents`: the job runs once each time all of them succeeded for the
    /// same slot (so they share a schedule).
    ///
    /// ```
    /// use lock_scheduler::Trigger;
    /// let trigger = Trigger::after_all(["import_orders", "import_refunds"])?;
    /// assert_eq!(trigger.to_string(), "after `import_orders` and `import_refunds`");
    /// assert!(Trigger::after_all(Vec::<&str>::new()).is_err());
    /// assert!(Trigger::after_all(["a", "a"]).is_err());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn after_all<'a>(parents: impl IntoIterator<Item = &'a str>) -> Result<Self, LockError> {
        let parents: Vec<Arc<str>> = parents.into_iter().map(Arc::from).collect();
        if parents.is_empty() {
            return Err(LockError::InvalidConfiguration(
                "after: name at least one parent job".into(),
            ));
        }
        for (i, parent) in parents.iter().enumerate() {
            lock_trigger::check_job_name(parent).map_err(|e| {
                LockError::InvalidConfiguration(format!("after: parent {}", e.reason()))
            })?;
            if parents[..i].contains(parent) {
                return Err(LockError::InvalidConfiguration(format!(
                    "after: parent `{parent}` is named twice"
                )));
            }
        }
        Ok(Trigger {
            spec: TriggerSpec::new(TriggerKind::After),
            parents: parents.into(),
        })
    }

    /// The parents of an [`after`](Self::after) trigger; none for the others.
    pub fn parents(&self) -> impl ExactSizeIterator<Item = &str> {
        self.parents.iter().map(|p| &**p)
    }

    /// A trigger from its description (what `#[scheduled]` registers), checked; `after` is the
    /// parents of an `after` trigger.
    pub(crate) fn from_spec_after(
        spec: &TriggerSpec,
        after: &'static [&'static str],
    ) -> Result<Self, LockError> {
        if let TriggerKind::After = spec.kind {
            let mut trigger = Self::after_all(after.iter().copied())?;
            trigger.spec.initial_delay = spec.initial_delay;
            return Ok(trigger);
        }
        Self::from_spec(spec)
    }

    /// A trigger from its description (what `#[scheduled]` registers), checked.
    pub(crate) fn from_spec(spec: &TriggerSpec) -> Result<Self, LockError> {
        let trigger = Trigger {
            spec: spec.parse().map_err(invalid)?,
            parents: Arc::new([]),
        };
        trigger.check_limits()?;
        Ok(trigger)
    }

    fn checked(kind: TriggerKind<CronSchedule>) -> Result<Self, LockError> {
        kind.check().map_err(invalid)?;
        let trigger = Self::of(kind);
        trigger.check_limits()?;
        Ok(trigger)
    }

    /// The limits the macros apply at compile time, for values given at run time: a fixed
    /// delay of at least 1 ms (zero would run the job back to back, at round-trip speed while
    /// another instance holds the lock), and no period, delay or initial delay beyond
    /// [`MAX_DURATION`] (1000 years), so that no deadline overflows.
    ///
    /// The constructors check it; [`SchedulerBuilder::start`](crate::SchedulerBuilder::start)
    /// checks it again, because [`with_initial_delay`](Self::with_initial_delay) cannot
    /// return an error.
    pub(crate) fn check_limits(&self) -> Result<(), LockError> {
        let at_most = |key: &str, value: Duration| {
            if value > MAX_DURATION {
                Err(LockError::InvalidConfiguration(format!(
                    "{key}: {value:?} is longer than 1000 years (lock_core::MAX_DURATION)"
                )))
            } else {
                Ok(())
            }
        };
        match self.spec.kind {
            TriggerKind::FixedDelay { delay } if delay.as_millis() == 0 => {
                return Err(LockError::InvalidConfiguration(
                    "fixed_delay: the delay must be at least 1 ms (a zero delay runs the job back \
                     to back without pause)"
                        .into(),
                ));
            }
            TriggerKind::FixedDelay { delay } => at_most("fixed_delay", delay)?,
            TriggerKind::FixedRate { period } => at_most("fixed_rate", period)?,
            TriggerKind::Cron(_) | TriggerKind::After => {}
        }
        at_most("initial_delay", self.spec.initial_delay)?;
        self.check_misfire()
    }

    fn of(kind: TriggerKind<CronSchedule>) -> Self {
        Trigger {
            spec: TriggerSpec::new(kind),
            parents: Arc::new([]),
        }
    }

    /// No fire earlier than `delay` after the scheduler starts.
    ///
    /// A delay longer than [`MAX_DURATION`] (1000 years) cannot be refused here (this returns
    /// the trigger): [`SchedulerBuilder::start`](crate::SchedulerBuilder::start) fails with an
    /// error naming the job.
    #[must_use]
    pub fn with_initial_delay(mut self, delay: Duration) -> Self {
        self.spec.initial_delay = delay;
        self
    }

    /// The delay before the first fire.
    pub fn initial_delay(&self) -> Duration {
        self.spec.initial_delay
    }

    /// What a slot no instance ran becomes (`#[scheduled(misfire = "..")]`): skipped (the
    /// default), run once ([`MisfirePolicy::FireOnce`], the latest missed slot), or each run
    /// ([`MisfirePolicy::CatchUp`], oldest first). See the workspace's
    /// `book/misfire-retries-timeouts.md` for how missed slots are found. A fixed-delay trigger has no slots and
    /// refuses any policy but `Skip`.
    ///
    /// ```
    /// use lock_scheduler::{MisfirePolicy, Trigger};
    /// use std::time::Duration;
    ///
    /// let nightly = Trigger::cron("0 0 3 * * *")?
    ///     .with_misfire(MisfirePolicy::FireOnce)?
    ///     .with_misfire_grace(Duration::from_secs(6 * 3600));
    /// assert_eq!(nightly.misfire(), MisfirePolicy::FireOnce);
    /// assert!(Trigger::fixed_delay(Duration::from_secs(5))?.with_misfire(MisfirePolicy::CatchUp).is_err());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn with_misfire(mut self, policy: MisfirePolicy) -> Result<Self, LockError> {
        self.spec.misfire = policy;
        self.check_misfire()?;
        Ok(self)
    }

    /// How old a missed slot may be and still run (`misfire_grace`); by default one period of
    /// the trigger (the gap between its next two slots). Zero or over 1000 years is refused at
    /// start.
    ///
    /// It also bounds how late a regular fire's body starts: a lock granted later than this
    /// after its slot is given back at once, and the slot is missed (the fire's outcome is
    /// `Skipped`, with a warning).
    #[must_use]
    pub fn with_misfire_grace(mut self, grace: Duration) -> Self {
        self.spec.misfire_grace = Some(grace);
        self
    }

    /// How many missed slots [`MisfirePolicy::CatchUp`] runs at most (`misfire_max`, default
    /// 10): with more, the most recent ones run and the number dropped is logged. Zero or
    /// over 1000 is refused at start.
    #[must_use]
    pub fn with_misfire_max(mut self, max: u32) -> Self {
        self.spec.misfire_max = max;
        self
    }

    /// The misfire policy.
    pub fn misfire(&self) -> MisfirePolicy {
        self.spec.misfire
    }

    /// This trigger with `other`'s misfire settings (a configuration override replaces the
    /// schedule, not what a missed slot becomes).
    pub(crate) fn with_misfire_of(mut self, other: &Trigger) -> Self {
        self.spec.misfire = other.spec.misfire;
        self.spec.misfire_grace = other.spec.misfire_grace;
        self.spec.misfire_max = other.spec.misfire_max;
        self
    }

    fn check_misfire(&self) -> Result<(), LockError> {
        let spec = &self.spec;
        let invalid = |message: String| Err(LockError::InvalidConfiguration(message));
        if matches!(spec.kind, TriggerKind::FixedDelay { .. })
            && spec.misfire != MisfirePolicy::Skip
        {
            return invalid(format!(
                "misfire = {:?}: a fixed-delay trigger has no slots that could be missed",
                spec.misfire.as_str()
            ));
        }
        if !(1..=lock_trigger::MAX_MISFIRE_MAX).contains(&spec.misfire_max) {
            return invalid(format!(
                "misfire_max: {} is not between 1 and {}",
                spec.misfire_max,
                lock_trigger::MAX_MISFIRE_MAX
            ));
        }
        match spec.misfire_grace {
            Some(grace) if grace.is_zero() || grace > MAX_DURATION => invalid(format!(
                "misfire_grace: {grace:?} must be more than zero and at most 1000 years"
            )),
            _ => Ok(()),
        }
    }

    /// The description: what the trigger is (slotted or after-run) and its options.
    pub(crate) fn spec(&self) -> &TriggerSpec<CronSchedule> {
        &self.spec
    }

    /// The first slot strictly after `after` (cron, fixed rate); `None` for fixed-delay
    /// triggers and for a cron expression that never fires again.
    ///
    /// ```
    /// use chrono::{TimeZone, Utc};
    /// use lock_scheduler::Trigger;
    /// use std::time::Duration;
    ///
    /// let rate = Trigger::fixed_rate(Duration::from_secs(10))?;
    /// let after = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 3).unwrap();
    /// assert_eq!(rate.next_slot(after).unwrap().instant(), Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 10).unwrap());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn next_slot(&self, after: DateTime<Utc>) -> Option<FireSlot> {
        self.spec.kind.next_slot(after).map(FireSlot::new)
    }

    /// The most recent slot at or before `at` (used by integrations that are told "now" rather
    /// than the scheduled instant).
    pub fn slot_at_or_before(&self, at: DateTime<Utc>) -> Option<FireSlot> {
        self.spec.kind.slot_at_or_before(at).map(FireSlot::new)
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

    #[test]
    fn a_registered_spec_becomes_the_same_trigger_as_the_builders() {
        let spec = TriggerSpec {
            kind: TriggerKind::FixedDelay {
                delay: Duration::from_secs(5),
            },
            initial_delay: Duration::from_secs(1),
            ..TriggerSpec::new(TriggerKind::FixedDelay {
                delay: Duration::from_secs(5),
            })
        };
        let built = Trigger::fixed_delay(Duration::from_secs(5))
            .unwrap()
            .with_initial_delay(Duration::from_secs(1));
        assert_eq!(
            Trigger::from_spec(&spec).unwrap().to_string(),
            built.to_string()
        );
        assert_eq!(built.to_string(), "fixed delay 5s after 1s");
        let errors = [
            Trigger::cron("* * * * *").unwrap_err().to_string(),
            Trigger::fixed_rate(Duration::ZERO).unwrap_err().to_string(),
            Trigger::fixed_rate(Duration::from_secs(1))
                .unwrap()
                .in_zone("UTC")
                .unwrap_err()
                .to_string(),
        ];
        assert!(errors[0].contains("cron `* * * * *`: a cron expression needs 6 fields"));
        assert!(errors[1].contains("fixed_rate: the period must be at least 1 ms"));
        assert!(errors[2].contains("zone: only a cron trigger has a zone"));
    }
}
