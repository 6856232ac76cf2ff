//! Who may read and act: a bearer token for the JSON endpoints; for a browser, a session cookie
//! (HttpOnly, SameSite=Strict) from the login form and a CSRF token in every form. A token's
//! [`Role`] says which actions it may take; with [`Dashboard::require_auth`](crate::Dashboard)
//! every read needs one too. Actions refuse a request a browser marks as cross-site
//! (`Sec-Fetch-Site`) or from another origin (`Origin`).

use axum::extract::{FromRequestParts, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::ctx::{Ctx, is_api};
use crate::failure::{ApiFailure, Failure};
use crate::state::AppState;
use crate::token::{Role, constant_time_eq};

/// Who a request acts for: the token's name and role.
#[derive(Clone, Debug)]
pub(crate) struct Caller {
    pub(crate) name: String,
    pub(crate) role: Role,
}

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
        "this dashboard is read-only: no token is configured (lockctl serve --token-file PATH, \
         or Dashboard::token)",
    )
}

/// The secret an API request presents as `Authorization: Bearer <secret>`.
fn presented(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// The caller of an API action that needs `needed`: its bearer token, if it may.
pub(crate) fn bearer(
    state: &AppState,
    headers: &HeaderMap,
    needed: Role,
) -> Result<Caller, Failure> {
    if let Some(why) = cross_site(headers) {
        return Err(refused(why));
    }
    if state.tokens.is_empty() {
        return Err(read_only());
    }
    let presented = presented(headers).ok_or_else(|| {
        Failure::new(
            StatusCode::FORBIDDEN,
            "an action needs a token: send `Authorization: Bearer <secret>`",
        )
    })?;
    let caller = token_of(state, presented)
        .ok_or_else(|| Failure::new(StatusCode::FORBIDDEN, "the token is not valid"))?;
    permit(caller, needed)
}

/// The token whose secret is `presented`; every token is compared, each in constant time.
pub(crate) fn token_of(state: &AppState, presented: &str) -> Option<Caller> {
    state
        .tokens
        .iter()
        .fold(None, |found, token| match token.matches(presented) {
            true => Some(Caller {
                name: token.name().to_owned(),
                role: token.role(),
            }),
            false => found,
        })
}

/// `caller`, if its role reaches `needed`; otherwise 403 naming the role needed.
fn permit(caller: Caller, needed: Role) -> Result<Caller, Failure> {
    if caller.role >= needed {
        return Ok(caller);
    }
    Err(Failure::new(
        StatusCode::FORBIDDEN,
        format!(
            "this needs the {needed} role (or a higher one): token {:?} is a {}",
            caller.name, caller.role
        ),
    ))
}

/// The signed-in caller of a form post that carries its session's CSRF token, if its role
/// reaches `needed`.
pub(crate) fn form_caller(
    ctx: &Ctx,
    headers: &HeaderMap,
    csrf: &str,
    needed: Role,
) -> Result<Caller, Failure> {
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
    permit(
        Caller {
            name: session.token_name.clone(),
            role: session.role,
        },
        needed,
    )
}

/// Whether the request may read: reads are open, or it has a live session or a valid bearer
/// token (any role).
pub(crate) fn may_read(state: &AppState, ctx: &Ctx, headers: &HeaderMap) -> bool {
    !state.require_auth
        || ctx.session.is_some()
        || presented(headers).is_some_and(|secret| token_of(state, secret).is_some())
}

/// The answer to a read without credentials when reads are protected: 401 JSON under `/api`,
/// the login page otherwise.
pub(crate) fn sign_in_first(ctx: &Ctx, path: &str) -> Response {
    if is_api(path) {
        let failure = Failure::new(
            StatusCode::UNAUTHORIZED,
            "this dashboard's reads need a token: send `Authorization: Bearer <secret>` (any role)",
        );
        let mut response = ApiFailure(failure).into_response();
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return response;
    }
    Redirect::to(&ctx.link("/login")).into_response()
}

/// Middleware on every page and `/api` read (not the login page, nor the assets): with
/// [`Dashboard::require_auth`](crate::Dashboard::require_auth), a request without a session or
/// a valid bearer token is answered [`sign_in_first`].
pub(crate) async fn reads(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if !state.require_auth {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let Ok(ctx) = Ctx::from_request_parts(&mut parts, &state).await;
    if may_read(&state, &ctx, &parts.headers) {
        return next.run(Request::from_parts(parts, body)).await;
    }
    sign_in_first(&ctx, parts.uri.path())
}
