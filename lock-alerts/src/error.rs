//! The two errors: [`ConfigError`] when a notifier is built, [`NotifyError`] when it sends.
//!
//! Neither names a dependency's type: the causes are kept as boxed sources (read them with
//! `std::error::Error::source`), so a new `reqwest` or `lettre` is not a breaking change. Their
//! messages never hold a secret: URLs appear as `scheme://host:port/…` and a dependency's error
//! is stripped of its URL before it is kept.

/// A boxed cause.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A notifier's configuration that cannot work, found when the notifier is built.
///
/// ```
/// use lock_alerts::{ConfigError, WebhookConfig, WebhookNotifier};
///
/// let error = WebhookNotifier::new(WebhookConfig::new("ftp://example.com/hook")).unwrap_err();
/// assert!(matches!(error, ConfigError::InvalidUrl { what: "webhook", .. }));
/// assert_eq!(
///     error.to_string(),
///     "invalid webhook URL: scheme `ftp` is not http or https"
/// );
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A URL that does not parse, or is not `http`/`https` with a host. The URL itself is not
    /// repeated: it may be the secret.
    #[error("invalid {what} URL: {source}")]
    InvalidUrl {
        /// Which URL (`webhook`, `slack`, `healthchecks`, `cronitor`).
        what: &'static str,
        /// Why.
        source: BoxError,
    },
    /// A signing secret that is empty: it would sign with a key anyone can guess.
    #[error("the {what} signing secret is empty")]
    EmptySecret {
        /// Which notifier.
        what: &'static str,
    },
    /// A mail address that does not parse (`from` or `to`).
    #[error("invalid mail address in `{field}`: {address:?}: {source}")]
    InvalidAddress {
        /// `from` or `to`.
        field: &'static str,
        /// The address as given (an address is not a secret).
        address: String,
        /// Why.
        source: BoxError,
    },
    /// A mail notifier without any recipient.
    #[error("the mail notifier has no recipient (`to`)")]
    NoRecipient,
    /// A root certificate that is not PEM, or a TLS setting the TLS library refused.
    #[error("invalid TLS configuration for {what}: {source}")]
    Tls {
        /// Which notifier.
        what: &'static str,
        /// Why.
        source: BoxError,
    },
    /// The HTTP client could not be built (its TLS set-up failed).
    #[error("the HTTP client could not be built")]
    HttpClient(#[source] BoxError),
}

/// A notice that was not delivered: which notifier, to where, after how many attempts, and
/// why (the receiver's status, or the cause kept as the source).
///
/// ```
/// use lock_alerts::NotifyError;
///
/// let error = NotifyError::Status {
///     notifier: "ops-webhook".into(),
///     target: "https://alerts.example.com/…".into(),
///     status: 400,
///     attempts: 1,
/// };
/// assert_eq!(
///     error.to_string(),
///     "ops-webhook: https://alerts.example.com/… answered HTTP 400 (attempt 1, not retried)"
/// );
/// assert_eq!(error.status(), Some(400));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NotifyError {
    /// The receiver answered with a status that is not a success: a 4xx other than 408 and
    /// 429 at once, anything else once the attempts were spent.
    #[error("{notifier}: {target} answered HTTP {status} (attempt {attempts}{})",
        if retryable_status(*status) { ", the last" } else { ", not retried" })]
    Status {
        /// The notifier's name.
        notifier: String,
        /// Where it was sent, redacted (`scheme://host:port/…`).
        target: String,
        /// The HTTP status code.
        status: u16,
        /// How many attempts were made.
        attempts: u32,
    },
    /// The request or the mail did not get an answer: connection refused, TLS, a timeout, or
    /// the SMTP server's refusal. The cause is the source.
    #[error("{notifier}: sending to {target} failed (attempt {attempts}{})",
        if *retryable { ", the last" } else { ", not retried" })]
    Transport {
        /// The notifier's name.
        notifier: String,
        /// Where it was sent, redacted (`scheme://host:port/…` or `smtp://host:port`).
        target: String,
        /// How many attempts were made.
        attempts: u32,
        /// Whether this kind of failure is retried (it was, until the attempts were spent).
        retryable: bool,
        /// Why.
        source: BoxError,
    },
    /// The notice could not be turned into a request body or a mail.
    #[error("{notifier}: the notice could not be encoded")]
    Encode {
        /// The notifier's name.
        notifier: String,
        /// Why.
        source: BoxError,
    },
}

impl NotifyError {
    /// The name of the notifier that failed.
    ///
    /// ```
    /// let error = lock_alerts::NotifyError::Encode {
    ///     notifier: "mail".into(),
    ///     source: "bad header".into(),
    /// };
    /// assert_eq!(error.notifier(), "mail");
    /// ```
    pub fn notifier(&self) -> &str {
        match self {
            NotifyError::Status { notifier, .. }
            | NotifyError::Transport { notifier, .. }
            | NotifyError::Encode { notifier, .. } => notifier,
        }
    }

    /// The HTTP status the receiver answered, if it answered.
    ///
    /// ```
    /// let error = lock_alerts::NotifyError::Encode {
    ///     notifier: "mail".into(),
    ///     source: "bad header".into(),
    /// };
    /// assert_eq!(error.status(), None);
    /// ```
    pub fn status(&self) -> Option<u16> {
        match self {
            NotifyError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// How many attempts were made (0 when the notice could not even be encoded).
    ///
    /// ```
    /// let error = lock_alerts::NotifyError::Status {
    ///     notifier: "hook".into(),
    ///     target: "https://example.com/…".into(),
    ///     status: 503,
    ///     attempts: 4,
    /// };
    /// assert_eq!(error.attempts(), 4);
    /// ```
    pub fn attempts(&self) -> u32 {
        match self {
            NotifyError::Status { attempts, .. } | NotifyError::Transport { attempts, .. } => {
                *attempts
            }
            NotifyError::Encode { .. } => 0,
        }
    }
}

/// Whether an HTTP status is worth another attempt: the server's trouble (5xx), a rate limit
/// (429) or a request timeout (408). Any other 4xx says the request itself is wrong.
pub(crate) fn retryable_status(status: u16) -> bool {
    status >= 500 || status == 429 || status == 408
}

/// An error and its causes on one line (`error: cause: cause`), for log lines.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whether a TLS handshake failure is among `error`'s causes (a certificate that does not
/// verify, no common protocol): it fails the same way next time, so it is not retried.
/// reqwest and lettre both report one as a connection error with the rustls error inside an
/// `io::Error`, so the chain is searched for it.
pub(crate) fn caused_by_tls(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(cause) = next {
        if cause.is::<rustls::Error>() {
            return true;
        }
        // An io::Error's `source()` skips the error it wraps (it returns that error's source),
        // so the wrapped one is visited through `get_ref`.
        next = match cause
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => cause.source(),
        };
    }
    false
}
