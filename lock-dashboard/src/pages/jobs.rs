//! The Jobs page: every job with its trigger, next fire, last run, the lease it holds, and
//! whether it is paused, missed or failing (those first), and above them the most failing
//! jobs as a chart (`charts::failing`).

use axum::extract::State;
use maud::{Markup, html};

use super::layout::{Nav, action, frame, maybe_time, outcome, time};
use crate::charts;
use crate::ctx::Ctx;
use crate::failure::PageFailure;
use crate::format::span_ms;
use crate::names::{job_action, job_page};
use crate::read::{self, duration_ms};
use crate::state::AppState;
use crate::token::Role;

/// `GET /`.
pub(crate) async fn page(State(state): State<AppState>, ctx: Ctx) -> Result<Markup, PageFailure> {
    let overview = read::overview(&state).await?;
    let view = &overview.view;
    let jobs = read::ordered(view);
    let body = html! {
        h1 { "Jobs" span.muted { " · " (jobs.len()) " jobs, " (view.instances.iter().filter(|i| i.alive).count()) " live instances" } }
        @if jobs.is_empty() {
            p.muted { "No job is registered: no instance with operations tables has started yet." }
        } @else {
            (charts::failing::chart(&charts::failing::most_failing(&jobs), view.database_now))
            table #jobs {
                thead { tr {
                    th { "Job" } th { "Trigger" } th { "Next fire" } th { "Last run" }
                    th { "Running now" } th { "State" } th { "Instances" }
                    @if ctx.may(Role::Operator) { th { "Actions" } }
                } }
                tbody {
                    @for job in &jobs {
                        @let failing = read::failing(job);
                        @let running = overview.running(job);
                        tr data-job=(job.name) class={
                            @if failing { "failing " } @if job.missed { "missed " } @if job.paused { "paused" }
                        } {
                            td { a href=(ctx.link(&job_page(&job.name))) { (job.name) } }
                            td {
                                @if let Some(trigger) = &job.trigger { (trigger) } @else { span.muted { "not registered" } }
                                @if let Some(zone) = &job.zone { br; span.muted { (zone) } }
                            }
                            td { (maybe_time(job.next_fire)) }
                            td {
                                @if let Some(run) = &job.last_run {
                                    (time(run.started_at))
                                    " " (outcome(run.outcome))
                                    @if let Some(ms) = duration_ms(run) { " " span.muted { (span_ms(ms)) } }
                                    br; span.muted { "on " (run.instance_id) }
                                } @else {
                                    span.muted { "never" }
                                }
                            }
                            td {
                                @if let Some(lease) = running {
                                    span.badge.held { "held" } " by " (lease.locked_by)
                                    br; span.muted { "since " } (time(lease.locked_at)) span.muted { " fence " (lease.fence) }
                                } @else {
                                    span.muted { "–" }
                                }
                            }
                            td.state {
                                @if job.paused { span.badge.paused { "paused" } " " }
                                @if job.missed { span.badge.missed { "missed" } " " }
                                @if failing { span.badge.failed { "failing" } " " }
                                @if job.pending_triggers > 0 { span.badge.running { (job.pending_triggers) " triggered" } }
                                @if !job.paused && !job.missed && !failing && job.pending_triggers == 0 { span.muted { "ok" } }
                            }
                            td { (job.live_instances.len()) }
                            @if ctx.may(Role::Operator) {
                                td.actions {
                                    @if job.paused {
                                        (action(&ctx, &job_action(&job.name, "resume"), "Resume", "resume"))
                                    } @else if job.trigger.is_some() {
                                        (action(&ctx, &job_action(&job.name, "pause"), "Pause", "pause"))
                                    }
                                    @if job.trigger.is_some() && !job.live_instances.is_empty() {
                                        " " (action(&ctx, &job_action(&job.name, "trigger"), "Trigger now", "trigger"))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(frame(
        &ctx,
        "Jobs",
        Nav::Jobs,
        Some(view.database_now),
        body,
    ))
}
