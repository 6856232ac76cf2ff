//! Who may act: a bearer token for the JSON actions; for a browser, a session cookie
//! (HttpOnly, SameSite=Strict) from the login form and a CSRF token in every form. Both refuse
//! a request a browser marks as cross-site (`Sec-Fetch-Site`) or from another origin
//! (`Origin`).

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::ctx::Ctx;
use crate::failure::{Failure, PageFailure};
use crate::pages;
use crate::session::{COOKIE, SESSION_LIFETIME};
use crate::state::AppState;
use crate::token::constant_time_eq;

/// Why the request comes from another site, if a browser says so.
fn cross_site(headers: &HeaderMap) -> Option<String> {
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

fn refused(why: String) -> Failure {
    Failure::new(
        StatusCode::FORBIDDEN,
        format!("refused a cross-site request: {why}"),
    )
}

fn read_only() -> Failure {
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
fn token_named(state: &AppState, presented: &str) -> Option<String> {
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

/// The login form.
#[derive(Deserialize)]
pub(crate) struct LoginForm {
    token: String,
}

/// A form whose only field is the CSRF token.
#[derive(Deserialize)]
pub(crate) struct CsrfForm {
    csrf: String,
}

/// `POST /login`: the token's secret for a session cookie.
pub(crate) async fn login(
    State(state): State<AppState>,
    ctx: Ctx,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, PageFailure> {
    if let Some(why) = cross_site(&headers) {
        return Err(refused(why).into());
    }
    if state.tokens.is_empty() {
        return Err(read_only().into());
    }
    let Some(name) = token_named(&state, form.token.trim()) else {
        tracing::warn!(target: "lock_dashboard::audit", "dashboard login refused: wrong token");
        let page = pages::login::form(&ctx, Some("That token is not valid."));
        return Ok((StatusCode::FORBIDDEN, page).into_response());
    };
    let id = state.sessions.start(&name);
    tracing::info!(target: "lock_dashboard::audit", token = %name, "dashboard login");
    let cookie = format!(
        "{COOKIE}={id}; Path={}; HttpOnly; SameSite=Strict; Max-Age={}",
        ctx.home(),
        SESSION_LIFETIME.as_secs()
    );
    Ok(([(header::SET_COOKIE, cookie)], Redirect::to(&ctx.home())).into_response())
}

/// `POST /logout`: ends the session.
pub(crate) async fn logout(
    State(state): State<AppState>,
    ctx: Ctx,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Result<Response, PageFailure> {
    form_caller(&ctx, &headers, &form.csrf)?;
    if let Some((id, _)) = &ctx.session {
        state.sessions.end(id);
    }
    let cookie = format!(
        "{COOKIE}=; Path={}; HttpOnly; SameSite=Strict; Max-Age=0",
        ctx.home()
    );
    Ok(([(header::SET_COOKIE, cookie)], Redirect::to(&ctx.home())).into_response())
}
