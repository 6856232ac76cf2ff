//! The form posts behind the pages' buttons: checked (session, CSRF token, same origin), done,
//! and answered with a redirect back to the page the button was on; or, when the action log
//! could not record the action (which stands), with a page that says so.

use axum::Form;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{Nav, frame};

use crate::actions::{self, JobAction};
use crate::auth;
use crate::ctx::Ctx;
use crate::failure::PageFailure;
use crate::names::{check_job_name, check_lock_name};
use crate::state::AppState;

/// An action's form.
#[derive(Deserialize)]
pub(crate) struct ActionForm {
    csrf: String,
    /// The page to return to, below the dashboard's mount point.
    #[serde(default)]
    back: String,
    /// A trigger's parameters, one `key=value` per line.
    #[serde(default)]
    params: String,
}

/// `POST /jobs/{name}/{pause|resume|trigger}`.
pub(crate) async fn job_action(
    State(state): State<AppState>,
    ctx: Ctx,
    Path((name, action)): Path<(String, String)>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Result<Response, PageFailure> {
    act(&state, &ctx, &name, &action, &headers, &form).await
}

/// `?name=NAME` of an action on a job a browser cannot name in a path (`.`, `..`).
#[derive(Deserialize)]
pub(crate) struct Named {
    name: String,
}

/// `POST /job/{pause|resume|trigger}?name=NAME`.
pub(crate) async fn job_action_by_query(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(action): Path<String>,
    Query(named): Query<Named>,
    headers: HeaderMap,
    Form(form): Form<ActionForm>,
) -> Result<Response, PageFailure> {
    act(&state, &ctx, &named.name, &action, &headers, &form).await
}

async fn act(
    state: &AppState,
    ctx: &Ctx,
    name: &str,
    action: &str,
    headers: &HeaderMap,
    form: &ActionForm,
) -> Result<Response, PageFailure> {
    let action = JobAction::parse(action)?;
    let caller = auth::form_caller(ctx, headers, &form.csrf, action.needs())?;
    check_job_name(name)?;
    // Decided before the action runs: a way back that cannot be followed is never an error
    // after the fact.
    let back = back(ctx, &form.back);
    let params = actions::parse_params(
        form.params
            .lines()
            .map(|line| line.trim_end_matches('\r'))
            .filter(|line| !line.trim().is_empty()),
    )?;
    let done = actions::on_job(state, action, name, &caller, &params).await?;
    match done.not_recorded {
        None => Ok(Redirect::to(&back).into_response()),
        Some(note) => Ok(not_recorded(ctx, &done.message, &note, &back).into_response()),
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

/// Only a path of this dashboard: printable ASCII starting with one `/`, without `\\`, and
/// whose path, percent-decoded, holds no `//`, `\\` or control character (a browser drops a
/// tab or newline from a URL, so `/%09/evil.example/` would become `//evil.example/`).
/// Anything else goes to the Jobs page: a form cannot send the browser elsewhere.
fn back(ctx: &Ctx, back: &str) -> String {
    if !safe_back(back) {
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

fn safe_back(back: &str) -> bool {
    let path = back.split(['?', '#']).next().unwrap_or("");
    let decoded = percent_decoded(path);
    back.starts_with('/')
        && back.bytes().all(|b| b.is_ascii_graphic())
        && !back.contains('\\')
        && !decoded.contains("//")
        && !decoded.contains('\\')
        && !decoded.chars().any(char::is_control)
}

/// `path` with its `%XX` decoded (an invalid escape stays as it is).
fn percent_decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        let hex = bytes
            .get(at + 1..at + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[at], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                at += 3;
            }
            (byte, _) => {
                out.push(byte);
                at += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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
    release(&state, &ctx, &name, &headers, &form).await
}

/// `POST /lock/unlock?name=NAME`: the same, for a name a browser cannot keep in a path.
pub(crate) async fn unlock_by_query(
    State(state): State<AppState>,
    ctx: Ctx,
    Query(named): Query<super::locks::Named>,
    headers: HeaderMap,
    Form(form): Form<UnlockForm>,
) -> Result<Response, PageFailure> {
    release(&state, &ctx, &named.name, &headers, &form).await
}

async fn release(
    state: &AppState,
    ctx: &Ctx,
    name: &str,
    headers: &HeaderMap,
    form: &UnlockForm,
) -> Result<Response, PageFailure> {
    let caller = auth::form_caller(ctx, headers, &form.csrf, actions::UNLOCK_NEEDS)?;
    check_lock_name(name)?;
    let unlocked = actions::unlock(state, name, &caller).await?;
    Ok(
        super::locks::released(ctx, &unlocked.before, unlocked.not_recorded.as_deref())
            .into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::safe_back;

    #[test]
    fn only_paths_of_this_dashboard_are_ways_back() {
        for back in [
            "/",
            "/?refresh=0",
            "/jobs/report?before=3",
            "/jobs/%3Cscript%3E",
            "/locks",
        ] {
            assert!(safe_back(back), "{back}");
        }
        for back in [
            "",
            "jobs",
            "//evil.example",
            "/\\evil.example",
            "/%09/evil.example/",
            "/\t/evil.example/",
            "/a\r\nSet-Cookie: x=1",
            "/a\u{7f}",
            "/%2F/evil.example",
            "/%5Cevil.example",
            "/a b",
            "/%0d%0aX: y",
        ] {
            assert!(!safe_back(back), "{back:?}");
        }
    }
}
