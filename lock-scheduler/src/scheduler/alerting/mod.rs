//! Alert rules evaluated by the scheduler itself ([`SchedulerBuilder::notifier`],
//! [`SchedulerBuilder::alert_rules`]): failed N times in a row, running too long, a missed
//! slot, an instance gone, a long lock wait; each incident told once across the cluster, and
//! told again when it is resolved.
//!
//! Decisions, and why:
//! - **The evaluation is a locked job** ([`ALERT_RULES_JOB`]), fixed rate, on every instance
//!   that has notifiers: one instance evaluates each slot, and any instance can, so the rules
//!   keep being evaluated while instances come and go.
//! - **An incident's identity is in the database** (the store's incidents, `lock_cluster`'s
//!   `Incident`): the evaluation opens or resolves it there and tells the notifiers only when
//!   its own write changed it. Two evaluations that overlap (a lease that lapsed on a stalled
//!   instance) thus still send each notice once; a process killed between the write and the
//!   send loses that notice rather than sending it twice.
//! - **Every rule reads what the tables hold already** (the registry, each job's newest run,
//!   the lock rows), one query each; only jobs whose newest run failed, or that have an open
//!   `failed_in_a_row` incident, have their history read. The cost follows the failures, not
//!   the number of jobs.
//! - **A graceful stop leaves the registry** (a last heartbeat with a zero interval), so a
//!   rolling deploy is not an `instance_gone`; a crash, a kill or a lost database is.

mod evaluate;
mod from_env;
mod incidents;
mod rules;

use std::sync::Arc;
use std::time::Duration;

use lock_alerts::Notifier;
use lock_cluster::ClusterProvider;
use lock_core::{LockConfiguration, LockError};

use super::{Job, SchedulerBuilder, Trigger};
use incidents::Evaluator;
pub use rules::AlertRules;

/// The name (and lock name) of the job that evaluates the alert rules, added when the
/// scheduler has a notifier.
pub const ALERT_RULES_JOB: &str = "lock_core_alert_rules";

/// The least lease of the evaluation: an evaluator killed mid-evaluation holds the rules up
/// for at most this (or three evaluation intervals, if longer). Short, because an evaluation
/// that outlives it (a notifier retrying a receiver that is down) overlapping the next one
/// is harmless: the store's open and resolve decide who sends each notice.
const LEAST_EVALUATION_LEASE: Duration = Duration::from_secs(15);

/// What `.notifier(..)` and `.alert_rules(..)` set.
#[derive(Default)]
pub(super) struct AlertSettings {
    notifiers: Vec<Arc<dyn Notifier>>,
    rules: Option<AlertRules>,
}

impl SchedulerBuilder {
    /// Tells `notifier` about every incident of the alert rules: a webhook, Slack or mail
    /// notifier of [`lock_alerts`], or one of yours. Call it once per notifier; each gets
    /// every notice. With one, the scheduler evaluates the rules
    /// ([`alert_rules`](Self::alert_rules), else [`AlertRules::default`]) in a locked job of
    /// its own, [`ALERT_RULES_JOB`], which needs the cluster's tables and the run history.
    ///
    /// ```no_run
    /// use lock_alerts::{WebhookConfig, WebhookNotifier};
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::{AlertRules, Scheduler};
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let webhook = WebhookNotifier::new(
    ///     WebhookConfig::new("https://ops.example.com/hooks/scheduler").secret("a shared secret"),
    /// )?;
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .notifier(webhook)
    ///     .alert_rules(AlertRules::default().failed_in_a_row(3))
    ///     .start()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn notifier<N: Notifier + 'static>(mut self, notifier: N) -> Self {
        self.alerting.notifiers.push(Arc::new(notifier));
        self
    }

    /// The alert rules to evaluate ([`AlertRules::default`] when only
    /// [`notifier`](Self::notifier) is called). Without a notifier, `start()` refuses them:
    /// they would tell nobody.
    ///
    /// ```
    /// use std::time::Duration;
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::{AlertRules, Scheduler};
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let refused = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .alert_rules(AlertRules::default().running_longer_than(Duration::from_secs(600)))
    ///     .start()
    ///     .await;
    /// assert!(refused.unwrap_err().to_string().contains("no notifier"));
    /// # });
    /// ```
    pub fn alert_rules(mut self, rules: AlertRules) -> Self {
        self.alerting.rules = Some(rules);
        self
    }
}

/// Reads the open incidents once, at start: a store whose incidents table is missing (tables
/// from before it, `ensure_schema()` not run since) fails `start()` with the table's DDL,
/// rather than every evaluation after it.
pub(super) async fn check_store(provider: &dyn ClusterProvider) -> Result<(), LockError> {
    match provider.cluster() {
        Some(store) => store.open_incidents().await.map(drop),
        None => Ok(()),
    }
}

impl AlertSettings {
    /// The evaluation job, when there is a notifier; the settings' mistakes as errors.
    pub(super) fn job(
        self,
        vars: Vec<(String, String)>,
        provider: &Arc<dyn ClusterProvider>,
        has_cluster: bool,
        keeps_history: bool,
    ) -> Result<Option<Job>, LockError> {
        let invalid = |why: String| Err(LockError::InvalidConfiguration(why));
        let from_env =
            from_env::read(&vars, self.rules).map_err(LockError::InvalidConfiguration)?;
        let mut notifiers = self.notifiers;
        notifiers.extend(from_env.notifiers);
        if notifiers.is_empty() {
            return match from_env.rules {
                Some(_) => invalid(
                    "alert_rules(..) with no notifier would tell nobody: add .notifier(..)".into(),
                ),
                None => Ok(None),
            };
        }
        let rules = from_env.rules.unwrap_or_default();
        rules.check().map_err(LockError::InvalidConfiguration)?;
        if !has_cluster {
            return invalid(format!(
                "alert rules read the cluster's tables, and {} keeps none (or they are \
                 missing: run ensure_schema())",
                provider.describe()
            ));
        }
        if !keeps_history {
            return invalid(
                "alert rules read the run history: remove .no_history() to evaluate them".into(),
            );
        }
        let lease = (rules.every * 3).max(LEAST_EVALUATION_LEASE);
        let evaluator = Arc::new(Evaluator {
            provider: provider.clone(),
            cluster: rules.cluster.clone().unwrap_or_else(|| provider.describe()),
            notifiers,
            rules,
        });
        let every = evaluator.rules.every;
        let job = Job::new(ALERT_RULES_JOB, Trigger::fixed_rate(every)?, move || {
            let evaluator = evaluator.clone();
            async move { evaluator.evaluate().await }
        })
        .with_lock(LockConfiguration::new(
            ALERT_RULES_JOB,
            lease,
            Duration::ZERO,
        )?);
        Ok(Some(job))
    }
}
