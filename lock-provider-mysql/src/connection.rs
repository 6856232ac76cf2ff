//! What [`MySqlLockProvider::connect`](crate::MySqlLockProvider::connect) reads from its URL
//! besides mysql_async's own parameters: TLS as the MySQL client spells it, `ssl-mode` and
//! `ssl-ca`, turned into mysql_async's [`SslOpts`].

use std::fmt;

use lock_core::LockError;
use mysql_async::{Opts, OptsBuilder, SslOpts};

/// How a connection uses TLS: the MySQL client's `--ssl-mode`, as far as mysql_async allows.
///
/// | mode | TLS | the server's certificate |
/// |---|---|---|
/// | `Disabled` | never | - |
/// | `Required` | always | chain checked against `ssl-ca` if given, else not checked |
/// | `VerifyCa` | always | chain checked against `ssl-ca`, or the built-in (Mozilla) roots |
/// | `VerifyIdentity` | always | as `VerifyCa`, and the host name (or IP address) too |
///
/// `PREFERRED` (the MySQL client's default) is not supported, because mysql_async cannot fall
/// back to plaintext: a URL without `ssl-mode` connects without TLS, as before TLS support.
/// A given `ssl-ca` makes `Required` check the chain, as libpq does for `sslmode=require`.
///
/// Caveat: mysql_async 0.37.1 does not recognise rustls 0.23's name-mismatch error, so
/// `VerifyCa` (and `Required` with `ssl-ca`) checks the host name too until a release carries
/// its fix (blackbeam/mysql_async#404): the certificate must name the host connected to.
///
/// ```
/// use lock_provider_mysql::SslMode;
///
/// assert_eq!("VERIFY_IDENTITY".parse::<SslMode>()?, SslMode::VerifyIdentity);
/// assert_eq!("verify-ca".parse::<SslMode>()?, SslMode::VerifyCa);
/// assert!("PREFERRED".parse::<SslMode>().is_err());
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SslMode {
    /// No TLS (the default when the URL has no `ssl-mode`).
    #[default]
    Disabled,
    /// TLS or no connection.
    Required,
    /// TLS, the server's certificate signed by a trusted root.
    VerifyCa,
    /// As `VerifyCa`, and the certificate names the host connected to.
    VerifyIdentity,
}

impl SslMode {
    /// The MySQL client's spelling: `DISABLED`, `REQUIRED`, `VERIFY_CA`, `VERIFY_IDENTITY`.
    ///
    /// ```
    /// assert_eq!(lock_provider_mysql::SslMode::VerifyCa.as_str(), "VERIFY_CA");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disabled => "DISABLED",
            SslMode::Required => "REQUIRED",
            SslMode::VerifyCa => "VERIFY_CA",
            SslMode::VerifyIdentity => "VERIFY_IDENTITY",
        }
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
        Ok(match s.to_ascii_uppercase().replace('-', "_").as_str() {
            "DISABLED" => SslMode::Disabled,
            "REQUIRED" => SslMode::Required,
            "VERIFY_CA" => SslMode::VerifyCa,
            "VERIFY_IDENTITY" => SslMode::VerifyIdentity,
            "PREFERRED" => {
                return Err(invalid(
                    "ssl-mode=PREFERRED is not supported (mysql_async cannot fall back to \
                     plaintext): use REQUIRED, VERIFY_CA, VERIFY_IDENTITY or DISABLED",
                ));
            }
            _ => {
                return Err(invalid(format!(
                    "ssl-mode={s:?} is not one of DISABLED, REQUIRED, VERIFY_CA, VERIFY_IDENTITY"
                )));
            }
        })
    }
}

/// The driver's options for `url`: mysql_async's parameters (`require_ssl`, `verify_ca`,
/// `verify_identity`, `built_in_roots` among them) plus `ssl-mode` and `ssl-ca` (a PEM file,
/// read now so that a missing one fails here).
pub(crate) fn opts_from_url(url: &str) -> Result<Opts, LockError> {
    let (driver_url, ssl_mode, ssl_ca) = split_options(url)?;
    let opts =
        Opts::from_url(&driver_url).map_err(|e| invalid(format!("MySQL connection URL: {e}")))?;
    let Some(mode) = ssl_mode else {
        if ssl_ca.is_some() {
            return Err(invalid(
                "ssl-ca is given without ssl-mode: add ssl-mode=VERIFY_IDENTITY (or VERIFY_CA, \
                 REQUIRED)",
            ));
        }
        return Ok(opts);
    };
    if opts.ssl_opts().is_some() {
        return Err(invalid(
            "both ssl-mode and mysql_async's require_ssl are given: use one of them",
        ));
    }
    let ca = ssl_ca
        .map(|path| {
            std::fs::read(&path).map_err(|e| {
                invalid(format!(
                    "ssl-ca={path}: cannot read the root certificates: {e}"
                ))
            })
        })
        .transpose()?;
    let ssl = ssl_opts(mode, ca)?;
    Ok(OptsBuilder::from_opts(opts).ssl_opts(ssl).into())
}

#[cfg(feature = "tls")]
fn ssl_opts(mode: SslMode, ca: Option<Vec<u8>>) -> Result<Option<SslOpts>, LockError> {
    let with_roots = |opts: SslOpts| match &ca {
        // Only the given roots are trusted, as the MySQL client does with --ssl-ca.
        Some(pem) => opts
            .with_root_certs(vec![pem.clone().into()])
            .with_disable_built_in_roots(true),
        None => opts,
    };
    Ok(match mode {
        SslMode::Disabled => None,
        SslMode::Required if ca.is_none() => {
            Some(SslOpts::default().with_danger_accept_invalid_certs(true))
        }
        SslMode::Required | SslMode::VerifyCa => {
            Some(with_roots(SslOpts::default()).with_danger_skip_domain_validation(true))
        }
        SslMode::VerifyIdentity => Some(with_roots(SslOpts::default())),
    })
}

#[cfg(not(feature = "tls"))]
fn ssl_opts(mode: SslMode, _ca: Option<Vec<u8>>) -> Result<Option<SslOpts>, LockError> {
    match mode {
        SslMode::Disabled => Ok(None),
        _ => Err(invalid(format!(
            "ssl-mode={mode} needs TLS, and lock-provider-mysql was built without its `tls` \
             feature"
        ))),
    }
}

fn invalid(message: impl Into<String>) -> LockError {
    LockError::InvalidConfiguration(message.into())
}

/// `url` without `ssl-mode` and `ssl-ca`, and their (percent-decoded) values.
fn split_options(url: &str) -> Result<(String, Option<SslMode>, Option<String>), LockError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok((url.to_owned(), None, None));
    };
    let (mut mode, mut ca, mut kept) = (None, None, Vec::new());
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "ssl-mode" => mode = Some(percent_decode(key, value)?.parse()?),
            "ssl-ca" => ca = Some(percent_decode(key, value)?),
            _ => kept.push(pair),
        }
    }
    let driver = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((driver, mode, ca))
}

fn percent_decode(key: &str, s: &str) -> Result<String, LockError> {
    let bad = || invalid(format!("MySQL connection URL: {key}: bad %-escape"));
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3).ok_or_else(bad)?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| bad())?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_parameters_are_taken_out_of_the_url() {
        let (driver, mode, ca) = split_options(
            "mysql://u@h:3307/db?ssl-mode=VERIFY_IDENTITY&stmt_cache_size=10&ssl-ca=%2Ftmp%2Fca.pem",
        )
        .unwrap();
        assert_eq!(driver, "mysql://u@h:3307/db?stmt_cache_size=10");
        assert_eq!(mode, Some(SslMode::VerifyIdentity));
        assert_eq!(ca.as_deref(), Some("/tmp/ca.pem"));
    }

    #[test]
    #[cfg(feature = "tls")]
    fn tls_options_reach_the_driver() {
        let opts = opts_from_url("mysql://u@h/db?ssl-mode=REQUIRED").unwrap();
        let ssl = opts.ssl_opts().expect("TLS asked for");
        assert!(ssl.accept_invalid_certs(), "REQUIRED alone checks nothing");
        let opts = opts_from_url("mysql://u@h/db?ssl-mode=verify_ca").unwrap();
        let ssl = opts.ssl_opts().expect("TLS asked for");
        assert!(!ssl.accept_invalid_certs() && ssl.skip_domain_validation());
        assert!(
            opts_from_url("mysql://u@h/db")
                .unwrap()
                .ssl_opts()
                .is_none()
        );
        assert!(
            opts_from_url("mysql://u@h/db?ssl-mode=DISABLED")
                .unwrap()
                .ssl_opts()
                .is_none()
        );
    }

    #[test]
    fn contradictions_and_bad_values_are_refused() {
        let refused = |url: &str| opts_from_url(url).unwrap_err().to_string();
        assert!(refused("mysql://u@h/db?ssl-mode=PREFERRED").contains("not supported"));
        assert!(refused("mysql://u@h/db?ssl-mode=strict").contains("ssl-mode=\"strict\""));
        assert!(refused("mysql://u@h/db?ssl-ca=/ca.pem").contains("without ssl-mode"));
        assert!(
            refused("mysql://u@h/db?ssl-mode=REQUIRED&require_ssl=true").contains("use one of")
        );
        assert!(
            refused("mysql://u@h/db?ssl-mode=VERIFY_CA&ssl-ca=/nonexistent.pem")
                .contains("ssl-ca=/nonexistent.pem: cannot read")
        );
    }
}
