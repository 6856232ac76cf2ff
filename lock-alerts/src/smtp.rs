//! [`SmtpNotifier`]: the notice as a plain-text mail, through `lettre`'s async SMTP transport.
//!
//! Decisions, and why: STARTTLS is the default and is *required* (lettre's `Tls::Required`: a
//! server that does not offer it is an error, never a silent fall-back to plain text, which an
//! attacker on the path could force); implicit TLS (SMTPS, port 465) is the other encrypted
//! mode; plain text is for a relay on the same host or a test server. Certificates are checked
//! against Mozilla's roots plus any the configuration adds (a company's relay). Addresses are
//! parsed when the notifier is built, so a typo fails at start-up, not at the first incident.

use std::time::Duration;

use async_trait::async_trait;
use lettre::message::header::ContentType;
use lettre::message::{Mailbox, Message};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, CertificateStore, Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use crate::redact::{Pems, Secret};
use crate::retry::{self, Attempt};
use crate::{ConfigError, Notice, Notifier, NotifyError, RetryPolicy};

/// How the connection to the SMTP server is protected.
///
/// ```
/// use lock_alerts::SmtpSecurity;
/// assert_eq!(SmtpSecurity::default(), SmtpSecurity::StartTls);
/// assert_eq!(SmtpSecurity::Tls.default_port(), 465);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SmtpSecurity {
    /// Plain connect, then `STARTTLS`, required (default; port 587).
    #[default]
    StartTls,
    /// TLS from the first byte, "SMTPS" (port 465).
    Tls,
    /// No encryption at all (port 25): only for a relay on the same host or a test server.
    /// Credentials and mail cross the network readable.
    Plain,
}

impl SmtpSecurity {
    /// The usual port of the mode: 587, 465 or 25.
    ///
    /// ```
    /// assert_eq!(lock_alerts::SmtpSecurity::StartTls.default_port(), 587);
    /// ```
    pub fn default_port(self) -> u16 {
        match self {
            SmtpSecurity::StartTls => 587,
            SmtpSecurity::Tls => 465,
            SmtpSecurity::Plain => 25,
        }
    }
}

/// How an [`SmtpNotifier`] is set up: server, security, credentials, sender and recipients.
///
/// `Debug` shows the password as `<redacted>`.
///
/// ```
/// use lock_alerts::{SmtpConfig, SmtpSecurity};
///
/// let config = SmtpConfig::new("smtp.example.com", "Locks <locks@example.com>")
///     .to("oncall@example.com")
///     .to("Ops <ops@example.com>")
///     .security(SmtpSecurity::StartTls)
///     .credentials("locks@example.com", "app-password");
/// assert!(!format!("{config:?}").contains("app-password"));
/// ```
#[derive(Clone, Debug)]
pub struct SmtpConfig {
    host: String,
    port: Option<u16>,
    security: SmtpSecurity,
    credentials: Option<(String, Secret)>,
    from: String,
    to: Vec<String>,
    root_certificates: Pems,
    subject_prefix: String,
    name: String,
    retry: RetryPolicy,
}

impl SmtpConfig {
    /// Mail through `host` from `from` (`addr@host` or `Name <addr@host>`), STARTTLS on 587,
    /// no credentials, no recipient yet (add them with [`to`](Self::to)).
    ///
    /// ```
    /// let config = lock_alerts::SmtpConfig::new("smtp.example.com", "locks@example.com");
    /// # let _ = config;
    /// ```
    pub fn new(host: impl Into<String>, from: impl Into<String>) -> Self {
        SmtpConfig {
            host: host.into(),
            port: None,
            security: SmtpSecurity::default(),
            credentials: None,
            from: from.into(),
            to: Vec::new(),
            root_certificates: Pems::default(),
            subject_prefix: "[scheduled-locks]".into(),
            name: "mail".into(),
            retry: RetryPolicy::default(),
        }
    }

    /// Mail through the server of `url`, from `from`: `smtp://host[:port]` for STARTTLS (587
    /// unless given), `smtps://host[:port]` for implicit TLS (465), `smtp+plain://host[:port]`
    /// for no encryption (25), each with optional `user:password@` credentials
    /// (percent-encoded). What configuration gives in one value (`LOCK_ALERT_SMTP_URL`).
    ///
    /// The URL is not repeated in an error: it may hold the password.
    ///
    /// ```
    /// use lock_alerts::{SmtpConfig, SmtpSecurity};
    ///
    /// let config = SmtpConfig::from_url("smtps://locks%40example.com:app-pass@smtp.example.com", "locks@example.com")?
    ///     .to("oncall@example.com");
    /// assert!(!format!("{config:?}").contains("app-pass"));
    /// let refused = SmtpConfig::from_url("http://user:hunter2@example.com", "locks@example.com");
    /// assert!(!refused.unwrap_err().to_string().contains("hunter2"));
    /// # Ok::<(), lock_alerts::ConfigError>(())
    /// ```
    pub fn from_url(url: &str, from: impl Into<String>) -> Result<Self, ConfigError> {
        let invalid = |why: &str| ConfigError::InvalidUrl {
            what: "smtp",
            source: why.to_owned().into(),
        };
        let parsed = url::Url::parse(url).map_err(|e| invalid(&e.to_string()))?;
        let security = match parsed.scheme() {
            "smtp" => SmtpSecurity::StartTls,
            "smtps" => SmtpSecurity::Tls,
            "smtp+plain" => SmtpSecurity::Plain,
            _ => return Err(invalid("the scheme is not smtp, smtps or smtp+plain")),
        };
        let host = parsed
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| invalid("no host"))?;
        if parsed.path() != "" && parsed.path() != "/" || parsed.query().is_some() {
            return Err(invalid("a path or query, which an SMTP URL does not have"));
        }
        let mut config = SmtpConfig::new(host, from).security(security);
        if let Some(port) = parsed.port() {
            config = config.port(port);
        }
        if !parsed.username().is_empty() {
            let decode = |text: &str| {
                percent_encoding::percent_decode_str(text)
                    .decode_utf8()
                    .map(|t| t.into_owned())
                    .map_err(|_| invalid("credentials that are not UTF-8 once decoded"))
            };
            let user = decode(parsed.username())?;
            let password = decode(parsed.password().unwrap_or_default())?;
            config = config.credentials(user, password);
        }
        Ok(config)
    }

    /// Adds a recipient (`addr@host` or `Name <addr@host>`).
    ///
    /// ```
    /// let config = lock_alerts::SmtpConfig::new("smtp.example.com", "locks@example.com")
    ///     .to("oncall@example.com");
    /// # let _ = config;
    /// ```
    pub fn to(mut self, address: impl Into<String>) -> Self {
        self.to.push(address.into());
        self
    }

    /// STARTTLS (default), implicit TLS or plain; see [`SmtpSecurity`].
    ///
    /// ```
    /// use lock_alerts::{SmtpConfig, SmtpSecurity};
    /// let config = SmtpConfig::new("smtp.example.com", "locks@example.com").security(SmtpSecurity::Tls);
    /// # let _ = config;
    /// ```
    pub fn security(mut self, security: SmtpSecurity) -> Self {
        self.security = security;
        self
    }

    /// The port (default: the security mode's, [`SmtpSecurity::default_port`]).
    ///
    /// ```
    /// let config = lock_alerts::SmtpConfig::new("smtp.example.com", "locks@example.com").port(2525);
    /// # let _ = config;
    /// ```
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Log in with `user` and `password` (PLAIN or LOGIN, as the server offers). Only the
    /// encrypted modes keep them from being read on the way.
    ///
    /// ```
    /// let config = lock_alerts::SmtpConfig::new("smtp.example.com", "locks@example.com")
    ///     .credentials("locks", "app-password");
    /// # let _ = config;
    /// ```
    pub fn credentials(mut self, user: impl Into<String>, password: impl AsRef<[u8]>) -> Self {
        self.credentials = Some((user.into(), Secret::new(password.as_ref())));
        self
    }

    /// Also trusts the certificate authority in `pem` (a company's own relay), besides
    /// Mozilla's roots.
    ///
    /// ```
    /// let pem = b"-----BEGIN CERTIFICATE-----\n...".to_vec();
    /// let config = lock_alerts::SmtpConfig::new("relay.corp", "locks@corp").root_certificate_pem(pem);
    /// # let _ = config;
    /// ```
    pub fn root_certificate_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certificates.0.push(pem.into());
        self
    }

    /// What the subject starts with (default `[scheduled-locks]`).
    ///
    /// ```
    /// let config = lock_alerts::SmtpConfig::new("smtp.example.com", "locks@example.com")
    ///     .subject_prefix("[prod]");
    /// # let _ = config;
    /// ```
    pub fn subject_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.subject_prefix = prefix.into();
        self
    }

    /// The name in logs and errors (default `mail`).
    ///
    /// ```
    /// let config = lock_alerts::SmtpConfig::new("smtp.example.com", "locks@example.com").name("oncall-mail");
    /// # let _ = config;
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Attempts, backoff and per-attempt timeout (default [`RetryPolicy::default`]). A
    /// connection failure, a timeout or a transient (4xx) answer is retried; a permanent (5xx)
    /// answer or a TLS failure is not.
    ///
    /// ```
    /// let config = lock_alerts::SmtpConfig::new("smtp.example.com", "locks@example.com")
    ///     .retry(lock_alerts::RetryPolicy::no_retry());
    /// # let _ = config;
    /// ```
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }
}

/// Sends each [`Notice`] as a plain-text mail: subject `"<prefix> <STATE> <rule>: <job>"`
/// (for example `[scheduled-locks] FIRING failed_in_a_row: nightly_report`), body
/// [`Notice::text`].
///
/// ```no_run
/// use lock_alerts::{Notifier, SmtpConfig, SmtpNotifier};
///
/// # async fn example(notice: lock_alerts::Notice) -> Result<(), Box<dyn std::error::Error>> {
/// let mail = SmtpNotifier::new(
///     SmtpConfig::new("smtp.example.com", "Locks <locks@example.com>")
///         .to("oncall@example.com")
///         .credentials("locks@example.com", "app-password"),
/// )?;
/// mail.notify(&notice).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct SmtpNotifier {
    name: String,
    target: String,
    security: SmtpSecurity,
    from: Mailbox,
    to: Vec<Mailbox>,
    subject_prefix: String,
    retry: RetryPolicy,
    transport: AsyncSmtpTransport<Tokio1Executor>,
}

impl std::fmt::Debug for SmtpNotifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the transport: its Debug is lettre's to change.
        f.debug_struct("SmtpNotifier")
            .field("name", &self.name)
            .field("target", &self.target)
            .field("security", &self.security)
            .field("from", &self.from.to_string())
            .field(
                "to",
                &self.to.iter().map(Mailbox::to_string).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl SmtpNotifier {
    /// Checks `config` (the sender and every recipient parse, there is a recipient, each added
    /// root certificate is PEM) and builds the transport; connects only when sending.
    ///
    /// ```
    /// use lock_alerts::{ConfigError, SmtpConfig, SmtpNotifier};
    ///
    /// let error = SmtpNotifier::new(
    ///     SmtpConfig::new("smtp.example.com", "locks@example.com").to("oncall at example.com"),
    /// )
    /// .unwrap_err();
    /// assert!(matches!(error, ConfigError::InvalidAddress { field: "to", .. }), "{error}");
    ///
    /// let none = SmtpNotifier::new(SmtpConfig::new("smtp.example.com", "locks@example.com"));
    /// assert!(matches!(none, Err(ConfigError::NoRecipient)));
    /// ```
    pub fn new(config: SmtpConfig) -> Result<Self, ConfigError> {
        let from = parse_mailbox("from", &config.from)?;
        let to = config
            .to
            .iter()
            .map(|address| parse_mailbox("to", address))
            .collect::<Result<Vec<_>, _>>()?;
        if to.is_empty() {
            return Err(ConfigError::NoRecipient);
        }
        let port = config.port.unwrap_or(config.security.default_port());
        let tls_error = |source: lettre::transport::smtp::Error| ConfigError::Tls {
            what: "mail",
            source: source.into(),
        };
        let tls = match config.security {
            SmtpSecurity::Plain => Tls::None,
            secure => {
                let mut parameters = TlsParameters::builder(config.host.clone())
                    .certificate_store(CertificateStore::WebpkiRoots);
                for pem in &config.root_certificates.0 {
                    parameters = parameters
                        .add_root_certificate(Certificate::from_pem(pem).map_err(tls_error)?);
                }
                let parameters = parameters.build_rustls().map_err(tls_error)?;
                if secure == SmtpSecurity::Tls {
                    Tls::Wrapper(parameters)
                } else {
                    Tls::Required(parameters)
                }
            }
        };
        let scheme = match config.security {
            SmtpSecurity::Tls => "smtps",
            _ => "smtp",
        };
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&config.host)
            .port(port)
            .tls(tls)
            // Each SMTP command's own bound; the whole attempt is bounded by the retry policy.
            .timeout(Some(config.retry.get_attempt_timeout()));
        if let Some((user, password)) = &config.credentials {
            let password = String::from_utf8_lossy(password.expose()).into_owned();
            builder = builder.credentials(Credentials::new(user.clone(), password));
        }
        Ok(SmtpNotifier {
            name: config.name,
            target: format!("{scheme}://{}:{port}", config.host),
            security: config.security,
            from,
            to,
            subject_prefix: config.subject_prefix,
            retry: config.retry,
            transport: builder.build(),
        })
    }

    /// The subject of the mail for `notice`.
    ///
    /// ```
    /// use lock_alerts::{Notice, NoticeState, SmtpConfig, SmtpNotifier};
    ///
    /// let mail = SmtpNotifier::new(SmtpConfig::new("localhost", "locks@example.com").to("ops@example.com"))?;
    /// let notice = Notice::new("k", "failed_in_a_row", NoticeState::Firing, "3 failures",
    ///     chrono::Utc::now(), "shedlock").job("nightly_report");
    /// assert_eq!(mail.subject(&notice), "[scheduled-locks] FIRING failed_in_a_row: nightly_report");
    /// # Ok::<(), lock_alerts::ConfigError>(())
    /// ```
    pub fn subject(&self, notice: &Notice) -> String {
        if self.subject_prefix.is_empty() {
            notice.title()
        } else {
            format!("{} {}", self.subject_prefix, notice.title())
        }
    }

    /// The security mode the transport was built with.
    ///
    /// ```
    /// use lock_alerts::{SmtpConfig, SmtpNotifier, SmtpSecurity};
    /// let mail = SmtpNotifier::new(SmtpConfig::new("localhost", "a@example.com").to("b@example.com"))?;
    /// assert_eq!(mail.security(), SmtpSecurity::StartTls);
    /// # Ok::<(), lock_alerts::ConfigError>(())
    /// ```
    pub fn security(&self) -> SmtpSecurity {
        self.security
    }

    fn message(&self, notice: &Notice) -> Result<Message, NotifyError> {
        let mut message = Message::builder()
            .from(self.from.clone())
            .subject(self.subject(notice))
            .header(ContentType::TEXT_PLAIN);
        for to in &self.to {
            message = message.to(to.clone());
        }
        message
            .body(notice.text())
            .map_err(|source| NotifyError::Encode {
                notifier: self.name.clone(),
                source: source.into(),
            })
    }
}

fn parse_mailbox(field: &'static str, address: &str) -> Result<Mailbox, ConfigError> {
    address
        .parse::<Mailbox>()
        .map_err(|source| ConfigError::InvalidAddress {
            field,
            address: address.to_owned(),
            source: source.into(),
        })
}

#[async_trait]
impl Notifier for SmtpNotifier {
    fn name(&self) -> &str {
        &self.name
    }

    async fn notify(&self, notice: &Notice) -> Result<(), NotifyError> {
        let message = self.message(notice)?;
        let timeout = self.retry.get_attempt_timeout();
        retry::run(&self.retry, |attempt| {
            let message = message.clone();
            async move {
                let failed = |retryable: bool, source: crate::BoxError| NotifyError::Transport {
                    notifier: self.name.clone(),
                    target: self.target.clone(),
                    attempts: attempt,
                    retryable,
                    source,
                };
                match tokio::time::timeout(timeout, self.transport.send(message)).await {
                    Ok(Ok(_)) => Attempt::Done(()),
                    // A 5xx answer (a refused recipient, a refused login) or a certificate
                    // that does not verify will answer the same next time.
                    Ok(Err(error)) if error.is_permanent() || is_tls_failure(&error) => {
                        Attempt::Fail(failed(false, error.into()))
                    }
                    Ok(Err(error)) => Attempt::Retry {
                        error: failed(true, error.into()),
                        retry_after: None,
                    },
                    Err(elapsed) => Attempt::Retry {
                        error: failed(true, elapsed_error(timeout, elapsed)),
                        retry_after: None,
                    },
                }
            }
        })
        .await
    }
}

/// Whether the TLS handshake failed (a certificate that does not verify, no common protocol).
fn is_tls_failure(error: &lettre::transport::smtp::Error) -> bool {
    error.is_tls() || crate::error::caused_by_tls(error)
}

fn elapsed_error(timeout: Duration, _: tokio::time::error::Elapsed) -> crate::BoxError {
    format!("no answer within {timeout:?}").into()
}
