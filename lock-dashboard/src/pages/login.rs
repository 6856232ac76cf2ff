//! The login page: a token's secret for a session cookie.

use maud::{Markup, html};

use super::layout::{Nav, frame};
use crate::ctx::Ctx;

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
