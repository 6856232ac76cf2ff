//! The JSON endpoints (README, "JSON endpoints"): the same data as the pages, and the actions
//! behind `Authorization: Bearer <secret>`. Fields are only ever added; times are UTC with
//! milliseconds.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use lock_cluster::{ActionRecord, InstanceView, JobView, RunView};
use lock_core::LockRecord;
use serde::{Deserialize, Serialize};

use crate::actions::{self, JobAction};
use crate::auth;
use crate::failure::{ApiFailure, Failure};
use crate::format::instant;
use crate::names::{check_job_name, check_lock_name};
use crate::read::{self, duration_ms, lag_ms};
use crate::state::AppState;
use crate::unlock::unlock_warning;

/// One job: `GET /api/jobs`.
#[derive(Serialize)]
pub(crate) struct JobJson {
    name: String,
    lock_name: Option<String>,
    trigger: Option<String>,
    zone: Option<String>,
    next_fire: Option<String>,
    paused: bool,
    missed: bool,
    failing: bool,
    live_instances: Vec<String>,
    last_run: Option<RunJson>,
    last_success: Option<String>,
    pending_triggers: usize,
    running: Option<LeaseJson>,
}

/// The lease a running job holds.
#[derive(Serialize)]
pub(crate) struct LeaseJson {
    holder: String,
    since: String,
    until: String,
    fence: u64,
}

/// One run: `GET /api/jobs/{name}/runs`.
#[derive(Serialize)]
pub(crate) struct RunJson {
    id: i64,
    job: String,
    slot: Option<String>,
    fire_kind: &'static str,
    instance: String,
    fence: u64,
    started_at: String,
    ended_at: Option<String>,
    duration_ms: Option<i64>,
    lag_ms: Option<i64>,
    outcome: &'static str,
    error: Option<String>,
    /// Which attempt of its fire (slot and fence) the row is, from 1.
    attempt: u32,
    /// Cancellation was asked before the body ended; `outcome` is still its own result.
    cancel_requested: bool,
    /// A manual run's parameters, by key; empty for every other fire.
    params: std::collections::BTreeMap<String, String>,
}

impl From<&RunView> for RunJson {
    fn from(run: &RunView) -> Self {
        RunJson {
            id: run.id,
            job: run.job.clone(),
            slot: run.slot.map(instant),
            fire_kind: run.fire_kind.as_str(),
            instance: run.instance_id.clone(),
            fence: run.fence,
            started_at: instant(run.started_at),
            ended_at: run.ended_at.map(instant),
            duration_ms: duration_ms(run),
            lag_ms: lag_ms(run),
            outcome: run.outcome.as_str(),
            error: run.error.clone(),
            attempt: run.attempt,
            cancel_requested: run.cancel_requested,
            params: run
                .params
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        }
    }
}

/// One instance: `GET /api/instances`.
#[derive(Serialize)]
pub(crate) struct InstanceJson {
    instance_id: String,
    host: String,
    pid: u32,
    version: String,
    started_at: String,
    last_heartbeat: String,
    alive: bool,
    clock_offset_ms: i64,
    heartbeat_ms: i64,
    jobs: Vec<String>,
}

impl From<&InstanceView> for InstanceJson {
    fn from(i: &InstanceView) -> Self {
        InstanceJson {
            instance_id: i.info.instance_id.clone(),
            host: i.info.host.clone(),
            pid: i.info.pid,
            version: i.info.version.clone(),
            started_at: instant(i.info.started_at),
            last_heartbeat: instant(i.last_heartbeat),
            alive: i.alive,
            clock_offset_ms: i.info.clock_offset_ms,
            heartbeat_ms: i.info.heartbeat_ms,
            jobs: i.jobs.clone(),
        }
    }
}

/// One lock: `GET /api/locks`, as `lockctl list --json` prints it.
#[derive(Serialize)]
pub(crate) struct LockJson {
    name: String,
    held: bool,
    locked_by: String,
    locked_at: String,
    lock_until: String,
    fence: u64,
    last_fire: Option<String>,
}

impl From<&LockRecord> for LockJson {
    fn from(r: &LockRecord) -> Self {
        LockJson {
            name: r.name.clone(),
            held: r.held,
            locked_by: r.locked_by.clone(),
            locked_at: instant(r.locked_at),
            lock_until: instant(r.lock_until),
            fence: r.fence,
            last_fire: r.last_fire.map(instant),
        }
    }
}

fn job_json(job: &JobView, overview: &read::Overview) -> JobJson {
    JobJson {
        name: job.name.clone(),
        lock_name: job.lock_name.clone(),
        trigger: job.trigger.clone(),
        zone: job.zone.clone(),
        next_fire: job.next_fire.map(instant),
        paused: job.paused,
        missed: job.missed,
        failing: read::failing(job),
        live_instances: job.live_instances.clone(),
        last_run: job.last_run.as_ref().map(RunJson::from),
        last_success: job.last_success.map(instant),
        pending_triggers: job.pending_triggers,
        running: overview.running(job).map(|lease| LeaseJson {
            holder: lease.locked_by.clone(),
            since: instant(lease.locked_at),
            until: instant(lease.lock_until),
            fence: lease.fence,
        }),
    }
}

/// `GET /api/jobs`: every job, failing and missed first.
pub(crate) async fn jobs(State(state): State<AppState>) -> Result<Json<Vec<JobJson>>, ApiFailure> {
    let overview = read::overview(&state).await?;
    Ok(Json(
        read::ordered(&overview.view)
            .into_iter()
            .map(|job| job_json(job, &overview))
            .collect(),
    ))
}

/// `?before=ID&limit=N` of a runs page.
#[derive(Deserialize)]
pub(crate) struct Paging {
    before: Option<i64>,
    limit: Option<u32>,
}

/// One page of runs and where the next (older) one starts.
#[derive(Serialize)]
pub(crate) struct RunsPage {
    job: String,
    runs: Vec<RunJson>,
    /// `before` of the next page; null on the last.
    older: Option<i64>,
}

/// `GET /api/jobs/{name}/runs?before=ID&limit=N`: newest first, at most 500 a page.
pub(crate) async fn runs(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(paging): Query<Paging>,
) -> Result<Json<RunsPage>, ApiFailure> {
    check_job_name(&name)?;
    let limit = paging.limit.unwrap_or(state.page_size).clamp(1, 500);
    let detail = read::job_detail(&state, &name, paging.before, limit, 0).await?;
    Ok(Json(RunsPage {
        job: name,
        runs: detail.runs.iter().map(RunJson::from).collect(),
        older: detail.older,
    }))
}

/// `GET /api/instances`.
pub(crate) async fn instances(
    State(state): State<AppState>,
) -> Result<Json<Vec<InstanceJson>>, ApiFailure> {
    let overview = read::overview(&state).await?;
    Ok(Json(
        overview
            .view
            .instances
            .iter()
            .map(InstanceJson::from)
            .collect(),
    ))
}

/// `GET /api/locks`.
pub(crate) async fn locks(
    State(state): State<AppState>,
) -> Result<Json<Vec<LockJson>>, ApiFailure> {
    let (_, locks) = read::locks(&state).await?;
    Ok(Json(locks.iter().map(LockJson::from).collect()))
}

/// What an action answers.
#[derive(Serialize)]
struct ActionJson {
    action: &'static str,
    job: String,
    changed: bool,
    by: String,
    request_id: Option<i64>,
    message: String,
    /// Whether the action log has a row for it.
    recorded: bool,
    /// Why not, when it has none (the action stands).
    #[serde(skip_serializing_if = "Option::is_none")]
    warning: Option<String>,
}

/// The body of `POST /api/jobs/{name}/trigger`, optional: `{"params": {"day": "2026-12-01"}}`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActionBody {
    #[serde(default)]
    params: std::collections::BTreeMap<String, String>,
}

/// `POST /api/jobs/{name}/{pause|resume|trigger}`; a trigger may carry its run's parameters
/// as a JSON body (`{"params": {"key": "value"}}`, keys in sorted order).
pub(crate) async fn job_action(
    State(state): State<AppState>,
    Path((name, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiFailure> {
    let action = JobAction::parse(&action)?;
    let caller = auth::bearer(&state, &headers, action.needs())?;
    check_job_name(&name)?;
    let body: ActionBody = if body.iter().all(u8::is_ascii_whitespace) {
        ActionBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                format!("the body is not {{\"params\": {{..}}}}: {e}"),
            )
        })?
    };
    let mut params = lock_core::Params::new();
    for (key, value) in body.params {
        params
            .insert(key, value)
            .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, format!("parameters: {e}")))?;
    }
    let done = actions::on_job(&state, action, &name, &caller, &params).await?;
    let status = match action {
        JobAction::Trigger => StatusCode::ACCEPTED,
        _ => StatusCode::OK,
    };
    Ok((
        status,
        Json(ActionJson {
            action: action.as_str(),
            job: name,
            changed: done.changed,
            by: actions::requester(&caller.name),
            request_id: done.request_id,
            message: done.message,
            recorded: done.not_recorded.is_none(),
            warning: done.not_recorded,
        }),
    )
        .into_response())
}

/// `?force=true` of an unlock.
#[derive(Deserialize)]
pub(crate) struct Force {
    #[serde(default)]
    force: bool,
}

/// `POST /api/locks/{name}/unlock?force=true`: without `force`, 409 with `lockctl unlock`'s
/// warning and the row; with it, the release and the row as it was.
pub(crate) async fn unlock(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(force): Query<Force>,
    headers: HeaderMap,
) -> Result<Response, ApiFailure> {
    let caller = auth::bearer(&state, &headers, actions::UNLOCK_NEEDS)?;
    check_lock_name(&name)?;
    if !force.force {
        let record = state
            .provider
            .read_lock(&name)
            .await
            .map_err(|e| Failure::provider(format!("cannot read lock {name:?}"), e))?
            .ok_or_else(|| {
                Failure::new(
                    StatusCode::NOT_FOUND,
                    format!("there is no lock named {name:?}"),
                )
            })?;
        let body = serde_json::json!({
            "error": format!(
                "refusing to release lock {name:?} without force=true: {}",
                unlock_warning(&record)
            ),
            "lock": LockJson::from(&record),
        });
        return Ok((StatusCode::CONFLICT, Json(body)).into_response());
    }
    let unlocked = actions::unlock(&state, &name, &caller).await?;
    let mut body = serde_json::json!({
        "action": "unlock",
        "lock": name,
        "by": actions::requester(&caller.name),
        "before": LockJson::from(&unlocked.before),
        "recorded": unlocked.not_recorded.is_none(),
    });
    if let Some(warning) = unlocked.not_recorded {
        body["warning"] = warning.into();
    }
    Ok(Json(body).into_response())
}

/// One action log row: `GET /api/jobs/{name}/actions`.
#[derive(Serialize)]
pub(crate) struct ActionLogJson {
    id: i64,
    at: String,
    job: String,
    action: &'static str,
    by: String,
    detail: Option<String>,
}

impl From<&ActionRecord> for ActionLogJson {
    fn from(a: &ActionRecord) -> Self {
        ActionLogJson {
            id: a.id,
            at: instant(a.at),
            job: a.job.clone(),
            action: a.action.as_str(),
            by: a.requested_by.clone(),
            detail: a.detail.clone(),
        }
    }
}

/// `?limit=N` of the action log.
#[derive(Deserialize)]
pub(crate) struct ActionsLimit {
    limit: Option<u32>,
}

/// `GET /api/jobs/{name}/actions?limit=N`: the job's action log (pauses, resumes, triggers,
/// unlocks of its lock), newest first, at most 500 (default 50).
pub(crate) async fn actions(
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(limit): Query<ActionsLimit>,
) -> Result<Json<Vec<ActionLogJson>>, ApiFailure> {
    check_job_name(&name)?;
    let limit = limit.limit.unwrap_or(read::ACTIONS_SHOWN).clamp(1, 500);
    let log = read::actions(&state, &name, limit).await?;
    Ok(Json(log.iter().map(ActionLogJson::from).collect()))
}
