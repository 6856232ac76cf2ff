//! [`WebhookNotifier`]: the notice as JSON, POSTed and signed.

use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use reqwest::header::CONTENT_TYPE;

use crate::redact::{Pems, RawUrl, Secret, SecretUrl};
use crate::signature::{SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};
use crate::{ConfigError, Notice, Notifier, NotifyError, RetryPolicy};

/// How a [`WebhookNotifier`] is set up: the URL, the signing secret, the retries.
///
/// `Debug` shows the URL as `scheme://host:port/…` and the secret as `<redacted>`.
///
/// ```
/// use std::time::Duration;
/// use lock_alerts::{RetryPolicy, WebhookConfig};
///
/// let config = WebhookConfig::new("https://alerts.example.com/hooks/locks?token=abc")
///     .secret("whsec_1234")
///     .name("ops-webhook")
///     .retry(RetryPolicy::default().attempts(5));
/// let shown = format!("{config:?}");
/// assert!(shown.contains("https://alerts.example.com/…"), "{shown}");
/// assert!(!shown.contains("whsec_1234") && !shown.contains("token=abc"), "{shown}");
/// ```
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    url: RawUrl,
    secret: Option<Secret>,
    name: String,
    retry: RetryPolicy,
    root_certificates: Pems,
}

impl WebhookConfig {
    /// A webhook to `url` (`http` or `https`), unsigned, named `webhook`, with the default
    /// [`RetryPolicy`]. The URL is checked by [`WebhookNotifier::new`].
    ///
    /// ```
    /// let config = lock_alerts::WebhookConfig::new("https://alerts.example.com/hook");
    /// # let _ = config;
    /// ```
    pub fn new(url: impl Into<String>) -> Self {
        WebhookConfig {
            url: RawUrl(url.into()),
            secret: None,
            name: "webhook".into(),
            retry: RetryPolicy::default(),
            root_certificates: Pems::default(),
        }
    }

    /// Also trusts the certificate authority (or authorities) in `pem`, besides Mozilla's
    /// roots: for a receiver inside a company's network. Checked by [`WebhookNotifier::new`].
    ///
    /// ```
    /// use lock_alerts::{ConfigError, WebhookConfig, WebhookNotifier};
    /// let config = WebhookConfig::new("https://alerts.corp/hook").root_certificate_pem("not PEM");
    /// assert!(matches!(WebhookNotifier::new(config), Err(ConfigError::Tls { .. })));
    /// ```
    pub fn root_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certificates.0.push(pem.into());
        self
    }

    /// Signs every request with `secret` (HMAC-SHA256; see [`crate::verify_signature`]).
    /// Without one, the signature headers are not sent.
    ///
    /// ```
    /// let config = lock_alerts::WebhookConfig::new("https://example.com/h").secret("s3cret");
    /// # let _ = config;
    /// ```
    pub fn secret(mut self, secret: impl AsRef<[u8]>) -> Self {
        self.secret = Some(Secret::new(secret.as_ref()));
        self
    }

    /// The name in logs and errors (default `webhook`).
    ///
    /// ```
    /// let config = lock_alerts::WebhookConfig::new("https://example.com/h").name("pagerduty");
    /// # let _ = config;
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Attempts, backoff and per-attempt timeout (default [`RetryPolicy::default`]).
    ///
    /// ```
    /// let config = lock_alerts::WebhookConfig::new("https://example.com/h")
    ///     .retry(lock_alerts::RetryPolicy::no_retry());
    /// # let _ = config;
    /// ```
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
}

/// POSTs each [`Notice`] as JSON (the README's schema) to a URL, signed when a secret is set:
/// [`TIMESTAMP_HEADER`] holds the Unix time, [`SIGNATURE_HEADER`] `sha256=<hex>` of
/// `"{timestamp}.{body}"`. Any 2xx is delivered; see [`RetryPolicy`] for what is retried.
///
/// ```no_run
/// use lock_alerts::{Notice, NoticeState, Notifier, WebhookConfig, WebhookNotifier};
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// let webhook = WebhookNotifier::new(
///     WebhookConfig::new("https://alerts.example.com/hooks/locks").secret("whsec_1234"),
/// )?;
/// let notice = Notice::new(
///     "failed_in_a_row/report",
///     "failed_in_a_row",
///     NoticeState::Firing,
///     "report failed 3 times in a row",
///     chrono::Utc::now(),
///     "shedlock",
/// );
/// webhook.notify(&notice).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct WebhookNotifier {
    name: String,
    url: SecretUrl,
    secret: Option<Secret>,
    retry: RetryPolicy,
    client: reqwest::Client,
}

impl WebhookNotifier {
    /// Checks `config` (the URL parses and is `http`/`https`, a secret is not empty, each added
    /// root certificate is PEM) and builds the HTTP client.
    ///
    /// ```
    /// use lock_alerts::{ConfigError, WebhookConfig, WebhookNotifier};
    ///
    /// assert!(WebhookNotifier::new(WebhookConfig::new("https://example.com/hook")).is_ok());
    /// let empty = WebhookNotifier::new(WebhookConfig::new("https://example.com/hook").secret(""));
    /// assert!(matches!(empty, Err(ConfigError::EmptySecret { what: "webhook" })));
    /// ```
    pub fn new(config: WebhookConfig) -> Result<Self, ConfigError> {
        let url = SecretUrl::parse_http("webhook", &config.url.0)?;
        if config
            .secret
            .as_ref()
            .is_some_and(|s| s.expose().is_empty())
        {
            return Err(ConfigError::EmptySecret { what: "webhook" });
        }
        Ok(WebhookNotifier {
            name: config.name,
            url,
            secret: config.secret,
            retry: config.retry,
            client: crate::http::client("webhook", &config.root_certificates.0)?,
        })
    }
}

#[async_trait]
impl Notifier for WebhookNotifier {
    fn name(&self) -> &str {
        &self.name
    }

    async fn notify(&self, notice: &Notice) -> Result<(), NotifyError> {
        let body = serde_json::to_vec(notice).map_err(|source| NotifyError::Encode {
            notifier: self.name.clone(),
            source: source.into(),
        })?;
        crate::http::send(&self.name, &self.url, &self.retry, || {
            let mut request = self
                .client
                .post(self.url.expose().clone())
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
            if let Some(secret) = &self.secret {
                // Signed per attempt: a retry after a long backoff is not refused as stale.
                let timestamp = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default()
                    .as_secs();
                request = request
                    .header(TIMESTAMP_HEADER, timestamp.to_string())
                    .header(SIGNATURE_HEADER, sign(secret.expose(), timestamp, &body));
            }
            request
        })
        .await
        .map(drop)
    }
}
