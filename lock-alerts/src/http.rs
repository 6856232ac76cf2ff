//! The HTTP side every HTTP notifier shares: one client set-up (rustls with ring and Mozilla's
//! roots) and one request loop (per-attempt timeout, retries by [`RetryPolicy`]).
//!
//! Decisions, and why:
//! - `reqwest` without default features: the hyper 1 stack the workspace already builds, and
//!   a TLS configuration made here (ring, as the SQL providers' TLS; `webpki-roots`, so HTTPS
//!   works in a container without `ca-certificates`). No aws-lc-rs, no OpenSSL, no HTTP/2.
//! - Redirects are not followed: a webhook that redirects is misconfigured, and following one
//!   would hand the signed body to wherever the redirect points. A 3xx is a failed delivery.
//! - A 2xx is delivered; 408, 429 and 5xx and every connection error or timeout are retried
//!   (after a `Retry-After`, capped); any other status, and a TLS handshake failure (a
//!   certificate that does not verify), is final at once.
//! - The request is rebuilt for each attempt, so a signature's timestamp is the attempt's.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use reqwest::header::RETRY_AFTER;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::error::retryable_status;
use crate::redact::SecretUrl;
use crate::retry::{self, Attempt, RetryPolicy};
use crate::{BoxError, ConfigError, NotifyError};

/// The `User-Agent` of every request.
const USER_AGENT: &str = concat!("scheduled-locks-alerts/", env!("CARGO_PKG_VERSION"));

/// An HTTP client as every notifier and ping uses it: Mozilla's roots, plus the certificates
/// in each of `extra_roots` (PEM), for a receiver behind a company's own authority.
pub(crate) fn client(
    what: &'static str,
    extra_roots: &[Vec<u8>],
) -> Result<reqwest::Client, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    let invalid = |source: BoxError| ConfigError::Tls { what, source };
    for pem in extra_roots {
        let mut added = 0;
        for certificate in CertificateDer::pem_slice_iter(pem) {
            roots
                .add(certificate.map_err(|e| invalid(e.into()))?)
                .map_err(|e| invalid(e.into()))?;
            added += 1;
        }
        if added == 0 {
            return Err(invalid("no certificate in the PEM text".into()));
        }
    }
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::HttpClient(e.into()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(USER_AGENT)
        .build()
        .map_err(|e| ConfigError::HttpClient(e.without_url().into()))
}

/// Sends the request `build` makes (once per attempt) to `target` until it is delivered or
/// `policy` is spent; returns the number of attempts it took.
pub(crate) async fn send(
    notifier: &str,
    target: &SecretUrl,
    policy: &RetryPolicy,
    build: impl Fn() -> reqwest::RequestBuilder,
) -> Result<u32, NotifyError> {
    retry::run(policy, |attempt| {
        let request = build().timeout(policy.get_attempt_timeout());
        async move {
            match request.send().await {
                Ok(response) if response.status().is_success() => Attempt::Done(attempt),
                Ok(response) => {
                    let status = response.status().as_u16();
                    let error = NotifyError::Status {
                        notifier: notifier.to_owned(),
                        target: target.redacted(),
                        status,
                        attempts: attempt,
                    };
                    if retryable_status(status) {
                        let retry_after = response
                            .headers()
                            .get(RETRY_AFTER)
                            .and_then(|value| value.to_str().ok())
                            .and_then(parse_retry_after);
                        Attempt::Retry { error, retry_after }
                    } else {
                        Attempt::Fail(error)
                    }
                }
                Err(source) => {
                    // A request that could not even be built will not build next time either,
                    // and a certificate that did not verify will not verify next time.
                    let retryable = !source.is_builder() && !crate::error::caused_by_tls(&source);
                    let error = NotifyError::Transport {
                        notifier: notifier.to_owned(),
                        target: target.redacted(),
                        attempts: attempt,
                        retryable,
                        // The URL out: reqwest's message would print it whole.
                        source: source.without_url().into(),
                    };
                    if retryable {
                        Attempt::Retry {
                            error,
                            retry_after: None,
                        }
                    } else {
                        Attempt::Fail(error)
                    }
                }
            }
        }
    })
    .await
}

/// `Retry-After` as seconds or as an HTTP date (RFC 9110 §10.2.3); a date in the past is 0.
fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        assert_eq!(parse_retry_after("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_retry_after(" 0 "), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        let later = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        let parsed = parse_retry_after(&later).unwrap();
        assert!(parsed > Duration::from_secs(100) && parsed <= Duration::from_secs(120));
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn the_client_builds_with_its_tls_configuration() {
        client("webhook", &[]).expect("a client with rustls, ring and webpki roots");
        let error = client("webhook", &[b"not PEM".to_vec()]).unwrap_err();
        assert!(
            matches!(
                error,
                ConfigError::Tls {
                    what: "webhook",
                    ..
                }
            ),
            "{error}"
        );
    }
}
