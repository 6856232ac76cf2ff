//! What may be shown of a secret: a URL as its scheme, host and port only, a secret not at all.
//!
//! Decisions, and why: a webhook's secret is often its URL itself (Slack's
//! `/services/T.../B.../token`, a healthchecks.io check's UUID, Cronitor's key in the path), and
//! query strings carry tokens, so nothing after the authority is ever printed, and the user
//! part (`user:password@`) is dropped too. A `Debug` of a configuration or an error is safe to
//! log.

use std::fmt;
use std::sync::Arc;

use url::Url;

/// A URL that prints as `scheme://host:port/…` (path, query and credentials elided).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SecretUrl(Url);

impl SecretUrl {
    /// Parses `raw` and accepts `http` and `https` only.
    pub(crate) fn parse_http(what: &'static str, raw: &str) -> Result<Self, crate::ConfigError> {
        let url = Url::parse(raw).map_err(|source| crate::ConfigError::InvalidUrl {
            what,
            source: source.into(),
        })?;
        match url.scheme() {
            "http" | "https" if url.host().is_some() => Ok(SecretUrl(url)),
            "http" | "https" => Err(crate::ConfigError::InvalidUrl {
                what,
                source: "the URL has no host".into(),
            }),
            other => Err(crate::ConfigError::InvalidUrl {
                what,
                source: format!("scheme `{other}` is not http or https").into(),
            }),
        }
    }

    /// The URL itself, for the request (never for a message).
    pub(crate) fn expose(&self) -> &Url {
        &self.0
    }

    /// The printable form, as an owned string for errors.
    pub(crate) fn redacted(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = &self.0;
        write!(f, "{}://{}", url.scheme(), url.host_str().unwrap_or(""))?;
        if let Some(port) = url.port() {
            write!(f, ":{port}")?;
        }
        if url.path() != "/" || url.query().is_some() {
            f.write_str("/…")?;
        }
        Ok(())
    }
}

impl fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// A shared secret (a signing key, a password): `Debug` prints `"<redacted>"`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(Arc<[u8]>);

impl Secret {
    pub(crate) fn new(bytes: &[u8]) -> Self {
        Secret(Arc::from(bytes))
    }

    pub(crate) fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

/// A URL as given to a configuration (not yet parsed): `Debug` shows the redacted form, or
/// `"<invalid URL>"`, never the text itself.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct RawUrl(pub(crate) String);

impl fmt::Debug for RawUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match SecretUrl::parse_http("url", &self.0) {
            Ok(url) => fmt::Debug::fmt(&url, f),
            Err(_) => f.write_str("\"<invalid URL>\""),
        }
    }
}

/// PEM certificates a configuration adds as roots: `Debug` says how many, not their bytes.
#[derive(Clone, Default, PartialEq, Eq)]
pub(crate) struct Pems(pub(crate) Vec<Vec<u8>>);

impl fmt::Debug for Pems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} PEM text(s)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_prints_without_path_query_or_credentials() {
        let url = SecretUrl::parse_http(
            "webhook",
            "https://user:pw@hooks.example.com:8443/services/T1/B2/tok?token=abc",
        )
        .unwrap();
        assert_eq!(url.to_string(), "https://hooks.example.com:8443/…");
        assert_eq!(format!("{url:?}"), "\"https://hooks.example.com:8443/…\"");
        let bare = SecretUrl::parse_http("webhook", "http://127.0.0.1:9/").unwrap();
        assert_eq!(bare.to_string(), "http://127.0.0.1:9");
    }

    #[test]
    fn only_http_and_https_with_a_host_are_accepted() {
        for bad in ["ftp://example.com/x", "not a url", "mailto:ops@example.com"] {
            let error = SecretUrl::parse_http("webhook", bad)
                .unwrap_err()
                .to_string();
            assert!(error.starts_with("invalid webhook URL"), "{error}");
            assert!(
                !error.contains(bad),
                "the URL itself is not echoed: {error}"
            );
        }
    }

    #[test]
    fn secrets_and_raw_urls_are_redacted_in_debug() {
        assert_eq!(format!("{:?}", Secret::new(b"hunter2")), "\"<redacted>\"");
        let raw = RawUrl("https://hc-ping.com/0f1e-secret-uuid".into());
        assert_eq!(format!("{raw:?}"), "\"https://hc-ping.com/…\"");
        assert_eq!(format!("{:?}", RawUrl("::".into())), "\"<invalid URL>\"");
    }
}
