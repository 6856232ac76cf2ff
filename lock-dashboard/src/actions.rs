//! The actions, for the forms and the JSON endpoints alike: pause, resume, trigger, unlock.
//! Each is logged (target `lock_dashboard::audit`) with the token's name; pauses and trigger
//! requests record it as `dashboard:<token name>`, which the Job page and `lockctl` show.

use axum::http::StatusCode;
use lock_core::LockRecord;
use lock_core::operations::{ClusterOptions, ClusterView};

use crate::web::{AppState, Failure};

/// An action on a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum JobAction {
    Pause,
    Resume,
    Trigger,
}

impl JobAction {
    pub(crate) fn parse(action: &str) -> Result<Self, Failure> {
        match action {
            "pause" => Ok(JobAction::Pause),
            "resume" => Ok(JobAction::Resume),
            "trigger" => Ok(JobAction::Trigger),
            other => Err(Failure::new(
                StatusCode::NOT_FOUND,
                format!("no action {other:?} on a job (pause, resume, trigger)"),
            )),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            JobAction::Pause => "pause",
            JobAction::Resume => "resume",
            JobAction::Trigger => "trigger",
        }
    }
}

/// What an action did.
pub(crate) struct Done {
    /// False when there was nothing to do (paused already, not paused).
    pub(crate) changed: bool,
    /// The trigger request's id.
    pub(crate) request_id: Option<i64>,
    /// A sentence for the operator.
    pub(crate) message: String,
}

/// `dashboard:<token name>`, as the control table records who asked.
pub(crate) fn requester(token_name: &str) -> String {
    format!("dashboard:{token_name}")
}

/// Runs `action` on job `name` for the token named `who`.
pub(crate) async fn on_job(
    state: &AppState,
    action: JobAction,
    name: &str,
    who: &str,
) -> Result<Done, Failure> {
    let provider = state.provider.as_ref();
    let store = provider
        .operations()
        .ok_or_else(|| Failure::no_operations(provider))?;
    let by = requester(who);
    let failed = |e| Failure::provider(format!("cannot {} job {name:?}", action.as_str()), e);
    let done = match action {
        JobAction::Pause => {
            registered(state, name).await?;
            let changed = store.pause(name, &by).await.map_err(failed)?;
            Done {
                changed,
                request_id: None,
                message: if changed {
                    format!(
                        "paused job {name:?}: every instance refuses its fires from its next \
                         heartbeat"
                    )
                } else {
                    format!("job {name:?} was already paused")
                },
            }
        }
        JobAction::Resume => {
            let changed = store.resume(name).await.map_err(failed)?;
            Done {
                changed,
                request_id: None,
                message: if changed {
                    format!(
                        "resumed job {name:?}: it fires again from each instance's next heartbeat"
                    )
                } else {
                    format!("job {name:?} was not paused")
                },
            }
        }
        JobAction::Trigger => {
            let job = registered(state, name).await?;
            if job.live_instances.is_empty() {
                return Err(Failure::new(
                    StatusCode::CONFLICT,
                    format!("no live instance runs job {name:?}: nothing would run it"),
                ));
            }
            let id = store.request_trigger(name, &by).await.map_err(failed)?;
            Done {
                changed: true,
                request_id: Some(id),
                message: format!(
                    "asked for a run of job {name:?} now (request {id}): a live instance claims \
                     it at its next heartbeat"
                ),
            }
        }
    };
    tracing::info!(
        target: "lock_dashboard::audit",
        token = %who,
        action = action.as_str(),
        job = %name,
        changed = done.changed,
        request = ?done.request_id,
        "dashboard action"
    );
    Ok(done)
}

async fn registered(
    state: &AppState,
    name: &str,
) -> Result<lock_core::operations::JobView, Failure> {
    let options: &ClusterOptions = &state.options;
    let view = ClusterView::read(state.provider.as_ref(), options)
        .await
        .map_err(|e| Failure::provider("cannot read the job registry".to_owned(), e))?;
    view.jobs
        .into_iter()
        .find(|job| job.name == name && job.trigger.is_some())
        .ok_or_else(|| {
            Failure::new(
                StatusCode::NOT_FOUND,
                format!("no instance has registered a job named {name:?}"),
            )
        })
}

/// Releases lock `name` for the token named `who`; the row as it was.
pub(crate) async fn unlock(state: &AppState, name: &str, who: &str) -> Result<LockRecord, Failure> {
    let before = state
        .provider
        .force_unlock(name)
        .await
        .map_err(|e| Failure::provider(format!("cannot release lock {name:?}"), e))?
        .ok_or_else(|| {
            Failure::new(
                StatusCode::NOT_FOUND,
                format!("there is no lock named {name:?}"),
            )
        })?;
    tracing::warn!(
        target: "lock_dashboard::audit",
        token = %who,
        action = "unlock",
        lock = %name,
        was_held = before.held,
        held_by = %before.locked_by,
        "dashboard action"
    );
    Ok(before)
}
