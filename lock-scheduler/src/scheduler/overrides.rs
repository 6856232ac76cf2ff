//! Configuration overrides: a cron, zone or lease from configuration replaces a job's literal
//! at start, by job name, checked with the macros' rules and messages.
//!
//! Two sources, merged (an explicit [`SchedulerBuilder::override_job`](crate::SchedulerBuilder::override_job)
//! wins over the environment): calls on the builder, and variables named
//! `LOCK_JOB_<JOB>_<SETTING>`, where `<JOB>` is the job's name in upper case with every
//! character other than `A-Z` and `0-9` replaced by `_`, and `<SETTING>` one of `CRON`, `ZONE`,
//! `LOCK_AT_MOST_FOR`, `LOCK_AT_LEAST_FOR`, `PING_URL` (feature `alerts`). The alert settings'
//! `LOCK_ALERT_..` variables are read with them and handed to `alerting/from_env.rs`.

use std::sync::Arc;
use std::time::Duration;

use lock_trigger::{TriggerKind, ZERO_LEASE};

use super::startup::Prepared;
use super::{Job, SchedulerBuilder, Trigger};
use lock_core::{LockConfiguration, LockError};

/// The prefix of the environment variables read by
/// [`SchedulerBuilder::overrides_from_env`](crate::SchedulerBuilder::overrides_from_env).
pub const OVERRIDE_ENV_PREFIX: &str = "LOCK_JOB_";

/// The prefix of the alert settings' variables (feature `alerts`), read by the same calls as
/// the jobs' overrides; refused at start in a build without the feature.
pub const ALERT_ENV_PREFIX: &str = "LOCK_ALERT_";

/// The settings, as `(suffix of the variable, key as the macros spell it)`.
const SETTINGS: [(&str, &str); 5] = [
    ("_CRON", "cron"),
    ("_ZONE", "zone"),
    ("_LOCK_AT_MOST_FOR", "lock_at_most_for"),
    ("_LOCK_AT_LEAST_FOR", "lock_at_least_for"),
    ("_PING_URL", "ping_url"),
];

/// Values from configuration that replace a job's own at start: its cron expression, its
/// zone, and its lease bounds. Each is written as in the attributes (`"0 */5 * * * *"`,
/// `"Europe/Berlin"`, `"10m"`) and checked at [`start`](crate::SchedulerBuilder::start) with
/// the same rules and messages.
///
/// ```
/// use lock_core::InMemoryLockProvider;
/// use lock_scheduler::{Job, JobOverride, Scheduler, Trigger};
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let job = Job::new("report", Trigger::cron("0 0 3 * * *")?, || async {});
/// let scheduler = Scheduler::builder()
///     .lock_provider(InMemoryLockProvider::new())
///     .jobs([job])
///     .override_job("report", JobOverride::new().cron("0 30 4 * * *").zone("Europe/Berlin"))
///     .start()
///     .await?;
/// assert_eq!(scheduler.jobs()[0].trigger, "cron `0 30 4 * * *` in Europe/Berlin");
/// scheduler.shutdown().await?;
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
///
/// `Debug` shows a ping URL as `<redacted>`: the URL is the check's secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct JobOverride {
    cron: Option<String>,
    zone: Option<String>,
    lock_at_most_for: Option<String>,
    lock_at_least_for: Option<String>,
    ping_url: Option<String>,
}

impl std::fmt::Debug for JobOverride {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobOverride")
            .field("cron", &self.cron)
            .field("zone", &self.zone)
            .field("lock_at_most_for", &self.lock_at_most_for)
            .field("lock_at_least_for", &self.lock_at_least_for)
            .field("ping_url", &self.ping_url.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl JobOverride {
    /// Overrides nothing yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires on this cron expression (Spring's six fields) instead of the job's trigger; in
    /// the job's zone if it had one, else UTC, unless [`zone`](Self::zone) is given too.
    #[must_use]
    pub fn cron(mut self, expr: impl Into<String>) -> Self {
        self.cron = Some(expr.into());
        self
    }

    /// Evaluates the cron expression in this IANA zone (a cron job only).
    #[must_use]
    pub fn zone(mut self, zone: impl Into<String>) -> Self {
        self.zone = Some(zone.into());
        self
    }

    /// The lease's upper bound (`"10m"`).
    #[must_use]
    pub fn lock_at_most_for(mut self, duration: impl Into<String>) -> Self {
        self.lock_at_most_for = Some(duration.into());
        self
    }

    /// The lease's lower bound (`"10s"`).
    #[must_use]
    pub fn lock_at_least_for(mut self, duration: impl Into<String>) -> Self {
        self.lock_at_least_for = Some(duration.into());
        self
    }

    /// Pings this dead-man-switch URL at each run's start and end (feature `alerts`; see
    /// [`Job::with_dead_man_switch`](crate::Job::with_dead_man_switch)): a Cronitor telemetry
    /// URL (`https://cronitor.link/..`) with Cronitor's conventions, any other with
    /// healthchecks.io's. It replaces a switch the job was given in code.
    ///
    /// ```
    /// let settings = lock_scheduler::JobOverride::new().ping_url("https://hc-ping.com/0f1e2d3c");
    /// assert!(!format!("{settings:?}").contains("0f1e2d3c"));
    /// ```
    #[must_use]
    pub fn ping_url(mut self, url: impl Into<String>) -> Self {
        self.ping_url = Some(url.into());
        self
    }

    /// Fills the settings `self` leaves unset from `other`.
    fn or(self, other: &JobOverride) -> JobOverride {
        JobOverride {
            cron: self.cron.or_else(|| other.cron.clone()),
            zone: self.zone.or_else(|| other.zone.clone()),
            lock_at_most_for: self
                .lock_at_most_for
                .or_else(|| other.lock_at_most_for.clone()),
            lock_at_least_for: self
                .lock_at_least_for
                .or_else(|| other.lock_at_least_for.clone()),
            ping_url: self.ping_url.or_else(|| other.ping_url.clone()),
        }
    }

    fn set(&mut self, key: &str, value: String) {
        match key {
            "cron" => self.cron = Some(value),
            "zone" => self.zone = Some(value),
            "lock_at_most_for" => self.lock_at_most_for = Some(value),
            "ping_url" => self.ping_url = Some(value),
            _ => self.lock_at_least_for = Some(value),
        }
    }
}

/// Parses a duration as the macros do: `humantime` syntax (`"30s"`, `"1h 30m"`, `"500ms"`) or
/// ISO-8601 as ShedLock writes it (`"PT30S"`, `"PT0.5S"`), whole milliseconds, at most [`MAX_DURATION`](lock_core::MAX_DURATION); for durations read from
/// configuration.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(lock_scheduler::parse_duration("1h 30m")?, Duration::from_secs(5400));
/// assert_eq!(lock_scheduler::parse_duration("PT1H30M")?, Duration::from_secs(5400));
/// let refused = lock_scheduler::parse_duration("5 minutes please").unwrap_err();
/// assert!(refused.to_string().contains("invalid duration `5 minutes please`"), "{refused}");
/// # Ok::<(), lock_core::LockError>(())
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, LockError> {
    lock_trigger::check_duration("duration", text, None).map_err(LockError::InvalidConfiguration)
}

/// A duration as the attributes write it (`"90s"`, `"250ms"`): for a bound that was not
/// overridden, in a message about both.
fn written_duration(value: Duration) -> String {
    match value.subsec_millis() {
        0 => format!("{}s", value.as_secs()),
        _ => format!("{}ms", value.as_millis()),
    }
}

/// The job-name part of the variables of `job`: `sync-bill` -> `SYNC_BILL`.
///
/// ```
/// assert_eq!(lock_scheduler::override_env_key("billing.sync-bill"), "BILLING_SYNC_BILL");
/// ```
pub fn override_env_key(job: &str) -> String {
    job.chars()
        .map(|c| match c.to_ascii_uppercase() {
            c @ ('A'..='Z' | '0'..='9') => c,
            _ => '_',
        })
        .collect()
}

impl SchedulerBuilder {
    /// Replaces settings of the job `name` with `settings` (from configuration), at
    /// [`start`](Self::start): a cron expression, a zone, `lock_at_most_for`,
    /// `lock_at_least_for`. Calls for one job merge, the later value of a setting winning; they
    /// win over [`overrides_from_env`](Self::overrides_from_env).
    ///
    /// `start()` checks each value with the rules and messages of the macros, and fails
    /// naming every refused value and every unknown job name (with the known ones).
    pub fn override_job(mut self, name: impl Into<String>, settings: JobOverride) -> Self {
        self.overrides.add(name.into(), settings);
        self
    }

    /// Reads overrides from the process environment, now: every variable named
    /// `LOCK_JOB_<JOB>_<SETTING>`, where `<JOB>` is the job's name in upper case with each
    /// character other than `A-Z` and `0-9` replaced by `_` ([`override_env_key`]), and
    /// `<SETTING>` is `CRON`, `ZONE`, `LOCK_AT_MOST_FOR`, `LOCK_AT_LEAST_FOR` or `PING_URL`
    /// (feature `alerts`, see [`JobOverride::ping_url`]):
    ///
    /// ```text
    /// LOCK_JOB_SYNC_BILL_CRON="0 30 1 * * *"
    /// LOCK_JOB_SYNC_BILL_LOCK_AT_MOST_FOR=45m
    /// ```
    ///
    /// With the `alerts` feature it also reads the alert settings, `LOCK_ALERT_<SETTING>`:
    /// notifiers added to those of [`notifier`](Self::notifier), rule values replacing those
    /// of [`alert_rules`](Self::alert_rules) (durations as in the attributes):
    ///
    /// ```text
    /// LOCK_ALERT_WEBHOOK_URL=https://ops.example.com/hooks/scheduler
    /// LOCK_ALERT_WEBHOOK_SECRET=whsec_1234
    /// LOCK_ALERT_SLACK_URL=https://hooks.slack.com/services/T000/B000/XXXX
    /// LOCK_ALERT_SMTP_URL=smtp://user:app-password@smtp.example.com:587   # smtps://, smtp+plain://
    /// LOCK_ALERT_MAIL_FROM=locks@example.com
    /// LOCK_ALERT_MAIL_TO=oncall@example.com,ops@example.com
    /// LOCK_ALERT_FAILED_IN_A_ROW=3          # 0 turns the rule off
    /// LOCK_ALERT_RUNNING_LONGER_THAN=30m
    /// LOCK_ALERT_LOCK_WAIT_ABOVE=10s
    /// LOCK_ALERT_MISSED_SLOTS=true
    /// LOCK_ALERT_INSTANCES_GONE=true
    /// LOCK_ALERT_EVERY=10s
    /// LOCK_ALERT_CLUSTER=billing-prod
    /// ```
    ///
    /// A refused value is named by its variable, never repeated (it may be a secret).
    ///
    /// A variable with the prefix that names no job or setting fails `start()`, listing the
    /// jobs: a typo does not leave a job on its old schedule unnoticed.
    pub fn overrides_from_env(self) -> Self {
        self.overrides_from_vars(std::env::vars())
    }

    /// As [`overrides_from_env`](Self::overrides_from_env), from `vars` instead of the
    /// process environment (a configuration file flattened to the same names, or a test).
    /// Pairs whose name starts with neither `LOCK_JOB_` nor `LOCK_ALERT_` are ignored.
    ///
    /// ```
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::{Job, Scheduler, Trigger};
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let job = Job::new("sync-bill", Trigger::fixed_rate(Duration::from_secs(60))?, || async {});
    /// let refused = Scheduler::builder()
    ///     .lock_provider(InMemoryLockProvider::new())
    ///     .jobs([job])
    ///     .overrides_from_vars([("LOCK_JOB_SYNC_BILL_LOCK_AT_MOST_FOR", "0s")])
    ///     .start()
    ///     .await
    ///     .unwrap_err();
    /// assert_eq!(
    ///     refused.to_string(),
    ///     "invalid configuration: configuration overrides refused: job `sync-bill`: \
    ///      `lock_at_most_for` must be greater than zero: a lease of zero expires as it is taken"
    /// );
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn overrides_from_vars<K: Into<String>, V: Into<String>>(
        mut self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        self.overrides
            .add_vars(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }
}

/// What the builder was given, resolved against the jobs at start.
#[derive(Default)]
pub(super) struct Overrides {
    /// From `override_job`, by job name.
    explicit: Vec<(String, JobOverride)>,
    /// From the environment: `(variable, value)`, every one starting with the prefix.
    vars: Vec<(String, String)>,
    /// From the environment: the alert settings, `LOCK_ALERT_..` (`alerting/from_env.rs`).
    alert_vars: Vec<(String, String)>,
}

impl Overrides {
    pub(super) fn add(&mut self, job: String, settings: JobOverride) {
        match self.explicit.iter_mut().find(|(name, _)| *name == job) {
            Some((_, existing)) => *existing = settings.or(existing),
            None => self.explicit.push((job, settings)),
        }
    }

    pub(super) fn add_vars(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        for (name, value) in vars {
            if name.starts_with(OVERRIDE_ENV_PREFIX) {
                self.vars.push((name, value));
            } else if name.starts_with(ALERT_ENV_PREFIX) {
                self.alert_vars.push((name, value));
            }
        }
    }

    /// The `LOCK_ALERT_..` variables, for the alert settings; without the `alerts` feature,
    /// an error naming them (they would be ignored otherwise).
    pub(super) fn take_alert_vars(&mut self) -> Result<Vec<(String, String)>, LockError> {
        let vars = std::mem::take(&mut self.alert_vars);
        if cfg!(feature = "alerts") || vars.is_empty() {
            return Ok(vars);
        }
        let names: Vec<&str> = vars.iter().map(|(name, _)| name.as_str()).collect();
        Err(LockError::InvalidConfiguration(format!(
            "{} set, but this build has no alerts: enable the `alerts` feature",
            names.join(", ")
        )))
    }

    /// Applies every override to its job, or fails naming every problem found: an unknown
    /// job or variable, a value the macros would refuse.
    pub(super) fn apply(&self, prepared: Vec<Prepared>) -> Result<Vec<Prepared>, LockError> {
        if self.explicit.is_empty() && self.vars.is_empty() {
            return Ok(prepared);
        }
        let known = || {
            prepared
                .iter()
                .map(|(job, _)| format!("`{}`", job.name()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut problems = Vec::new();
        let mut wanted: Vec<(String, JobOverride)> = Vec::new();
        for (name, settings) in &self.explicit {
            if prepared.iter().any(|(job, _)| job.name() == name) {
                wanted.push((name.clone(), settings.clone()));
            } else {
                problems.push(format!(
                    "an override for the unknown job `{name}`; the jobs are {}",
                    known()
                ));
            }
        }
        if !self.vars.is_empty() {
            let mut keys: Vec<(String, &str)> = prepared
                .iter()
                .map(|(job, _)| (override_env_key(job.name()), job.name()))
                .collect();
            keys.sort();
            for pair in keys.windows(2) {
                if pair[0].0 == pair[1].0 {
                    problems.push(format!(
                        "the jobs `{}` and `{}` share the variable name {OVERRIDE_ENV_PREFIX}{}_..; \
                         rename one of them, or override them with override_job",
                        pair[0].1, pair[1].1, pair[0].0
                    ));
                }
            }
        }
        for (var, value) in &self.vars {
            let rest = &var[OVERRIDE_ENV_PREFIX.len()..];
            let found = SETTINGS.iter().find_map(|(suffix, key)| {
                let job_key = rest.strip_suffix(suffix)?;
                let (job, _) = prepared
                    .iter()
                    .find(|(job, _)| override_env_key(job.name()) == job_key)?;
                Some((job.name().to_owned(), *key))
            });
            let Some((job, key)) = found else {
                let names: Vec<String> = prepared
                    .iter()
                    .map(|(job, _)| override_env_key(job.name()))
                    .collect();
                problems.push(format!(
                    "the variable {var} names no job and setting: it is \
                     {OVERRIDE_ENV_PREFIX}<JOB>_<CRON|ZONE|LOCK_AT_MOST_FOR|LOCK_AT_LEAST_FOR|PING_URL>, \
                     with <JOB> one of {}; the jobs are {}",
                    names.join(", "),
                    known()
                ));
                continue;
            };
            let mut from_env = JobOverride::new();
            from_env.set(key, value.clone());
            // Explicit calls win over the environment.
            match wanted.iter_mut().find(|(name, _)| *name == job) {
                Some((_, settings)) => *settings = settings.clone().or(&from_env),
                None => wanted.push((job, from_env)),
            }
        }
        let mut out = Vec::with_capacity(prepared.len());
        for (job, config) in prepared {
            match wanted.iter().find(|(name, _)| name == job.name()) {
                Some((_, settings)) => match apply_one(Arc::unwrap_or_clone(job), config, settings)
                {
                    Ok((job, config)) => out.push((Arc::new(job), config)),
                    Err(message) => problems.push(message),
                },
                None => out.push((job, config)),
            }
        }
        if problems.is_empty() {
            Ok(out)
        } else {
            Err(LockError::InvalidConfiguration(format!(
                "configuration overrides refused: {}",
                problems.join("; ")
            )))
        }
    }
}

/// One job with its overrides applied; the error names the job and every refused value.
fn apply_one(
    job: Job,
    config: LockConfiguration,
    settings: &JobOverride,
) -> Result<(Job, LockConfiguration), String> {
    let mut problems = Vec::new();
    let name = job.name().to_owned();
    let context = |message: String| format!("job `{name}`: {message}");
    let current_cron = match &job.trigger().spec().kind {
        TriggerKind::Cron(schedule) => Some((schedule.expr().to_owned(), schedule.zone())),
        _ => None,
    };
    let cron = match &settings.cron {
        Some(expr) => match lock_trigger::check_cron(expr) {
            Ok(_) => Some(expr.clone()),
            Err(message) => {
                problems.push(context(format!("cron {expr:?}: {message}")));
                None
            }
        },
        None => current_cron.as_ref().map(|(expr, _)| expr.clone()),
    };
    let zone = match &settings.zone {
        Some(zone) => match lock_trigger::parse_zone(zone) {
            Ok(_) => Some(zone.clone()),
            Err(e) => {
                problems.push(context(e.to_string()));
                None
            }
        },
        None => current_cron
            .as_ref()
            .map(|(_, zone)| zone.name().to_owned()),
    };
    if settings.zone.is_some() && settings.cron.is_none() && current_cron.is_none() {
        problems.push(context(
            "`zone` applies to `cron` only: `fixed_rate` and `fixed_delay` count elapsed time, \
             not wall-clock time; remove `zone`, or override `cron` too"
                .into(),
        ));
    }
    let at_most = match &settings.lock_at_most_for {
        Some(text) => lock_trigger::check_duration("lock_at_most_for", text, Some(ZERO_LEASE))
            .map_err(|message| problems.push(context(message)))
            .ok(),
        None => Some(config.lock_at_most_for()),
    };
    let at_least = match &settings.lock_at_least_for {
        Some(text) => lock_trigger::check_duration("lock_at_least_for", text, None)
            .map_err(|message| problems.push(context(message)))
            .ok(),
        None => Some(config.lock_at_least_for()),
    };
    if let (Some(most), Some(least)) = (at_most, at_least)
        && least > most
    {
        let written = |text: &Option<String>, value: Duration| {
            text.clone().unwrap_or_else(|| written_duration(value))
        };
        problems.push(context(lock_trigger::lease_conflict(
            &written(&settings.lock_at_least_for, least),
            &written(&settings.lock_at_most_for, most),
        )));
    }
    let mut job = job;
    if let Some(url) = &settings.ping_url {
        match ping_switch(url) {
            Ok(switch) => job = switch(job),
            Err(message) => problems.push(context(message)),
        }
    }
    if !problems.is_empty() {
        return Err(problems.join("; "));
    }
    if settings.cron.is_some() || settings.zone.is_some() {
        let (Some(cron), Some(zone)) = (cron, zone) else {
            return Err(context("a cron override needs an expression".into()));
        };
        let trigger = Trigger::cron(&cron)
            .and_then(|trigger| trigger.in_zone(&zone))
            .map_err(|e| context(e.to_string()))?
            .with_misfire_of(job.trigger());
        job = job.with_trigger(trigger);
    }
    let (Some(at_most), Some(at_least)) = (at_most, at_least) else {
        return Err(context("a lease override was refused".into()));
    };
    let config = LockConfiguration::new(config.shared_name().clone(), at_most, at_least)
        .map(|c| c.with_keep_alive(config.keep_alive()))
        .map_err(|e| context(e.to_string()))?;
    // A shorter lease may no longer hold the job's retry plan.
    job.run_policy().check(&config).map_err(context)?;
    Ok((job, config))
}

/// What a `ping_url` override does to its job: gives it the dead-man switch of `url`.
#[cfg(feature = "alerts")]
fn ping_switch(url: &str) -> Result<impl FnOnce(Job) -> Job, String> {
    use lock_alerts::DeadManSwitch;
    // By the host, not by a substring of the URL: a healthchecks slug may say "cronitor".
    let cronitor = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
        .is_some_and(|host| host == "cronitor.link" || host.ends_with(".cronitor.link"));
    let switch = match cronitor {
        true => DeadManSwitch::cronitor(url),
        false => DeadManSwitch::healthchecks(url),
    }
    .map_err(|e| format!("ping_url: {e}"))?;
    Ok(move |job: Job| job.with_dead_man_switch(switch))
}

/// Without the `alerts` feature a ping URL has nothing to ping with.
#[cfg(not(feature = "alerts"))]
fn ping_switch(_url: &str) -> Result<fn(Job) -> Job, String> {
    Err("ping_url needs the `alerts` feature".into())
}
