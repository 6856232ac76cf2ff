//! The login page, and logging in and out: a token's secret for a session cookie, and back.
//! Attempts are limited per client address (`login_limit`: 429 with `Retry-After` over it);
//! each refused one is logged (target `lock_dashboard::audit`) with the address.

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{Nav, frame};
use crate::auth::{cross_site, form_caller, read_only, refused, token_of};
use crate::ctx::Ctx;
use crate::failure::{Failure, PageFailure};
use crate::login_limit::Client;
use crate::session::{COOKIE, SESSION_LIFETIME};
use crate::state::AppState;
use crate::token::Role;

/// `GET /login`.
pub(crate) async fn page(ctx: Ctx) -> Markup {
    form(&ctx, None)
}

/// The form, with why the last attempt failed.
pub(crate) fn form(ctx: &Ctx, error: Option<&str>) -> Markup {
    let body = html! {
        h1 { "Log in" }
        @if !ctx.actions_enabled {
            p.failure { "This dashboard is read-only: no token is configured." }
        } @else {
            @if let Some(error) = error { p.failure { (error) } }
            form.login method="post" action=(ctx.link("/login")) {
                label for="token" { "Token" }
                input #token type="password" name="token" autocomplete="current-password" required;
                button type="submit" { "Log in" }
            }
        }
    };
    frame(ctx, "Log in", Nav::Other, None, body)
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
    client: Client,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Result<Response, PageFailure> {
    if let Some(why) = cross_site(&headers) {
        return Err(refused(why).into());
    }
    if state.tokens.is_empty() {
        return Err(read_only().into());
    }
    if let Err(wait) = state.login_limit.attempt(client) {
        let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        let seconds = seconds.max(1);
        tracing::warn!(target: "lock_dashboard::audit", client = %client.shown(), retry_after_s = seconds, "dashboard login refused: too many attempts");
        let failure = Failure::new(
            StatusCode::TOO_MANY_REQUESTS,
            format!("too many login attempts from this address: try again in {seconds} s"),
        );
        let mut response = PageFailure(failure).into_response();
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        return Ok(response);
    }
    let Some(caller) = token_of(&state, form.token.trim()) else {
        tracing::warn!(target: "lock_dashboard::audit", client = %client.shown(), "dashboard login refused: wrong token");
        let page = self::form(&ctx, Some("That token is not valid."));
        return Ok((StatusCode::FORBIDDEN, page).into_response());
    };
    let id = state.sessions.start(&caller.name, caller.role);
    tracing::info!(target: "lock_dashboard::audit", token = %caller.name, role = %caller.role, client = %client.shown(), "dashboard login");
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
    form_caller(&ctx, &headers, &form.csrf, Role::Viewer)?;
    if let Some((id, _)) = &ctx.session {
        state.sessions.end(id);
    }
    let cookie = format!(
        "{COOKIE}=; Path={}; HttpOnly; SameSite=Strict; Max-Age=0",
        ctx.home()
    );
    Ok(([(header::SET_COOKIE, cookie)], Redirect::to(&ctx.home())).into_response())
}
