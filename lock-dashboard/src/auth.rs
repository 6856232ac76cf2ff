//! Who may act: a bearer token for the JSON actions; for a browser, a session cookie
//! (HttpOnly, SameSite=Strict) from the login form and a CSRF token in every form. Both refuse
//! a request a browser marks as cross-site (`Sec-Fetch-Site`) or from another origin
//! (`Origin`).

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::ctx::Ctx;
use crate::failure::Failure;
use crate::state::AppState;
use crate::token::constant_time_eq;

/// Why the request comes from another site, if a browser says so.
pub(crate) fn cross_site(headers: &HeaderMap) -> Option<String> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if let Some(site) = text(header::HeaderName::from_static("sec-fetch-site"))
        && !matches!(site, "same-origin" | "none")
    {
        return Some(format!("the browser marks it as {site} (Sec-Fetch-Site)"));
    }
    if let Some(origin) = text(header::ORIGIN) {
        let host = text(header::HOST).unwrap_or("");
        let authority = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"));
        if authority != Some(host) || host.is_empty() {
            return Some(format!(
                "it comes from {origin}, not from this dashboard ({host})"
            ));
        }
    }
    None
}

pub(crate) fn refused(why: String) -> Failure {
    Failure::new(
        StatusCode::FORBIDDEN,
        format!("refused a cross-site request: {why}"),
    )
}

pub(crate) fn read_only() -> Failure {
    Failure::new(
        StatusCode::FORBIDDEN,
        "this dashboard is read-only: no token is configured (lockctl serve --token \
         NAME=SECRET, or Dashboard::token)",
    )
}

/// The name of the token an API request presents as `Authorization: Bearer <secret>`.
pub(crate) fn bearer(state: &AppState, headers: &HeaderMap) -> Result<String, Failure> {
    if let Some(why) = cross_site(headers) {
        return Err(refused(why));
    }
    if state.tokens.is_empty() {
        return Err(read_only());
    }
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            Failure::new(
                StatusCode::FORBIDDEN,
                "an action needs a token: send `Authorization: Bearer <secret>`",
            )
        })?;
    token_named(state, presented.trim())
        .ok_or_else(|| Failure::new(StatusCode::FORBIDDEN, "the token is not valid"))
}

/// The name of the token whose secret is `presented`; every token is compared.
pub(crate) fn token_named(state: &AppState, presented: &str) -> Option<String> {
    state
        .tokens
        .iter()
        .fold(None, |found, token| match token.matches(presented) {
            true => Some(token.name().to_owned()),
            false => found,
        })
}

/// The name of the signed-in token of a form post that carries its session's CSRF token.
pub(crate) fn form_caller(ctx: &Ctx, headers: &HeaderMap, csrf: &str) -> Result<String, Failure> {
    if let Some(why) = cross_site(headers) {
        return Err(refused(why));
    }
    if !ctx.actions_enabled {
        return Err(read_only());
    }
    let session = ctx.signed_in().ok_or_else(|| {
        Failure::new(
            StatusCode::FORBIDDEN,
            "an action needs a token: log in first",
        )
    })?;
    if !constant_time_eq(session.csrf.as_bytes(), csrf.as_bytes()) {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            "refused a form without this session's CSRF token (reload the page and try again)",
        ));
    }
    Ok(session.token_name.clone())
}
