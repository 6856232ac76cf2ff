//! [`SlackNotifier`]: the notice as a Slack incoming-webhook message (Mattermost and others
//! that accept Slack's format take it too).

use async_trait::async_trait;
use reqwest::header::CONTENT_TYPE;
use serde_json::{Value, json};

use crate::redact::{RawUrl, SecretUrl};
use crate::{ConfigError, Notice, NoticeState, Notifier, NotifyError, RetryPolicy};

/// How a [`SlackNotifier`] is set up: the incoming webhook's URL (it is the secret:
/// `Debug` shows only `scheme://host/…`) and the retries.
///
/// ```
/// use lock_alerts::SlackConfig;
///
/// let config = SlackConfig::new("https://hooks.slack.com/services/T000/B000/XXXX");
/// assert!(!format!("{config:?}").contains("XXXX"));
/// ```
#[derive(Clone, Debug)]
pub struct SlackConfig {
    url: RawUrl,
    name: String,
    retry: RetryPolicy,
}

impl SlackConfig {
    /// A Slack incoming webhook at `url`, named `slack`, with the default [`RetryPolicy`].
    ///
    /// ```
    /// let config = lock_alerts::SlackConfig::new("https://hooks.slack.com/services/T/B/X");
    /// # let _ = config;
    /// ```
    pub fn new(url: impl Into<String>) -> Self {
        SlackConfig {
            url: RawUrl(url.into()),
            name: "slack".into(),
            retry: RetryPolicy::default(),
        }
    }

    /// The name in logs and errors (default `slack`).
    ///
    /// ```
    /// let config = lock_alerts::SlackConfig::new("https://hooks.slack.com/services/T/B/X")
    ///     .name("slack-oncall");
    /// # let _ = config;
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Attempts, backoff and per-attempt timeout (default [`RetryPolicy::default`]).
    ///
    /// ```
    /// let config = lock_alerts::SlackConfig::new("https://hooks.slack.com/services/T/B/X")
    ///     .retry(lock_alerts::RetryPolicy::default().attempts(2));
    /// # let _ = config;
    /// ```
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
}

/// Posts each [`Notice`] to a Slack incoming webhook: `text` (the title and summary, what
/// notifications and old clients show) and `blocks` (a section with the summary and fields, a
/// context line with cluster, time and incident key). See [`SlackNotifier::message`].
///
/// ```no_run
/// use lock_alerts::{Notifier, SlackConfig, SlackNotifier};
///
/// # async fn example(notice: lock_alerts::Notice) -> Result<(), Box<dyn std::error::Error>> {
/// let slack = SlackNotifier::new(SlackConfig::new(
///     "https://hooks.slack.com/services/T000/B000/XXXX",
/// ))?;
/// slack.notify(&notice).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct SlackNotifier {
    name: String,
    url: SecretUrl,
    retry: RetryPolicy,
    client: reqwest::Client,
}

impl SlackNotifier {
    /// Checks the URL and builds the HTTP client.
    ///
    /// ```
    /// use lock_alerts::{SlackConfig, SlackNotifier};
    /// assert!(SlackNotifier::new(SlackConfig::new("hooks.slack.com/x")).is_err());
    /// ```
    pub fn new(config: SlackConfig) -> Result<Self, ConfigError> {
        Ok(SlackNotifier {
            name: config.name,
            url: SecretUrl::parse_http("slack", &config.url.0)?,
            retry: config.retry,
            client: crate::http::client("slack", &[])?,
        })
    }

    /// The message posted for `notice`: Slack's `text` and `blocks`, with `&`, `<` and `>`
    /// escaped as Slack's mrkdwn requires.
    ///
    /// ```
    /// use lock_alerts::{Notice, NoticeState, SlackNotifier};
    ///
    /// let notice = Notice::new("k", "failed_in_a_row", NoticeState::Firing,
    ///     "report failed: a < b", chrono::Utc::now(), "shedlock").job("report");
    /// let message = SlackNotifier::message(&notice);
    /// assert_eq!(
    ///     message["text"],
    ///     ":rotating_light: FIRING failed_in_a_row: report: report failed: a &lt; b"
    /// );
    /// assert_eq!(message["blocks"][0]["type"], "section");
    /// ```
    pub fn message(notice: &Notice) -> Value {
        let icon = match notice.state {
            NoticeState::Firing => ":rotating_light:",
            NoticeState::Resolved => ":white_check_mark:",
        };
        let title = escape(&notice.title());
        let summary = escape(&notice.summary);
        let mut fields =
            vec![json!({"type": "mrkdwn", "text": format!("*Rule*\n{}", escape(&notice.rule))})];
        if let Some(job) = &notice.job {
            fields.push(json!({"type": "mrkdwn", "text": format!("*Job*\n{}", escape(job))}));
        }
        if let Some(instance) = &notice.instance {
            fields.push(
                json!({"type": "mrkdwn", "text": format!("*Instance*\n{}", escape(instance))}),
            );
        }
        // Slack allows at most 10 fields in a section.
        for (name, value) in notice.details.iter().take(10 - fields.len()) {
            fields.push(
                json!({"type": "mrkdwn", "text": format!("*{}*\n{}", escape(name), escape(value))}),
            );
        }
        json!({
            "text": format!("{icon} {title}: {summary}"),
            "blocks": [
                {
                    "type": "section",
                    "text": {"type": "mrkdwn", "text": format!("{icon} *{title}*\n{summary}")},
                    "fields": fields,
                },
                {
                    "type": "context",
                    "elements": [{
                        "type": "mrkdwn",
                        "text": format!(
                            "cluster {} · {} · incident {}",
                            escape(&notice.cluster),
                            notice.at_rfc3339(),
                            escape(&notice.incident_key)
                        ),
                    }],
                },
            ],
        })
    }
}

/// Slack's three mrkdwn control characters, escaped as its documentation asks.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[async_trait]
impl Notifier for SlackNotifier {
    fn name(&self) -> &str {
        &self.name
    }

    async fn notify(&self, notice: &Notice) -> Result<(), NotifyError> {
        let body =
            serde_json::to_vec(&Self::message(notice)).map_err(|source| NotifyError::Encode {
                notifier: self.name.clone(),
                source: source.into(),
            })?;
        crate::http::send(&self.name, &self.url, &self.retry, || {
            self.client
                .post(self.url.expose().clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone())
        })
        .await
        .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mrkdwn_control_characters_are_escaped() {
        assert_eq!(escape("<!channel> & co"), "&lt;!channel&gt; &amp; co");
    }

    #[test]
    fn a_section_holds_at_most_ten_fields() {
        let mut notice = Notice::new("k", "r", NoticeState::Firing, "s", chrono::Utc::now(), "c")
            .job("j")
            .instance("i");
        for n in 0..20 {
            notice = notice.detail(format!("d{n:02}"), "v");
        }
        let message = SlackNotifier::message(&notice);
        assert_eq!(message["blocks"][0]["fields"].as_array().unwrap().len(), 10);
    }
}
