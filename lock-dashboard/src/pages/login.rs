//! The login page, and logging in and out: a token's secret for a session cookie, and back.

use axum::Form;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{Nav, frame};
use crate::auth::{cross_site, form_caller, read_only, refused, token_named};
use crate::ctx::Ctx;
use crate::failure::PageFailure;
use crate::session::{COOKIE, SESSION_LIFETIME};
use crate::state::AppState;

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
        let page = self::form(&ctx, Some("That token is not valid."));
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
