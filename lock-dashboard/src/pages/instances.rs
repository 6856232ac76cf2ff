//! The Instances page: every live and recently gone instance.

use axum::extract::State;
use maud::{Markup, html};

use super::layout::{Nav, frame, time};
use crate::ctx::Ctx;
use crate::failure::PageFailure;
use crate::format::span_ms;
use crate::read;
use crate::state::AppState;

/// `GET /instances`.
pub(crate) async fn page(State(state): State<AppState>, ctx: Ctx) -> Result<Markup, PageFailure> {
    let overview = read::overview(&state).await?;
    let view = &overview.view;
    let body = html! {
        h1 { "Instances" }
        @if view.instances.is_empty() {
            p.muted { "No instance in the registry." }
        } @else {
            table #instances {
                thead { tr {
                    th { "Instance" } th { "State" } th { "Host" } th { "Pid" } th { "Version" }
                    th { "Started" } th { "Last heartbeat" } th { "Clock offset" } th { "Jobs" }
                } }
                tbody {
                    @for instance in &view.instances {
                        tr data-instance=(instance.info.instance_id) {
                            td { (instance.info.instance_id) }
                            td { @if instance.alive { span.badge.alive { "alive" } } @else { span.badge.gone { "gone" } } }
                            td { (instance.info.host) }
                            td { (instance.info.pid) }
                            td { (instance.info.version) }
                            td { (time(instance.info.started_at)) }
                            td { (time(instance.last_heartbeat)) }
                            td { (span_ms(instance.info.clock_offset_ms)) }
                            td { (instance.jobs.join(", ")) }
                        }
                    }
                }
            }
        }
    };
    Ok(frame(
        &ctx,
        "Instances",
        Nav::Instances,
        Some(view.database_now),
        body,
    ))
}
