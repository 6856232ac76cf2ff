//! The form posts behind the pages' buttons: checked (session, CSRF token, same origin), done,
//! and answered with a redirect back to the page the button was on; or, when the action log
//! could not record the action (which stands), with a page that says so.

use axum::Form;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{Nav, frame};

use crate::actions::{self, JobAction};
use crate::auth;
use crate::ctx::Ctx;
use crate::failure::PageFailure;
use crate::names::check_job_name;
use crate::state::AppState;

/// An action's form.
#[derive(Deserialize)]
pub(crate) struct ActionForm {
    csrf: String,
    /// The page to return to, below the dashboard's mount point.
    #[serde(default)]
    back: String,
}

/// `POST /jobs/{name}/{pause|resume|trigger}`.
pub(crate) async fn job_action(
    State(state): State<AppState>,
    ctx: Ctx,
    Path((name, action)): Path<(String, String)>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Result<Response, PageFailure> {
    let who = auth::form_caller(&ctx, &headers, &form.csrf)?;
    let action = JobAction::parse(&action)?;
    check_job_name(&name)?;
    let done = actions::on_job(&state, action, &name, &who).await?;
    let back = back(&ctx, &form.back);
    match done.not_recorded {
        None => Ok(Redirect::to(&back).into_response()),
        Some(note) => Ok(not_recorded(&ctx, &done.message, &note, &back).into_response()),
    }
}

/// The answer to an action that stands but is missing from the action log.
fn not_recorded(ctx: &Ctx, message: &str, note: &str, back: &str) -> Markup {
    let body = html! {
        h1 { "Done, not recorded" }
        p.notice { (message) }
        p.error { (note) }
        p { a href=(back) { "Back" } }
    };
    frame(ctx, "Not recorded", Nav::Other, None, body)
}

/// Only a path below the dashboard (`/...`, never `//host`): a form cannot send the browser
/// elsewhere.
fn back(ctx: &Ctx, back: &str) -> String {
    if !back.starts_with('/') || back.starts_with("//") || back.contains('\\') {
        return ctx.home();
    }
    // The Jobs page is the mount point itself (`/scheduler`, not `/scheduler/`).
    match back.strip_prefix('/') {
        Some(query) if query.is_empty() || query.starts_with('?') => {
            format!("{}{query}", ctx.home())
        }
        _ => ctx.link(back),
    }
}

/// The release form.
#[derive(Deserialize)]
pub(crate) struct UnlockForm {
    csrf: String,
}

/// `POST /locks/{name}/unlock`.
pub(crate) async fn unlock(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(name): Path<String>,
    headers: HeaderMap,
    Form(form): Form<UnlockForm>,
) -> Result<Response, PageFailure> {
    let who = auth::form_caller(&ctx, &headers, &form.csrf)?;
    let unlocked = actions::unlock(&state, &name, &who).await?;
    Ok(
        super::locks::released(&ctx, &unlocked.before, unlocked.not_recorded.as_deref())
            .into_response(),
    )
}
