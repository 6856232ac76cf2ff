//! [`Notice`]: what every notifier sends, and its JSON form (the webhook body, a public
//! contract documented in the README).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The version of the JSON form, sent as `"version"`. A field added keeps it; a field removed,
/// renamed or changed in meaning raises it.
pub const NOTICE_VERSION: u32 = 1;

/// Whether an incident began or ended.
///
/// ```
/// use lock_alerts::NoticeState;
/// assert_eq!(serde_json::to_string(&NoticeState::Firing).unwrap(), "\"firing\"");
/// assert_eq!(NoticeState::Resolved.to_string(), "RESOLVED");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeState {
    /// The rule's condition holds: something needs a person.
    Firing,
    /// The condition no longer holds; the incident with the same key is over.
    Resolved,
}

impl std::fmt::Display for NoticeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            NoticeState::Firing => "FIRING",
            NoticeState::Resolved => "RESOLVED",
        })
    }
}

/// One notification: an incident of one rule (for one job or instance) firing or resolved.
///
/// Built with [`Notice::new`] and the optional parts; the fields are public to read. Every
/// notifier sends the same notice: the webhook as JSON (this type's `Serialize`), Slack as
/// text and blocks, mail as a subject and a plain-text body.
///
/// ```
/// use chrono::{TimeZone, Utc};
/// use lock_alerts::{Notice, NoticeState};
///
/// let at = Utc.with_ymd_and_hms(2026, 12, 3, 7, 0, 0).unwrap();
/// let notice = Notice::new(
///     "failed_in_a_row/nightly_report",
///     "failed_in_a_row",
///     NoticeState::Firing,
///     "nightly_report failed 3 times in a row",
///     at,
///     "shedlock",
/// )
/// .job("nightly_report")
/// .instance("web-1")
/// .detail("failures", "3")
/// .detail("last_error", "connection refused");
///
/// assert_eq!(notice.title(), "FIRING failed_in_a_row: nightly_report");
/// let json: serde_json::Value = serde_json::to_value(&notice).unwrap();
/// assert_eq!(json["version"], 1);
/// assert_eq!(json["state"], "firing");
/// assert_eq!(json["at"], "2026-12-03T07:00:00Z");
/// assert_eq!(json["details"]["failures"], "3");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Notice {
    /// The JSON form's version, [`NOTICE_VERSION`].
    pub version: u32,
    /// A stable id of the incident: the same for its firing and its resolved notice, so a
    /// receiver can pair them (and drop a duplicate sent by a retry).
    pub incident_key: String,
    /// The rule that fired (`failed_in_a_row`, `running_too_long`, `missed_slot`,
    /// `instance_gone`, `lock_wait`, ...).
    pub rule: String,
    /// The job concerned, if the rule is about one.
    pub job: Option<String>,
    /// The instance concerned, if the rule is about one.
    pub instance: Option<String>,
    /// Firing or resolved.
    pub state: NoticeState,
    /// One line for a person.
    pub summary: String,
    /// Facts behind the summary, by name (sorted by name in every form).
    pub details: BTreeMap<String, String>,
    /// When the rule's condition was seen to begin or end, in the database's time.
    pub at: DateTime<Utc>,
    /// Which cluster (several may share one receiver): the scheduler's `AlertRules::cluster`,
    /// by default its lock provider's description.
    pub cluster: String,
}

impl Notice {
    /// A notice without job, instance or details.
    ///
    /// ```
    /// use lock_alerts::{Notice, NoticeState};
    /// let notice = Notice::new(
    ///     "instance_gone/web-2",
    ///     "instance_gone",
    ///     NoticeState::Resolved,
    ///     "web-2 is back",
    ///     chrono::Utc::now(),
    ///     "shedlock",
    /// );
    /// assert_eq!(notice.job, None);
    /// assert_eq!(notice.title(), "RESOLVED instance_gone: shedlock");
    /// ```
    pub fn new(
        incident_key: impl Into<String>,
        rule: impl Into<String>,
        state: NoticeState,
        summary: impl Into<String>,
        at: DateTime<Utc>,
        cluster: impl Into<String>,
    ) -> Self {
        Notice {
            version: NOTICE_VERSION,
            incident_key: incident_key.into(),
            rule: rule.into(),
            job: None,
            instance: None,
            state,
            summary: summary.into(),
            details: BTreeMap::new(),
            at,
            cluster: cluster.into(),
        }
    }

    /// The job concerned.
    ///
    /// ```
    /// # use lock_alerts::{Notice, NoticeState};
    /// # let notice = Notice::new("k", "missed_slot", NoticeState::Firing, "s", chrono::Utc::now(), "c");
    /// assert_eq!(notice.job("report").job.as_deref(), Some("report"));
    /// ```
    pub fn job(mut self, job: impl Into<String>) -> Self {
        self.job = Some(job.into());
        self
    }

    /// The instance concerned.
    ///
    /// ```
    /// # use lock_alerts::{Notice, NoticeState};
    /// # let notice = Notice::new("k", "instance_gone", NoticeState::Firing, "s", chrono::Utc::now(), "c");
    /// assert_eq!(notice.instance("web-1").instance.as_deref(), Some("web-1"));
    /// ```
    pub fn instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    /// Adds (or replaces) one detail.
    ///
    /// ```
    /// # use lock_alerts::{Notice, NoticeState};
    /// # let notice = Notice::new("k", "running_too_long", NoticeState::Firing, "s", chrono::Utc::now(), "c");
    /// let notice = notice.detail("running_for", "PT2H");
    /// assert_eq!(notice.details["running_for"], "PT2H");
    /// ```
    pub fn detail(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.details.insert(name.into(), value.into());
        self
    }

    /// `"<STATE> <rule>: <job, else instance, else cluster>"`, the mail subject's and the Slack
    /// message's first words.
    ///
    /// ```
    /// # use lock_alerts::{Notice, NoticeState};
    /// let notice = Notice::new("k", "lock_contention", NoticeState::Firing, "s", chrono::Utc::now(), "locks")
    ///     .instance("web-3");
    /// assert_eq!(notice.title(), "FIRING lock_contention: web-3");
    /// ```
    pub fn title(&self) -> String {
        let subject = self
            .job
            .as_deref()
            .or(self.instance.as_deref())
            .unwrap_or(&self.cluster);
        format!("{} {}: {subject}", self.state, self.rule)
    }

    /// The plain-text form: the title, the summary, then every field and detail on a line of
    /// its own (the mail body).
    ///
    /// ```
    /// # use lock_alerts::{Notice, NoticeState};
    /// # use chrono::TimeZone;
    /// let at = chrono::Utc.with_ymd_and_hms(2026, 12, 3, 7, 0, 0).unwrap();
    /// let notice = Notice::new("missed_slot/report", "missed_slot", NoticeState::Firing,
    ///     "report did not run at 07:00", at, "shedlock")
    ///     .job("report")
    ///     .detail("slot", "2026-12-03T07:00:00Z");
    /// assert_eq!(notice.text(), "\
    /// FIRING missed_slot: report
    /// report did not run at 07:00
    ///
    /// cluster:  shedlock
    /// rule:     missed_slot
    /// job:      report
    /// at:       2026-12-03T07:00:00Z
    /// incident: missed_slot/report
    ///
    /// slot: 2026-12-03T07:00:00Z
    /// ");
    /// ```
    pub fn text(&self) -> String {
        let mut text = format!("{}\n{}\n\n", self.title(), self.summary);
        let mut line = |name: &str, value: &str| {
            let _ = writeln!(text, "{:<10}{value}", format!("{name}:"));
        };
        line("cluster", &self.cluster);
        line("rule", &self.rule);
        if let Some(job) = &self.job {
            line("job", job);
        }
        if let Some(instance) = &self.instance {
            line("instance", instance);
        }
        line("at", &self.at_rfc3339());
        line("incident", &self.incident_key);
        if !self.details.is_empty() {
            text.push('\n');
            for (name, value) in &self.details {
                let _ = writeln!(text, "{name}: {value}");
            }
        }
        text
    }

    /// `at` as RFC 3339 in UTC with a `Z`, as in the JSON form.
    pub(crate) fn at_rfc3339(&self) -> String {
        self.at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    }
}
