//! The Locks page (the lock table as `lockctl list` shows it) and the confirmation before a
//! release, with `lockctl unlock`'s warning.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{Nav, frame, maybe_time, time};
use crate::ctx::Ctx;
use crate::failure::{Failure, PageFailure};
use crate::names::{check_lock_name, lock_unlock};
use crate::read;
use crate::state::AppState;
use crate::token::Role;
use crate::unlock::unlock_warning;

/// `GET /locks`.
pub(crate) async fn page(State(state): State<AppState>, ctx: Ctx) -> Result<Markup, PageFailure> {
    let (now, locks) = read::locks(&state).await?;
    let body = html! {
        h1 { "Locks" }
        @if locks.is_empty() {
            p.muted { "The lock table is empty." }
        } @else {
            table #locks {
                thead { tr {
                    th { "Name" } th { "Held" } th { "Locked by" } th { "Locked at" } th { "Until" }
                    th { "Fence" } th { "Last fire" }
                    @if ctx.may(Role::Admin) { th { "Actions" } }
                } }
                tbody {
                    @for lock in &locks {
                        tr data-lock=(lock.name) {
                            td { (lock.name) }
                            td { @if lock.held { span.badge.held { "held" } } @else { span.muted { "free" } } }
                            td { (lock.locked_by) }
                            td { (time(lock.locked_at)) }
                            td { (time(lock.lock_until)) }
                            td { (lock.fence) }
                            td { (maybe_time(lock.last_fire)) }
                            @if ctx.may(Role::Admin) {
                                td { @if lock.held { a href=(ctx.link(&lock_unlock(&lock.name))) { "Unlock…" } } }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(frame(&ctx, "Locks", Nav::Locks, Some(now), body))
}

/// `?name=NAME`: the lock named in the query (`.` and `..`, see `names::lock_unlock`).
#[derive(Deserialize)]
pub(crate) struct Named {
    pub(crate) name: String,
}

/// `GET /locks/{name}/unlock`: the row, the warning, and (signed in) the button.
pub(crate) async fn confirm(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(name): Path<String>,
) -> Result<Markup, PageFailure> {
    confirm_release(&state, &ctx, &name).await
}

/// `GET /lock/unlock?name=NAME`: the same, for a name a browser cannot keep in a path.
pub(crate) async fn confirm_by_query(
    State(state): State<AppState>,
    ctx: Ctx,
    Query(named): Query<Named>,
) -> Result<Markup, PageFailure> {
    confirm_release(&state, &ctx, &named.name).await
}

async fn confirm_release(state: &AppState, ctx: &Ctx, name: &str) -> Result<Markup, PageFailure> {
    check_lock_name(name)?;
    let record = state
        .provider
        .read_lock(name)
        .await
        .map_err(|e| Failure::provider(format!("cannot read lock {name:?}"), e))?
        .ok_or_else(|| {
            Failure::new(
                StatusCode::NOT_FOUND,
                format!("there is no lock named {name:?}"),
            )
        })?;
    let body = html! {
        h1 { "Release lock " (record.name) "?" }
        p.warning { "Releasing lock " (record.name) " by hand: " (unlock_warning(&record)) }
        @if record.held {
            @if let Some(session) = ctx.signed_in().filter(|_| ctx.may(Role::Admin)) {
                form method="post" action=(ctx.link(&lock_unlock(&record.name))) {
                    input type="hidden" name="csrf" value=(session.csrf);
                    button type="submit" class="danger" { "Release it anyway" }
                }
            } @else if ctx.signed_in().is_some() {
                p.muted { "Releasing a lock needs the admin role." }
            } @else {
                p.muted { "Log in as an admin to release it." }
            }
        }
        p { a href=(ctx.link("/locks")) { "Back to the locks" } }
    };
    Ok(frame(ctx, "Unlock", Nav::Locks, None, body))
}

/// The page after a release: what was released, as `lockctl unlock --force` says it.
pub(crate) fn released(
    ctx: &Ctx,
    record: &lock_core::LockRecord,
    not_recorded: Option<&str>,
) -> Markup {
    let body = html! {
        h1 { "Lock " (record.name) }
        p.notice {
            @if record.held {
                "Released lock " (record.name) ", held by " (record.locked_by) " until " (time(record.lock_until)) "."
            } @else {
                "Lock " (record.name) " was not held, so nothing was released."
            }
        }
        @if let Some(note) = not_recorded { p.error { (note) } }
        p { a href=(ctx.link("/locks")) { "Back to the locks" } }
    };
    frame(ctx, "Unlock", Nav::Locks, None, body)
}
