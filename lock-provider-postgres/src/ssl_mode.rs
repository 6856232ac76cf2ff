//! [`SslMode`]: libpq's `sslmode`, read from URLs by [`ConnectionConfig`](crate::ConnectionConfig)
//! and acted on by the TLS connector.

use std::fmt;

use lock_core::LockError;

/// How a connection uses TLS: libpq's `sslmode`, as far as rustls and tokio-postgres allow.
///
/// | mode | TLS | the server's certificate |
/// |---|---|---|
/// | `Disable` | never | - |
/// | `Prefer` | if the server offers it, else plaintext | chain checked if root certificates are given, else not checked |
/// | `Require` | always | chain checked if root certificates are given, else not checked |
/// | `VerifyCa` | always | chain checked against the root certificates |
/// | `VerifyFull` | always | chain and host name (or IP address) checked |
///
/// As libpq does for `require`, a root certificate given with `Prefer` or `Require` makes the
/// chain checked. Unlike libpq, a URL without `sslmode` means `Disable` (libpq: `prefer`), so
/// that a URL that asks for nothing costs no handshake, as before TLS support; libpq's `allow`
/// is not supported.
///
/// ```
/// use lock_provider_postgres::{ConnectionConfig, SslMode};
///
/// let config = ConnectionConfig::from_url("postgres://app@db.internal/app?sslmode=verify-ca")?;
/// assert_eq!(config.get_ssl_mode(), SslMode::VerifyCa);
/// assert_eq!("verify-full".parse::<SslMode>()?, SslMode::VerifyFull);
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SslMode {
    /// No TLS (the default when the URL has no `sslmode`).
    #[default]
    Disable,
    /// TLS when the server offers it.
    Prefer,
    /// TLS or no connection.
    Require,
    /// TLS, the server's certificate signed by one of the root certificates.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host connected to.
    VerifyFull,
}

impl SslMode {
    /// The URL spelling: `disable`, `prefer`, `require`, `verify-ca`, `verify-full`.
    ///
    /// ```
    /// assert_eq!(lock_provider_postgres::SslMode::VerifyCa.as_str(), "verify-ca");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether the mode checks the chain, so needs root certificates.
    pub(crate) fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for SslMode {
    type Err = LockError;

    fn from_str(s: &str) -> Result<Self, LockError> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => {
                return Err(invalid(
                    "sslmode=allow is not supported (the driver cannot retry with TLS after a \
                     plaintext refusal): use prefer, require or disable",
                ));
            }
            other => {
                return Err(invalid(format!(
                    "sslmode={other:?} is not one of disable, prefer, require, verify-ca, \
                     verify-full"
                )));
            }
        })
    }
}

fn invalid(message: impl Into<String>) -> LockError {
    LockError::InvalidConfiguration(message.into())
}
