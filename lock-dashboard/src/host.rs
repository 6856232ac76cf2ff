//! The `Host` allow-list, against DNS rebinding: a web page at `http://evil.example:8080/`
//! whose name its owner re-points at 127.0.0.1 reaches the dashboard as the same origin, so
//! `Origin` checks pass and its script reads every answer. The request still says
//! `Host: evil.example:8080`; the dashboard answers only a `Host` that is an IP literal (a
//! rebinding needs a DNS name), `localhost`, or a name it is told
//! ([`Dashboard::allow_host`](crate::Dashboard::allow_host)), on any port.

use std::net::{Ipv4Addr, Ipv6Addr};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::ctx::is_api;
use crate::failure::{ApiFailure, Failure, PageFailure};
use crate::state::AppState;

/// A name as the allow-list keeps it: lower case, without a trailing dot.
pub(crate) fn normal(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Why `host` (a `Host` header's value) is refused, if it is.
fn refusal(allowed: &[String], host: Option<&str>) -> Option<String> {
    let Some(host) = host else {
        return Some("a request without a Host header is refused".to_owned());
    };
    let name = match host.strip_prefix('[') {
        // `[::1]:8080`: an IPv6 literal.
        Some(rest) => match rest.split_once(']') {
            Some((ip, port)) if ip.parse::<Ipv6Addr>().is_ok() && port_ok(port) => return None,
            _ => host,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if port_ok(&format!(":{port}")) => name,
            _ => host,
        },
    };
    let name = normal(name);
    if name.parse::<Ipv4Addr>().is_ok() || name == "localhost" || allowed.contains(&name) {
        return None;
    }
    Some(format!(
        "refused a request for host {host:?}: this dashboard answers only requests addressed to \
         an IP address, localhost or a name it is told, so that a web page on another name \
         (DNS rebinding) cannot read it; to use this name, allow it \
         (lockctl serve --allow-host {name}, or Dashboard::allow_host)"
    ))
}

/// Empty, or `:` and digits.
fn port_ok(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

/// Middleware on every route: refuses (403) a request whose `Host` is not allowed, as JSON
/// under `/api` and as a page elsewhere.
pub(crate) async fn allowed(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let hosts = request.headers().get_all(header::HOST);
    let host = match (hosts.iter().next(), hosts.iter().nth(1)) {
        (Some(one), None) => one.to_str().ok().map(str::to_owned),
        // Several, or none: the URI's authority (an absolute-form request line) if any.
        (None, _) => request.uri().authority().map(|a| a.as_str().to_owned()),
        (Some(_), Some(_)) => None,
    };
    let Some(why) = refusal(&state.allowed_hosts, host.as_deref()) else {
        return next.run(request).await;
    };
    tracing::warn!(target: "lock_dashboard::audit", host = ?host, "refused a request for a host not allowed");
    let failure = Failure::new(StatusCode::FORBIDDEN, why);
    if is_api(request.uri().path()) {
        ApiFailure(failure).into_response()
    } else {
        PageFailure(failure).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_literals_localhost_and_allowed_names_pass_on_any_port() {
        let allowed = vec![normal("Ops.Example.COM.")];
        for host in [
            "127.0.0.1",
            "127.0.0.1:8080",
            "10.1.2.3:80",
            "[::1]:8080",
            "[::1]",
            "localhost:1",
            "LOCALHOST",
            "ops.example.com:443",
            "ops.example.com.",
        ] {
            assert_eq!(refusal(&allowed, Some(host)), None, "{host}");
        }
        for host in [
            "evil.example:8080",
            "evil.example",
            "127.0.0.1.evil.example",
            "localhost.evil.example",
            "[::1]evil",
            "ops.example.com.evil",
            "127.0.0.1:80x",
            "",
        ] {
            assert!(refusal(&allowed, Some(host)).is_some(), "{host}");
        }
        assert!(refusal(&allowed, None).is_some());
    }
}
