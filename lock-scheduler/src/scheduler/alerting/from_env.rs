//! The alert settings from configuration: variables named `LOCK_ALERT_<SETTING>`, read by
//! [`SchedulerBuilder::overrides_from_env`](crate::SchedulerBuilder::overrides_from_env) beside
//! the jobs' `LOCK_JOB_..` overrides, checked at `start()`.
//!
//! Decisions, and why:
//! - **Notifiers from configuration are added** to those given to `.notifier(..)`; **rule
//!   values from configuration replace** those of `.alert_rules(..)`: configuration is what
//!   changes a deployed service without a rebuild.
//! - **A secret is never repeated**: an error names the variable, never its value (a URL may
//!   hold a token or a password).

use std::sync::Arc;

use lock_alerts::{
    Notifier, SlackConfig, SlackNotifier, SmtpConfig, SmtpNotifier, WebhookConfig, WebhookNotifier,
};

use super::AlertRules;
use crate::{ALERT_ENV_PREFIX, parse_duration};

/// The notifiers' settings, after the prefix.
const NOTIFIER_SETTINGS: [&str; 6] = [
    "WEBHOOK_URL",
    "WEBHOOK_SECRET",
    "SLACK_URL",
    "SMTP_URL",
    "MAIL_FROM",
    "MAIL_TO",
];

/// The rules' settings, after the prefix: any of them gives rules even without
/// `.alert_rules(..)` (the defaults, with these values).
const RULE_SETTINGS: [&str; 7] = [
    "FAILED_IN_A_ROW",
    "RUNNING_LONGER_THAN",
    "LOCK_WAIT_ABOVE",
    "MISSED_SLOTS",
    "INSTANCES_GONE",
    "EVERY",
    "CLUSTER",
];

/// What the variables ask for: notifiers to add, and the rules with their values applied.
pub(super) struct FromEnv {
    pub(super) notifiers: Vec<Arc<dyn Notifier>>,
    pub(super) rules: Option<AlertRules>,
}

/// Reads `vars` (each named `LOCK_ALERT_..`) over `rules`; fails naming every variable that is
/// unknown or refused.
pub(super) fn read(
    vars: &[(String, String)],
    rules: Option<AlertRules>,
) -> Result<FromEnv, String> {
    let get = |setting: &str| {
        vars.iter()
            .rev()
            .find(|(name, _)| name.strip_prefix(ALERT_ENV_PREFIX) == Some(setting))
            .map(|(_, value)| value.as_str())
    };
    let mut problems = Vec::new();
    for (name, _) in vars {
        let setting = &name[ALERT_ENV_PREFIX.len()..];
        if !NOTIFIER_SETTINGS.contains(&setting) && !RULE_SETTINGS.contains(&setting) {
            problems.push(format!(
                "the variable {name} is no alert setting: they are {ALERT_ENV_PREFIX}<{}|{}>",
                NOTIFIER_SETTINGS.join("|"),
                RULE_SETTINGS.join("|")
            ));
        }
    }
    let mut notifiers: Vec<Arc<dyn Notifier>> = Vec::new();
    let mut refused = |variable: &str, why: String| {
        problems.push(format!("{ALERT_ENV_PREFIX}{variable}: {why}"));
    };
    match (get("WEBHOOK_URL"), get("WEBHOOK_SECRET")) {
        (Some(url), secret) => {
            let mut config = WebhookConfig::new(url);
            if let Some(secret) = secret {
                config = config.secret(secret);
            }
            match WebhookNotifier::new(config) {
                Ok(webhook) => notifiers.push(Arc::new(webhook)),
                Err(e) => refused("WEBHOOK_URL", e.to_string()),
            }
        }
        (None, Some(_)) => refused("WEBHOOK_SECRET", "set without WEBHOOK_URL".into()),
        (None, None) => {}
    }
    if let Some(url) = get("SLACK_URL") {
        match SlackNotifier::new(SlackConfig::new(url)) {
            Ok(slack) => notifiers.push(Arc::new(slack)),
            Err(e) => refused("SLACK_URL", e.to_string()),
        }
    }
    match (get("SMTP_URL"), get("MAIL_FROM"), get("MAIL_TO")) {
        (Some(url), Some(from), Some(to)) => {
            let config = SmtpConfig::from_url(url, from).map(|config| {
                to.split(',')
                    .map(str::trim)
                    .filter(|to| !to.is_empty())
                    .fold(config, SmtpConfig::to)
            });
            match config.and_then(SmtpNotifier::new) {
                Ok(mail) => notifiers.push(Arc::new(mail)),
                Err(e) => refused("SMTP_URL", e.to_string()),
            }
        }
        (None, None, None) => {}
        _ => refused(
            "SMTP_URL",
            "mail needs SMTP_URL, MAIL_FROM and MAIL_TO (comma-separated) together".into(),
        ),
    }

    let touches_rules = RULE_SETTINGS.iter().any(|s| get(s).is_some());
    let mut rules = rules.or_else(|| touches_rules.then(AlertRules::default));
    if let Some(rules) = &mut rules {
        if let Some(n) = get("FAILED_IN_A_ROW") {
            match n.parse() {
                Ok(n) => rules.failed_in_a_row = n,
                Err(_) => refused(
                    "FAILED_IN_A_ROW",
                    format!("{n:?} is not a count (0 turns it off)"),
                ),
            }
        }
        for (setting, field) in [
            ("RUNNING_LONGER_THAN", &mut rules.running_longer_than),
            ("LOCK_WAIT_ABOVE", &mut rules.lock_wait_above),
        ] {
            if let Some(text) = get(setting) {
                match parse_duration(text) {
                    Ok(d) => *field = Some(d),
                    Err(e) => refused(setting, e.to_string()),
                }
            }
        }
        for (setting, field) in [
            ("MISSED_SLOTS", &mut rules.missed_slots),
            ("INSTANCES_GONE", &mut rules.instances_gone),
        ] {
            if let Some(text) = get(setting) {
                match text {
                    "true" => *field = true,
                    "false" => *field = false,
                    other => refused(setting, format!("{other:?} is not true or false")),
                }
            }
        }
        if let Some(text) = get("EVERY") {
            match parse_duration(text) {
                Ok(d) => rules.every = d,
                Err(e) => refused("EVERY", e.to_string()),
            }
        }
        if let Some(name) = get("CLUSTER") {
            rules.cluster = Some(name.to_owned());
        }
    }
    if problems.is_empty() {
        Ok(FromEnv { notifiers, rules })
    } else {
        Err(format!("alert settings refused: {}", problems.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn notifiers_and_rules_from_variables() {
        let read = read(
            &vars(&[
                ("LOCK_ALERT_WEBHOOK_URL", "https://ops.example.com/hook"),
                ("LOCK_ALERT_WEBHOOK_SECRET", "s3cret"),
                ("LOCK_ALERT_SMTP_URL", "smtp+plain://127.0.0.1:2525"),
                ("LOCK_ALERT_MAIL_FROM", "locks@example.com"),
                ("LOCK_ALERT_MAIL_TO", "a@example.com, b@example.com"),
                ("LOCK_ALERT_FAILED_IN_A_ROW", "5"),
                ("LOCK_ALERT_RUNNING_LONGER_THAN", "PT30M"),
                ("LOCK_ALERT_INSTANCES_GONE", "false"),
            ]),
            None,
        )
        .unwrap();
        let names: Vec<&str> = read.notifiers.iter().map(|n| n.name()).collect();
        assert_eq!(names, ["webhook", "mail"]);
        let rules = read.rules.expect("rules set");
        assert_eq!(rules.failed_in_a_row, 5);
        assert_eq!(
            rules.running_longer_than,
            Some(std::time::Duration::from_secs(1800))
        );
        assert!(!rules.instances_gone);
        assert!(rules.missed_slots, "what no variable names keeps its value");
    }

    #[test]
    fn every_mistake_is_named_and_no_secret_repeated() {
        let error = read(
            &vars(&[
                ("LOCK_ALERT_WEBHOOK_URL", "ftp://hunter2@example.com"),
                (
                    "LOCK_ALERT_SMTP_URL",
                    "smtp://user:hunter2@mail.example.com",
                ),
                ("LOCK_ALERT_FAILED_IN_A_ROW", "three"),
                ("LOCK_ALERT_WEBHOK_URL", "https://example.com"),
            ]),
            None,
        )
        .err()
        .expect("refused");
        assert!(
            error.contains("LOCK_ALERT_WEBHOOK_URL: invalid webhook URL"),
            "{error}"
        );
        assert!(error.contains("LOCK_ALERT_SMTP_URL: mail needs"), "{error}");
        assert!(
            error.contains("LOCK_ALERT_FAILED_IN_A_ROW: \"three\""),
            "{error}"
        );
        assert!(
            error.contains("LOCK_ALERT_WEBHOK_URL is no alert setting"),
            "{error}"
        );
        assert!(!error.contains("hunter2"), "{error}");
    }
}
