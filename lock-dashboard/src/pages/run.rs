//! The Run page: one run's facts (slot, kind, instance, fence, attempt, parameters, times,
//! outcome and error) and its log lines, as the scheduler's `run_logs` kept them, with the
//! count of lines not kept when the run logged past the bound.

use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{Nav, frame, maybe_time, outcome, time};
use crate::ctx::Ctx;
use crate::failure::{Failure, PageFailure};
use crate::format::span_ms;
use crate::names::{check_job_name, job_page};
use crate::read::{self, duration_ms, lag_ms};
use crate::state::AppState;

/// `?name=NAME&id=ID`: the run of the job named in the query (`.` and `..`, see
/// `names::run_page`).
#[derive(Deserialize)]
pub(crate) struct Named {
    name: String,
    id: i64,
}

/// `GET /jobs/{name}/runs/{id}`.
pub(crate) async fn page(
    State(state): State<AppState>,
    ctx: Ctx,
    Path((name, id)): Path<(String, i64)>,
) -> Result<Markup, PageFailure> {
    show(&state, &ctx, &name, id).await
}

/// `GET /run?name=NAME&id=ID`: the same page, for a name a browser cannot keep in a path.
pub(crate) async fn page_by_query(
    State(state): State<AppState>,
    ctx: Ctx,
    Query(named): Query<Named>,
) -> Result<Markup, PageFailure> {
    show(&state, &ctx, &named.name, named.id).await
}

async fn show(state: &AppState, ctx: &Ctx, name: &str, id: i64) -> Result<Markup, PageFailure> {
    check_job_name(name)?;
    let detail = read::run_detail(state, name, id).await?;
    let run = &detail.run;
    let lines = match &detail.logs {
        Some(log) => log.lines().map_err(|e| {
            Failure::new(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                format!("the log lines of run {id} of job {name:?} do not parse: {e}"),
            )
        })?,
        None => Vec::new(),
    };
    let dropped = detail.logs.as_ref().map_or(0, |log| log.dropped());
    let body = html! {
        h1 { "Run " (run.id) " of " a href=(ctx.link(&job_page(&run.job))) { (run.job) } }
        dl.facts #run {
            dt { "Outcome" } dd {
                (outcome(run.outcome))
                @if run.cancel_requested { " " span.muted { "cancel requested" } }
                @if let Some(error) = &run.error { pre.error { (error) } }
            }
            dt { "Slot" } dd { (maybe_time(run.slot)) }
            dt { "Kind" } dd { (run.fire_kind.as_str()) }
            dt { "Instance" } dd { (run.instance_id) }
            dt { "Fence" } dd { (run.fence) }
            dt { "Attempt" } dd { (run.attempt) }
            dt { "Params" } dd { @if run.params.is_empty() { span.muted { "–" } } @else { @for (key, value) in run.params.iter() { code { (key) "=" (value) } " " } } }
            dt { "Started" } dd { (time(run.started_at)) }
            dt { "Ended" } dd { (maybe_time(run.ended_at)) }
            dt { "Duration" } dd { (duration_ms(run).map_or("–".to_owned(), span_ms)) }
            dt { "Lag" } dd { (lag_ms(run).map_or("–".to_owned(), span_ms)) }
        }
        h2 { "Log lines" }
        @if lines.is_empty() && dropped == 0 {
            p.muted #no-log {
                @if run.ended_at.is_none() { "The run's lines are written when it ends." }
                @else { "No log line kept for this run (run logs off, or nothing logged at the level kept)." }
            }
        } @else {
            table #log {
                thead { tr { th { "Time" } th { "Level" } th { "Target" } th { "Message" } } }
                tbody { @for line in &lines {
                    tr data-level=(line.level) {
                        td { (time(line.at)) }
                        td { span class={ "level " (line.level.to_lowercase()) } { (line.level) } }
                        td { code { (line.target) } }
                        td.message { (line.message) }
                    }
                } }
            }
            @if dropped > 0 {
                p.cut #log-cut { "… " (dropped) " more lines not kept (the run's log reached its bound)" }
            }
        }
    };
    Ok(frame(
        ctx,
        &format!("Run {id} of {name}"),
        Nav::Other,
        Some(detail.now),
        body,
    ))
}
