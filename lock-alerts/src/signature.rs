//! The webhook's signature: HMAC-SHA256 over `"{timestamp}.{body}"`, as Stripe and Slack sign
//! theirs, and [`verify_signature`] for the receiving side.
//!
//! Decisions, and why: the timestamp is inside what is signed, so a captured request replayed
//! later fails the receiver's age check instead of verifying; the digest is compared in
//! constant time (`hmac`'s `verify_slice`), so the comparison does not leak how many bytes
//! matched. Both headers are plain ASCII for any framework to read.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The header holding the Unix time (seconds) at which the request was signed.
pub const TIMESTAMP_HEADER: &str = "X-Scheduled-Locks-Timestamp";

/// The header holding `sha256=<hex>`: HMAC-SHA256 of `"{timestamp}.{body}"` keyed by the
/// webhook's secret.
pub const SIGNATURE_HEADER: &str = "X-Scheduled-Locks-Signature";

/// Why a signature was rejected.
///
/// ```
/// use std::time::Duration;
/// use lock_alerts::{SignatureError, verify_signature};
///
/// let error = verify_signature(b"secret", "1700000000", "md5=abc", b"{}", Duration::from_secs(300));
/// assert_eq!(error, Err(SignatureError::Malformed));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignatureError {
    /// The timestamp header is not a Unix time in seconds.
    #[error("the signature timestamp is not a Unix time in seconds")]
    BadTimestamp,
    /// The signature header is not `sha256=<64 hex digits>`.
    #[error("the signature is not `sha256=<hex>`")]
    Malformed,
    /// The timestamp is further from now than the tolerance: a replay, or a clock far off.
    #[error("the signature timestamp is {skew_seconds} s from now, more than the tolerance")]
    Stale {
        /// How far the timestamp is from the receiver's now, in seconds (either way).
        skew_seconds: u64,
    },
    /// The digest does not match: another secret, or the body or timestamp was changed.
    #[error("the signature does not match")]
    Mismatch,
}

/// `sha256=<hex>` for `body` signed at `timestamp` (Unix seconds) with `secret`: what the
/// webhook notifier sends in [`SIGNATURE_HEADER`].
///
/// ```
/// let signature = lock_alerts::sign(b"secret", 1_700_000_000, b"{}");
/// assert!(signature.starts_with("sha256="));
/// assert_eq!(signature.len(), "sha256=".len() + 64);
/// ```
pub fn sign(secret: &[u8], timestamp: u64, body: &[u8]) -> String {
    let digest = mac(secret, timestamp.to_string().as_bytes(), body)
        .finalize()
        .into_bytes();
    format!("sha256={}", hex::encode(digest))
}

/// Checks a request's signature on the receiving side: `timestamp` and `signature` are the
/// values of [`TIMESTAMP_HEADER`] and [`SIGNATURE_HEADER`], `body` the raw body as received
/// (before any JSON parsing), `tolerance` how far the timestamp may be from this host's clock
/// (5 minutes is usual).
///
/// ```
/// use std::time::{Duration, SystemTime, UNIX_EPOCH};
/// use lock_alerts::{SignatureError, sign, verify_signature};
///
/// let body = br#"{"version":1}"#;
/// let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
/// let signature = sign(b"s3cret", now, body);
/// let tolerance = Duration::from_secs(300);
/// let timestamp = now.to_string();
///
/// assert_eq!(verify_signature(b"s3cret", &timestamp, &signature, body, tolerance), Ok(()));
/// assert_eq!(
///     verify_signature(b"other", &timestamp, &signature, body, tolerance),
///     Err(SignatureError::Mismatch)
/// );
/// assert_eq!(
///     verify_signature(b"s3cret", &timestamp, &signature, br#"{"version":2}"#, tolerance),
///     Err(SignatureError::Mismatch)
/// );
/// ```
pub fn verify_signature(
    secret: &[u8],
    timestamp: &str,
    signature: &str,
    body: &[u8],
    tolerance: Duration,
) -> Result<(), SignatureError> {
    let signed_at: u64 = timestamp
        .trim()
        .parse()
        .map_err(|_| SignatureError::BadTimestamp)?;
    let digest = signature
        .trim()
        .strip_prefix("sha256=")
        .and_then(|hex_digits| hex::decode(hex_digits).ok())
        .filter(|digest| digest.len() == 32)
        .ok_or(SignatureError::Malformed)?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let skew_seconds = now.abs_diff(signed_at);
    if skew_seconds > tolerance.as_secs() {
        return Err(SignatureError::Stale { skew_seconds });
    }
    mac(secret, timestamp.trim().as_bytes(), body)
        .verify_slice(&digest)
        .map_err(|_| SignatureError::Mismatch)
}

fn mac(secret: &[u8], timestamp: &[u8], body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length (a long one is hashed first), so this cannot fail.
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts any key length");
    mac.update(timestamp);
    mac.update(b".");
    mac.update(body);
    mac
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    #[test]
    fn the_digest_is_hmac_sha256_of_timestamp_dot_body() {
        // RFC 4231 has no vector for this message; this one is from Python's
        // hmac.new(b"key", b"1700000000.{}", "sha256").hexdigest().
        assert_eq!(
            sign(b"key", 1_700_000_000, b"{}"),
            "sha256=9d713ed406bb7076d4123f0dc2c39d2df5c654ed4b0cd56b52c8b4c940bd63ae"
        );
    }

    #[test]
    fn a_stale_or_future_timestamp_is_rejected_even_with_the_right_digest() {
        let tolerance = Duration::from_secs(300);
        for signed_at in [now() - 600, now() + 600] {
            let signature = sign(b"k", signed_at, b"body");
            let result =
                verify_signature(b"k", &signed_at.to_string(), &signature, b"body", tolerance);
            assert!(
                matches!(result, Err(SignatureError::Stale { skew_seconds }) if skew_seconds >= 599),
                "{result:?}"
            );
        }
    }

    #[test]
    fn a_changed_timestamp_does_not_verify() {
        let signed_at = now();
        let signature = sign(b"k", signed_at, b"body");
        let other = (signed_at - 1).to_string();
        assert_eq!(
            verify_signature(b"k", &other, &signature, b"body", Duration::from_secs(300)),
            Err(SignatureError::Mismatch)
        );
    }

    #[test]
    fn malformed_headers_are_named() {
        let tolerance = Duration::from_secs(300);
        let ts = now().to_string();
        assert_eq!(
            verify_signature(b"k", "yesterday", "sha256=00", b"", tolerance),
            Err(SignatureError::BadTimestamp)
        );
        for bad in ["", "sha256=", "sha256=zz", "sha256=abcd", "sha1=abcd"] {
            assert_eq!(
                verify_signature(b"k", &ts, bad, b"", tolerance),
                Err(SignatureError::Malformed),
                "{bad:?}"
            );
        }
    }
}
