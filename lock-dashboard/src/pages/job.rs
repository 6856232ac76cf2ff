//! The Job page: the job's facts, its lock row, its pause and trigger requests (with who
//! asked), its action log (who paused, resumed, triggered or unlocked it, and when), charts of
//! its newest runs (`charts::runs`), and its run history, paged by keyset.

use axum::extract::{Path, Query, State};
use maud::{Markup, html};
use serde::Deserialize;

use super::layout::{Nav, action, frame, maybe_time, outcome, time};
use crate::charts::{self, WINDOW_RUNS};
use crate::ctx::Ctx;
use crate::failure::PageFailure;
use crate::format::span_ms;
use crate::names::{check_job_name, job_action, job_page, job_runs_before, run_page};
use crate::read::{self, duration_ms, lag_ms};
use crate::state::AppState;
use crate::token::Role;

/// `?before=ID`: the page of runs older than run ID.
#[derive(Deserialize)]
pub(crate) struct Paging {
    before: Option<i64>,
}

/// `?name=NAME&before=ID`: the job named in the query (`.` and `..`, see `names::job_page`).
#[derive(Deserialize)]
pub(crate) struct Named {
    name: String,
    before: Option<i64>,
}

/// `GET /jobs/{name}`.
pub(crate) async fn page(
    State(state): State<AppState>,
    ctx: Ctx,
    Path(name): Path<String>,
    Query(paging): Query<Paging>,
) -> Result<Markup, PageFailure> {
    show(&state, &ctx, &name, paging).await
}

/// `GET /job?name=NAME`: the same page, for a name a browser cannot keep in a path.
pub(crate) async fn page_by_query(
    State(state): State<AppState>,
    ctx: Ctx,
    Query(named): Query<Named>,
) -> Result<Markup, PageFailure> {
    let paging = Paging {
        before: named.before,
    };
    show(&state, &ctx, &named.name, paging).await
}

async fn show(
    state: &AppState,
    ctx: &Ctx,
    name: &str,
    paging: Paging,
) -> Result<Markup, PageFailure> {
    check_job_name(name)?;
    let detail = read::job_detail(state, name, paging.before, state.page_size, WINDOW_RUNS).await?;
    let job = &detail.job;
    let body = html! {
        h1 { "Job " (job.name) }
        dl.facts {
            dt { "Trigger" } dd { (job.trigger.as_deref().unwrap_or("not registered")) @if let Some(zone) = &job.zone { " in " (zone) } }
            dt { "Lock" } dd { (job.lock_name.as_deref().unwrap_or("–")) }
            dt { "Next fire" } dd { (maybe_time(job.next_fire)) }
            dt { "Live instances" } dd { @if job.live_instances.is_empty() { span.muted { "none" } } @else { (job.live_instances.join(", ")) } }
            dt { "State" } dd {
                @if let Some(pause) = read::pause_of(&detail.control) {
                    span.badge.paused { "paused" } " by " (pause.requested_by) " since " (time(pause.requested_at))
                } @else { "active" }
            }
            @if ctx.may(Role::Operator) && (job.trigger.is_some() || job.paused) {
                dt { "Actions" } dd.actions {
                    @if job.paused { (action(ctx, &job_action(&job.name, "resume"), "Resume", "resume")) }
                    @else { (action(ctx, &job_action(&job.name, "pause"), "Pause", "pause")) }
                    @if job.trigger.is_some() && !job.live_instances.is_empty() { " " (trigger_form(ctx, &job_action(&job.name, "trigger"))) }
                }
            }
        }
        (charts_section(&detail))
        h2 { "Lock row" }
        @if let Some(lock) = &detail.lock {
            table #lock { thead { tr { th { "Name" } th { "Held" } th { "Locked by" } th { "Locked at" } th { "Until" } th { "Fence" } th { "Last fire" } } }
                tbody { tr {
                    td { (lock.name) }
                    td { @if lock.held { span.badge.held { "held" } } @else { span.muted { "free" } } }
                    td { (lock.locked_by) } td { (time(lock.locked_at)) } td { (time(lock.lock_until)) }
                    td { (lock.fence) } td { (maybe_time(lock.last_fire)) }
                } }
            }
        } @else {
            p.muted { "No row in the lock table yet." }
        }
        @if !detail.control.is_empty() {
            h2 { "Requests" }
            table #requests { thead { tr { th { "Id" } th { "Kind" } th { "Asked" } th { "By" } th { "Claimed by" } } }
                tbody { @for request in &detail.control { tr {
                    td { (request.id) }
                    td {
                        (request.kind.as_str())
                        @if let Some(slot) = request.slot { span.muted { " slot " (time(slot)) } }
                        @if !request.params.is_empty() { " " code { (request.params.encode()) } }
                    }
                    td { (time(request.requested_at)) }
                    td { (request.requested_by) }
                    td { @if let Some(by) = &request.claimed_by { (by) " " (maybe_time(request.claimed_at)) } @else { span.muted { "–" } } }
                } } }
            }
        }
        h2 { "Actions" }
        @match &detail.actions {
            Ok(log) if log.is_empty() => p.muted { "No action recorded." },
            Ok(log) => table #actions {
                thead { tr { th { "When" } th { "Who" } th { "Action" } th { "Detail" } } }
                tbody { @for entry in log { tr data-action=(entry.id) {
                    td { (time(entry.at)) }
                    td { (entry.requested_by) }
                    td { (entry.action.as_str()) }
                    td { @if let Some(detail) = &entry.detail { (detail) } @else { span.muted { "–" } } }
                } } }
            },
            Err(error) => p.error { "The action log cannot be read: " (error) },
        }
        h2 { "Runs" }
        @if detail.runs.is_empty() {
            p.muted { "No run in the history" @if paging.before.is_some() { " before this page" } "." }
        } @else {
            table #runs {
                thead { tr { th { "Run" } th { "Slot" } th { "Kind" } th { "Instance" } th { "Fence" } th { "Attempt" } th { "Params" } th { "Started" } th { "Duration" } th { "Lag" } th { "Outcome" } } }
                tbody {
                    @for run in &detail.runs {
                        // A retry is grouped with the fire it retries: same slot and fence,
                        // the rows of one fire adjacent (one lease at a time).
                        tr data-run=(run.id) data-attempt=(run.attempt) class=[(run.attempt > 1).then_some("retry")] {
                            td { a href=(ctx.link(&run_page(&job.name, run.id))) { (run.id) } }
                            td {
                                @if run.attempt > 1 {
                                    span.muted { "↳ attempt " (run.attempt) " of " }
                                    @match run.slot {
                                        Some(slot) => { "slot " (time(slot)) }
                                        None => { "fence " (run.fence) }
                                    }
                                } @else {
                                    (maybe_time(run.slot))
                                }
                            }
                            td { (run.fire_kind.as_str()) }
                            td { (run.instance_id) }
                            td { (run.fence) }
                            td { (run.attempt) }
                            td { @if run.params.is_empty() { span.muted { "–" } } @else { @for (key, value) in run.params.iter() { code { (key) "=" (value) } " " } } }
                            td { (time(run.started_at)) }
                            td { (duration_ms(run).map_or("–".to_owned(), span_ms)) }
                            td { (lag_ms(run).map_or("–".to_owned(), span_ms)) }
                            td {
                                (outcome(run.outcome))
                                @if run.cancel_requested {
                                    " " span.muted title="cancellation was asked (shutdown, lost lease or timeout) before the body ended; the outcome is its own result" { "cancel requested" }
                                }
                                @if let Some(error) = &run.error { pre.error { (error) } }
                            }
                        }
                    }
                }
            }
        }
        div.paging {
            @if paging.before.is_some() { a href=(ctx.link(&job_page(&job.name))) { "Newest runs" } }
            @if let Some(older) = detail.older { a rel="next" href=(ctx.link(&job_runs_before(&job.name, older))) { "Older runs →" } }
        }
    };
    Ok(frame(ctx, &job.name, Nav::Other, Some(detail.now), body))
}

/// The charts of the job's newest runs, and the window they cover.
fn charts_section(detail: &read::JobDetail) -> Markup {
    html! {
        section.charts-section {
            h2 {
                "Charts"
                span.muted #chart-window {
                    " · the last " (detail.recent.len()) " runs"
                    @if (detail.recent.len() as u32) < WINDOW_RUNS { " (all there are; at most " (WINDOW_RUNS) ")" }
                }
            }
            (charts::runs::charts(&detail.job.name, &detail.recent))
        }
    }
}

/// The Trigger button, with a field for the run's parameters (`key=value`, one per line; the
/// body reads them with `JobContext::params()`).
fn trigger_form(ctx: &Ctx, path: &str) -> Markup {
    let Some(session) = ctx.signed_in() else {
        return html! {};
    };
    html! {
        form.trigger method="post" action=(ctx.link(path)) {
            input type="hidden" name="csrf" value=(session.csrf);
            input type="hidden" name="back" value=(ctx.here);
            textarea name="params" rows="2" cols="28" placeholder="key=value, one per line (optional)" {}
            " "
            button type="submit" class="trigger" { "Trigger now" }
        }
    }
}
