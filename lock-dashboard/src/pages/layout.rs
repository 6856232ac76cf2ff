//! The frame of every page and the small pieces pages share. Every text from the database
//! (job names, instance ids, error texts) goes through maud's `(..)`, which escapes it.

use chrono::{DateTime, Utc};
use lock_cluster::RunState;
use maud::{DOCTYPE, Markup, html};

use crate::ctx::Ctx;
use crate::format::instant;

/// Which page is current, for the navigation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    Jobs,
    Instances,
    Locks,
    Other,
}

/// A whole page.
pub(crate) fn frame(
    ctx: &Ctx,
    title: &str,
    nav: Nav,
    now: Option<DateTime<Utc>>,
    body: Markup,
) -> Markup {
    let current = |n: Nav| if n == nav { "current" } else { "" };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · scheduled-locks" }
                link rel="stylesheet" href=(ctx.link("/assets/dashboard.css"));
                link rel="icon" type="image/svg+xml" href=(ctx.link("/assets/favicon.svg"));
                script src=(ctx.link("/assets/dashboard.js")) defer {}
            }
            body data-refresh=(ctx.refresh) {
                header {
                    span.brand { "scheduled-locks" }
                    a class=(current(Nav::Jobs)) href=(ctx.home()) { "Jobs" }
                    a class=(current(Nav::Instances)) href=(ctx.link("/instances")) { "Instances" }
                    a class=(current(Nav::Locks)) href=(ctx.link("/locks")) { "Locks" }
                    span.who {
                        @if let Some(session) = ctx.signed_in() {
                            "signed in as " strong { (session.token_name) } " " span.role { (session.role.as_str()) } " "
                            form method="post" action=(ctx.link("/logout")) {
                                input type="hidden" name="csrf" value=(session.csrf);
                                button type="submit" { "Log out" }
                            }
                        } @else if ctx.actions_enabled {
                            "read-only · " a href=(ctx.link("/login")) { "log in" } " for actions"
                        } @else {
                            "read-only (no token configured)"
                        }
                    }
                }
                main { (body) }
                footer {
                    @if let Some(now) = now {
                        "Database time " (time(now)) " · "
                    }
                    @if ctx.refresh > 0 {
                        "refreshes every " (ctx.refresh) " s"
                    } @else {
                        "no auto-refresh"
                    }
                }
            }
        }
    }
}

/// A time in UTC; the script adds the browser's zone.
pub(crate) fn time(at: DateTime<Utc>) -> Markup {
    html! { time datetime=(instant(at)) { (crate::format::shown(at)) } }
}

/// An optional time, or a dash.
pub(crate) fn maybe_time(at: Option<DateTime<Utc>>) -> Markup {
    match at {
        Some(at) => time(at),
        None => html! { span.muted { "–" } },
    }
}

/// A run's outcome as a badge.
pub(crate) fn outcome(state: RunState) -> Markup {
    html! { span class={ "badge " (state.as_str()) } { (state.as_str()) } }
}

/// A button that posts an action with the session's CSRF token and the way back here.
pub(crate) fn action(ctx: &Ctx, path: &str, label: &str, class: &str) -> Markup {
    let Some(session) = ctx.signed_in() else {
        return html! {};
    };
    html! {
        form method="post" action=(ctx.link(path)) {
            input type="hidden" name="csrf" value=(session.csrf);
            input type="hidden" name="back" value=(ctx.here);
            button type="submit" class=(class) { (label) }
        }
    }
}
