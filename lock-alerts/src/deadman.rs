//! [`DeadManSwitch`]: pings to an outside monitor at a run's start and end, so a cluster that
//! is entirely down still alerts: the monitor notices the pings stop.
//!
//! Decisions, and why: a ping is short and bounded (by default 3 attempts of at most 5 s
//! each, at most 1 s apart), and its failure is logged at WARN (URL redacted) and reported as
//! `false`, never as an error: a monitor's outage must not fail the job it watches. The
//! request follows each service's documented convention, so the monitor needs no set-up
//! beyond the check's URL.

use reqwest::header::CONTENT_TYPE;
use std::time::Duration;

use crate::redact::SecretUrl;
use crate::{ConfigError, RetryPolicy};

/// The longest failure message sent to healthchecks.io (its default limit is 100 kB; the
/// start of a message is what a person reads).
const HEALTHCHECKS_MESSAGE_MAX: usize = 10_000;
/// Cronitor's documented limit for `message`.
const CRONITOR_MESSAGE_MAX: usize = 2_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Convention {
    Healthchecks,
    Cronitor,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ping {
    Start,
    Success,
    Fail,
}

/// Pings one monitor check at a run's start, success and failure.
///
/// - [`healthchecks`](Self::healthchecks) (healthchecks.io and self-hosted Healthchecks):
///   `POST <url>/start`, `POST <url>`, `POST <url>/fail` with the message as the body; a run id
///   is sent as `?rid=` (Healthchecks wants a UUID there).
/// - [`cronitor`](Self::cronitor) (a Cronitor telemetry URL,
///   `https://cronitor.link/p/<key>/<monitor>`): `GET <url>?state=run`, `?state=complete`,
///   `?state=fail&message=...`; a run id is sent as `&series=`.
///
/// ```no_run
/// use lock_alerts::DeadManSwitch;
///
/// # async fn example() -> Result<(), lock_alerts::ConfigError> {
/// let check = DeadManSwitch::healthchecks("https://hc-ping.com/7a5f0b1e-2f3c-4b6d-9e8f-0a1b2c3d4e5f")?;
/// check.start().await;
/// let outcome: Result<(), String> = Err("database unreachable".into());
/// match outcome {
///     Ok(()) => check.success().await,
///     Err(message) => check.fail(&message).await,
/// };
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct DeadManSwitch {
    what: &'static str,
    convention: Convention,
    url: SecretUrl,
    retry: RetryPolicy,
    client: reqwest::Client,
}

impl DeadManSwitch {
    /// A healthchecks.io check at `url` (`https://hc-ping.com/<uuid>` or
    /// `https://hc-ping.com/<ping-key>/<slug>`, or a self-hosted instance's).
    ///
    /// ```
    /// let check = lock_alerts::DeadManSwitch::healthchecks("https://hc-ping.com/0f1e2d3c")?;
    /// assert!(!format!("{check:?}").contains("0f1e2d3c"));
    /// # Ok::<(), lock_alerts::ConfigError>(())
    /// ```
    pub fn healthchecks(url: &str) -> Result<Self, ConfigError> {
        Self::new(Convention::Healthchecks, "healthchecks", url)
    }

    /// A Cronitor monitor's telemetry URL (`https://cronitor.link/p/<key>/<monitor>`).
    ///
    /// ```
    /// let check = lock_alerts::DeadManSwitch::cronitor("https://cronitor.link/p/KEY/nightly")?;
    /// # let _ = check;
    /// # Ok::<(), lock_alerts::ConfigError>(())
    /// ```
    pub fn cronitor(url: &str) -> Result<Self, ConfigError> {
        Self::new(Convention::Cronitor, "cronitor", url)
    }

    fn new(convention: Convention, what: &'static str, url: &str) -> Result<Self, ConfigError> {
        Ok(DeadManSwitch {
            convention,
            url: SecretUrl::parse_http(what, url)?,
            retry: RetryPolicy::default()
                .attempts(3)
                .base_delay(Duration::from_millis(200))
                .max_delay(Duration::from_secs(1))
                .attempt_timeout(Duration::from_secs(5)),
            client: crate::http::client(what, &[])?,
            what,
        })
    }

    /// Also trusts the certificate authority in `pem` (a self-hosted Healthchecks behind a
    /// company's own authority), besides Mozilla's roots.
    ///
    /// ```
    /// let check = lock_alerts::DeadManSwitch::healthchecks("https://hc.corp/ping/abc")?
    ///     .root_certificate_pem("not PEM");
    /// assert!(check.is_err());
    /// # Ok::<(), lock_alerts::ConfigError>(())
    /// ```
    pub fn root_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Result<Self, ConfigError> {
        self.client = crate::http::client(self.what, &[pem.into()])?;
        Ok(self)
    }

    /// Attempts and timeouts (default: 3 attempts, 200 ms then 400 ms apart, at most 1 s
    /// apart, 5 s per attempt).
    ///
    /// ```
    /// use lock_alerts::{DeadManSwitch, RetryPolicy};
    /// let check = DeadManSwitch::healthchecks("https://hc-ping.com/0f1e2d3c")?
    ///     .retry(RetryPolicy::no_retry());
    /// # let _ = check;
    /// # Ok::<(), lock_alerts::ConfigError>(())
    /// ```
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The run started. Returns whether the ping was delivered (a failure is logged).
    ///
    /// ```no_run
    /// # async fn example() -> Result<(), lock_alerts::ConfigError> {
    /// let check = lock_alerts::DeadManSwitch::cronitor("https://cronitor.link/p/KEY/nightly")?;
    /// if !check.start().await {
    ///     // Already logged at WARN; the run goes on regardless.
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn start(&self) -> bool {
        self.ping(Ping::Start, None, "").await
    }

    /// The run succeeded. Returns whether the ping was delivered (a failure is logged).
    ///
    /// ```no_run
    /// # async fn example(check: lock_alerts::DeadManSwitch) {
    /// check.success().await;
    /// # }
    /// ```
    pub async fn success(&self) -> bool {
        self.ping(Ping::Success, None, "").await
    }

    /// The run failed with `message` (the body for Healthchecks, `message=` for Cronitor;
    /// cut to 10,000 and 2,000 bytes). Returns whether the ping was delivered.
    ///
    /// ```no_run
    /// # async fn example(check: lock_alerts::DeadManSwitch) {
    /// check.fail("export: the bucket refused the upload").await;
    /// # }
    /// ```
    pub async fn fail(&self, message: &str) -> bool {
        self.ping(Ping::Fail, None, message).await
    }

    /// The same pings tagged with a run id, so the monitor pairs a start with its end and
    /// measures the run's duration (Healthchecks' `rid`, a UUID; Cronitor's `series`).
    ///
    /// ```no_run
    /// # async fn example(check: lock_alerts::DeadManSwitch) {
    /// let run = check.run("5d2b1c1e-8e4a-4b8a-9a57-3f2e1d0c9b8a");
    /// run.start().await;
    /// run.success().await;
    /// # }
    /// ```
    pub fn run(&self, run_id: impl Into<String>) -> RunPings<'_> {
        RunPings {
            switch: self,
            run_id: run_id.into(),
        }
    }

    async fn ping(&self, ping: Ping, run_id: Option<&str>, message: &str) -> bool {
        let request = self.request(ping, run_id, message);
        let what = self.what;
        let sent = crate::http::send(what, &self.url, &self.retry, || {
            request.try_clone().expect("a ping's body is in memory")
        })
        .await;
        match sent {
            Ok(_) => true,
            Err(error) => {
                tracing::warn!(
                    monitor = what,
                    url = %self.url,
                    ping = ?ping,
                    error = %crate::error::chain(&error),
                    "dead-man-switch ping not delivered; the run goes on"
                );
                false
            }
        }
    }

    fn request(&self, ping: Ping, run_id: Option<&str>, message: &str) -> reqwest::RequestBuilder {
        let mut url = self.url.expose().clone();
        match self.convention {
            Convention::Healthchecks => {
                let suffix = match ping {
                    Ping::Start => "/start",
                    Ping::Success => "",
                    Ping::Fail => "/fail",
                };
                let path = format!("{}{suffix}", url.path().trim_end_matches('/'));
                url.set_path(&path);
                if let Some(run_id) = run_id {
                    url.query_pairs_mut().append_pair("rid", run_id);
                }
                self.client
                    .post(url)
                    .header(CONTENT_TYPE, "text/plain; charset=utf-8")
                    .body(cut(message, HEALTHCHECKS_MESSAGE_MAX).to_owned())
            }
            Convention::Cronitor => {
                {
                    let mut query = url.query_pairs_mut();
                    query.append_pair(
                        "state",
                        match ping {
                            Ping::Start => "run",
                            Ping::Success => "complete",
                            Ping::Fail => "fail",
                        },
                    );
                    if !message.is_empty() {
                        query.append_pair("message", cut(message, CRONITOR_MESSAGE_MAX));
                    }
                    if let Some(run_id) = run_id {
                        query.append_pair("series", run_id);
                    }
                }
                self.client.get(url)
            }
        }
    }
}

/// [`DeadManSwitch`]'s pings for one run, tagged with its id ([`DeadManSwitch::run`]).
#[derive(Clone, Debug)]
pub struct RunPings<'a> {
    switch: &'a DeadManSwitch,
    run_id: String,
}

impl RunPings<'_> {
    /// The run started; see [`DeadManSwitch::start`].
    ///
    /// ```no_run
    /// # async fn example(check: lock_alerts::DeadManSwitch) {
    /// let run = check.run("5d2b1c1e-8e4a-4b8a-9a57-3f2e1d0c9b8a");
    /// run.start().await;
    /// # }
    /// ```
    pub async fn start(&self) -> bool {
        self.switch.ping(Ping::Start, Some(&self.run_id), "").await
    }

    /// The run succeeded; see [`DeadManSwitch::success`].
    ///
    /// ```no_run
    /// # async fn example(check: lock_alerts::DeadManSwitch) {
    /// let run = check.run("5d2b1c1e-8e4a-4b8a-9a57-3f2e1d0c9b8a");
    /// run.success().await;
    /// # }
    /// ```
    pub async fn success(&self) -> bool {
        self.switch
            .ping(Ping::Success, Some(&self.run_id), "")
            .await
    }

    /// The run failed; see [`DeadManSwitch::fail`].
    ///
    /// ```no_run
    /// # async fn example(check: lock_alerts::DeadManSwitch) {
    /// let run = check.run("5d2b1c1e-8e4a-4b8a-9a57-3f2e1d0c9b8a");
    /// run.fail("timed out").await;
    /// # }
    /// ```
    pub async fn fail(&self, message: &str) -> bool {
        self.switch
            .ping(Ping::Fail, Some(&self.run_id), message)
            .await
    }
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url_of(switch: &DeadManSwitch, ping: Ping, run_id: Option<&str>, message: &str) -> String {
        switch
            .request(ping, run_id, message)
            .build()
            .unwrap()
            .url()
            .to_string()
    }

    #[test]
    fn healthchecks_urls_follow_its_convention() {
        let check = DeadManSwitch::healthchecks("https://hc-ping.com/abc/").unwrap();
        assert_eq!(
            url_of(&check, Ping::Start, None, ""),
            "https://hc-ping.com/abc/start"
        );
        assert_eq!(
            url_of(&check, Ping::Success, None, ""),
            "https://hc-ping.com/abc"
        );
        assert_eq!(
            url_of(&check, Ping::Fail, Some("r-1"), "x"),
            "https://hc-ping.com/abc/fail?rid=r-1"
        );
        let slug = DeadManSwitch::healthchecks("https://hc-ping.com/key/nightly?create=1").unwrap();
        assert_eq!(
            url_of(&slug, Ping::Start, Some("r"), ""),
            "https://hc-ping.com/key/nightly/start?create=1&rid=r"
        );
    }

    #[test]
    fn cronitor_urls_follow_its_convention() {
        let check = DeadManSwitch::cronitor("https://cronitor.link/p/KEY/nightly").unwrap();
        assert_eq!(
            url_of(&check, Ping::Start, Some("s1"), ""),
            "https://cronitor.link/p/KEY/nightly?state=run&series=s1"
        );
        assert_eq!(
            url_of(&check, Ping::Success, None, ""),
            "https://cronitor.link/p/KEY/nightly?state=complete"
        );
        assert_eq!(
            url_of(&check, Ping::Fail, None, "disk full & more"),
            "https://cronitor.link/p/KEY/nightly?state=fail&message=disk+full+%26+more"
        );
    }

    #[test]
    fn long_messages_are_cut_at_a_character_boundary() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
        assert_eq!(cut("short", 100), "short");
    }
}
