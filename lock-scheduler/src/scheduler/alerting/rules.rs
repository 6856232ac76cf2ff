//! [`AlertRules`]: which conditions the scheduler's evaluation tells a person about, and how
//! often it looks.

use std::time::Duration;

use lock_cluster::DEFAULT_MISSED_GRACE;

/// The conditions the scheduler evaluates and tells its notifiers about, set with
/// [`SchedulerBuilder::alert_rules`](crate::SchedulerBuilder::alert_rules).
///
/// Each rule yields incidents, each sent once across the cluster as a firing notice and, when
/// its condition ends, once as a resolved notice:
///
/// | rule (`Notice::rule`) | fires when | incident key | default |
/// |---|---|---|---|
/// | `failed_in_a_row` | a job's newest N ended attempts all failed (failed, panicked or timed out; other outcomes are passed over) | `failed_in_a_row/<job>` | on, N = 3 |
/// | `running_too_long` | a job's newest run is still running after the duration | `running_too_long/<job>` | off |
/// | `missed_slot` | a job's next fire passed by more than the grace and no instance ran it | `missed_slot/<job>` | on, grace 1 min |
/// | `instance_gone` | an instance stopped heartbeating without leaving the registry (it crashed, was killed, or lost the database) | `instance_gone/<instance id>` | on |
/// | `lock_wait` | a job's newest scheduled run started longer than the duration after its slot | `lock_wait/<job>` | off |
///
/// A sharded job's shards are jobs of their own here (`billing#2`). The cluster-wide ratio
/// of refused acquires is not among the rules: a refused acquire writes nothing to the
/// database, by design, so no instance could count the others'; the Prometheus rule file
/// (`book/prometheus/scheduled-locks.rules.yml`) alerts on it from each instance's metrics.
///
/// ```
/// use std::time::Duration;
/// use lock_scheduler::AlertRules;
///
/// let rules = AlertRules::default()
///     .failed_in_a_row(5)
///     .running_longer_than(Duration::from_secs(30 * 60))
///     .lock_wait_above(Duration::from_secs(10))
///     .instances_gone(false)
///     .every(Duration::from_secs(30))
///     .cluster("billing-prod");
/// assert_eq!(rules.evaluated_every(), Duration::from_secs(30));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlertRules {
    pub(super) failed_in_a_row: u32,
    pub(super) running_longer_than: Option<Duration>,
    pub(super) missed_slots: bool,
    pub(super) missed_grace: Duration,
    pub(super) instances_gone: bool,
    pub(super) lock_wait_above: Option<Duration>,
    pub(super) every: Duration,
    pub(super) cluster: Option<String>,
}

impl Default for AlertRules {
    /// Failed 3 times in a row, missed slots (grace 1 min) and instances gone; evaluated every
    /// 10 s; the cluster named by the provider's description.
    fn default() -> Self {
        AlertRules {
            failed_in_a_row: 3,
            running_longer_than: None,
            missed_slots: true,
            missed_grace: DEFAULT_MISSED_GRACE,
            instances_gone: true,
            lock_wait_above: None,
            every: Duration::from_secs(10),
            cluster: None,
        }
    }
}

impl AlertRules {
    /// Fires when a job's newest `n` ended attempts all failed; 0 turns the rule off. Each
    /// attempt of a job with `retries` counts.
    #[must_use]
    pub fn failed_in_a_row(mut self, n: u32) -> Self {
        self.failed_in_a_row = n;
        self
    }

    /// Fires when a job's newest run is still running `limit` after it started.
    #[must_use]
    pub fn running_longer_than(mut self, limit: Duration) -> Self {
        self.running_longer_than = Some(limit);
        self
    }

    /// Whether a slot that passed by more than [`missed_grace`](Self::missed_grace) without a
    /// run fires (on by default).
    #[must_use]
    pub fn missed_slots(mut self, on: bool) -> Self {
        self.missed_slots = on;
        self
    }

    /// How late a slot may run before it counts as missed (1 min by default, as
    /// `lockctl status` shows it).
    #[must_use]
    pub fn missed_grace(mut self, grace: Duration) -> Self {
        self.missed_grace = grace;
        self
    }

    /// Whether an instance that stopped heartbeating fires (on by default). One that shut
    /// down gracefully leaves the registry and does not.
    #[must_use]
    pub fn instances_gone(mut self, on: bool) -> Self {
        self.instances_gone = on;
        self
    }

    /// Fires when a job's newest scheduled run started more than `limit` after its slot (the
    /// lock wait the dashboard charts).
    #[must_use]
    pub fn lock_wait_above(mut self, limit: Duration) -> Self {
        self.lock_wait_above = Some(limit);
        self
    }

    /// How often the rules are evaluated (10 s by default, at least 1 s): the evaluation is a
    /// locked job, so one instance evaluates each time.
    #[must_use]
    pub fn every(mut self, every: Duration) -> Self {
        self.every = every;
        self
    }

    /// The cluster's name in every notice ([`Notice::cluster`](lock_alerts::Notice)); by
    /// default the provider's description (`postgres table shedlock`).
    #[must_use]
    pub fn cluster(mut self, name: impl Into<String>) -> Self {
        self.cluster = Some(name.into());
        self
    }

    /// How often the rules are evaluated.
    pub fn evaluated_every(&self) -> Duration {
        self.every
    }

    /// The settings' own mistakes, for `start()`.
    pub(super) fn check(&self) -> Result<(), String> {
        if self.every < Duration::from_secs(1) {
            return Err(format!(
                "alert_rules: every({:?}) is below the least interval, 1s",
                self.every
            ));
        }
        for (name, value) in [
            ("running_longer_than", self.running_longer_than),
            ("lock_wait_above", self.lock_wait_above),
        ] {
            if value.is_some_and(|d| d.is_zero()) {
                return Err(format!("alert_rules: {name} must be more than zero"));
            }
        }
        Ok(())
    }
}
