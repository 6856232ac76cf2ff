//! The actions, for the forms and the JSON endpoints alike: pause, resume, trigger, unlock.
//! Each is logged (target `lock_dashboard::audit`) with the token's name, and written to the
//! action log (`shedlock_actions`, [`OperatorStore::record_action`]) as
//! `dashboard:<token name>` once it succeeded, also when it changed nothing (the detail says
//! so). The Job page and `GET /api/jobs/{name}/actions` show the log; an unlock is logged under
//! the job whose lock it is (under the lock's name when no registered job uses it).
//!
//! An action whose log row cannot be written still stands: the failure is logged at warn and
//! the answer says the action was not recorded.
//!
//! An action on a name no job has is refused (404) before anything is written or logged: a
//! pause or trigger needs a job some instance registers; a resume also accepts a job that
//! only its pause row still names (its instances are gone), so a stale pause can be lifted.
//! Names are logged as quoted fields (`job = "..."`), so no name can forge a log line.

use axum::http::StatusCode;
use lock_cluster::{Action, ActionRecord, Cluster, ClusterOptions, ClusterProvider, ClusterView};
use lock_core::{LockRecord, Params};

use crate::auth::Caller;
use crate::failure::Failure;
use crate::state::AppState;
use crate::token::Role;

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
        self.logged().as_str()
    }

    /// The role a token needs for it.
    pub(crate) fn needs(self) -> Role {
        Role::Operator
    }

    /// The action as the action log keeps it.
    fn logged(self) -> Action {
        match self {
            JobAction::Pause => Action::Pause,
            JobAction::Resume => Action::Resume,
            JobAction::Trigger => Action::Trigger,
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
    /// Why the action log has no row for it (the action stands).
    pub(crate) not_recorded: Option<String>,
}

/// What an unlock did.
pub(crate) struct Unlocked {
    /// The lock row as it was.
    pub(crate) before: LockRecord,
    /// Why the action log has no row for it (the release stands).
    pub(crate) not_recorded: Option<String>,
}

/// `dashboard:<token name>`, as the control table records who asked.
pub(crate) fn requester(token_name: &str) -> String {
    format!("dashboard:{token_name}")
}

/// The role an unlock needs.
pub(crate) const UNLOCK_NEEDS: Role = Role::Admin;

/// The parameters of a trigger, `key=value` texts (one per line of the form's field); a
/// 400 naming the rule for any a run may not take.
pub(crate) fn parse_params<'a>(
    pairs: impl IntoIterator<Item = &'a str>,
) -> Result<Params, Failure> {
    Params::parse_pairs(pairs)
        .map_err(|e| Failure::new(StatusCode::BAD_REQUEST, format!("parameters: {e}")))
}

/// Runs `action` on job `name` for `caller`; `params` are a trigger's (refused on the others).
pub(crate) async fn on_job(
    state: &AppState,
    action: JobAction,
    name: &str,
    caller: &Caller,
    params: &Params,
) -> Result<Done, Failure> {
    if action != JobAction::Trigger && !params.is_empty() {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            format!(
                "parameters are a trigger's; a {} takes none",
                action.as_str()
            ),
        ));
    }
    let provider = state.provider.as_ref();
    let store = provider
        .cluster()
        .ok_or_else(|| Failure::no_operations(provider))?;
    let who = caller.name.as_str();
    let by = requester(who);
    let failed = |e| Failure::provider(format!("cannot {} job {name:?}", action.as_str()), e);
    let mut done = match action {
        JobAction::Pause => {
            known(state, name, action).await?;
            let changed = store.pause(name, &by).await.map_err(failed)?;
            Done {
                changed,
                request_id: None,
                not_recorded: None,
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
            known(state, name, action).await?;
            let changed = store.resume(name).await.map_err(failed)?;
            Done {
                changed,
                request_id: None,
                not_recorded: None,
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
            let job = known(state, name, action).await?;
            if job.live_instances.is_empty() {
                return Err(Failure::new(
                    StatusCode::CONFLICT,
                    format!("no live instance runs job {name:?}: nothing would run it"),
                ));
            }
            let id = store
                .request_trigger_with_params(name, &by, params)
                .await
                .map_err(failed)?;
            Done {
                changed: true,
                request_id: Some(id),
                not_recorded: None,
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
        role = %caller.role,
        action = action.as_str(),
        job = ?name,
        changed = done.changed,
        request = ?done.request_id,
        "dashboard action"
    );
    let detail = match (action, done.changed, done.request_id) {
        (JobAction::Trigger, _, Some(id)) if params.is_empty() => Some(format!("request {id}")),
        (JobAction::Trigger, _, Some(id)) => Some(format!("request {id} with {}", params.encode())),
        (JobAction::Pause, false, _) => Some("was paused already; nothing changed".to_owned()),
        (JobAction::Resume, false, _) => Some("was not paused; nothing changed".to_owned()),
        _ => None,
    };
    let entry = ActionRecord::new(name, action.logged(), by).with_detail(detail);
    done.not_recorded = record(provider, Some(store), &[entry]).await;
    Ok(done)
}

/// Writes `entries` to the action log. On failure the action stands: the failure is logged at
/// warn, and the sentence returned goes in the answer.
async fn record(
    provider: &dyn ClusterProvider,
    store: Option<&dyn Cluster>,
    entries: &[ActionRecord],
) -> Option<String> {
    let Some(store) = store else {
        let reason = format!(
            "the action was not recorded: {} keeps no action log",
            provider.describe()
        );
        tracing::warn!(target: "lock_dashboard::audit", "{reason}");
        return Some(reason);
    };
    for entry in entries {
        if let Err(error) = store.record_action(entry).await {
            tracing::warn!(
                target: "lock_dashboard::audit",
                job = ?entry.job,
                action = entry.action.as_str(),
                by = ?entry.requested_by,
                error = &error as &dyn std::error::Error,
                "the action stands, but the action log could not record it"
            );
            return Some(format!(
                "the action was done, but not recorded in the action log ({}): {error}",
                store.tables()
            ));
        }
    }
    None
}

/// The job `action` acts on: one an instance registers, or for a resume also one its pause
/// row alone still names; 404 otherwise.
async fn known(
    state: &AppState,
    name: &str,
    action: JobAction,
) -> Result<lock_cluster::JobView, Failure> {
    let options: &ClusterOptions = &state.options;
    let view = ClusterView::read(state.provider.as_ref(), options)
        .await
        .map_err(|e| Failure::provider("cannot read the job registry".to_owned(), e))?;
    let resume = action == JobAction::Resume;
    view.jobs
        .into_iter()
        .find(|job| job.name == name && (job.trigger.is_some() || (resume && job.paused)))
        .ok_or_else(|| {
            tracing::debug!(target: "lock_dashboard::audit", action = action.as_str(), job = ?name, "refused an action on a job nobody has");
            Failure::new(
                StatusCode::NOT_FOUND,
                match resume {
                    true => format!(
                        "no job named {name:?}: no instance registers it and no pause names it"
                    ),
                    false => format!("no instance has registered a job named {name:?}"),
                },
            )
        })
}

/// Releases lock `name` for `caller`; the row as it was.
pub(crate) async fn unlock(
    state: &AppState,
    name: &str,
    caller: &Caller,
) -> Result<Unlocked, Failure> {
    let who = caller.name.as_str();
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
        role = %caller.role,
        action = "unlock",
        lock = ?name,
        was_held = before.held,
        held_by = ?before.locked_by,
        "dashboard action"
    );
    let provider = state.provider.as_ref();
    let store = provider.cluster();
    let detail = if before.held {
        format!(
            "released lock {name}: it was held by {} until {}, fence {}",
            before.locked_by,
            crate::format::instant(before.lock_until),
            before.fence
        )
    } else {
        format!("lock {name} was not held; nothing changed")
    };
    let entries: Vec<ActionRecord> = jobs_locked_by(store, name)
        .await
        .into_iter()
        .map(|job| {
            ActionRecord::new(job, Action::Unlock, requester(who))
                .with_detail(Some(detail.as_str()))
        })
        .collect();
    let not_recorded = record(provider, store, &entries).await;
    Ok(Unlocked {
        before,
        not_recorded,
    })
}

/// The registered jobs that run under lock `name` (their pages show its unlocks), or the lock's
/// own name when none does (or the registry cannot be read: the unlock is logged all the same).
async fn jobs_locked_by(store: Option<&dyn Cluster>, name: &str) -> Vec<String> {
    let registry = match store {
        Some(store) => store.registry().await.unwrap_or_else(|error| {
            tracing::warn!(
                target: "lock_dashboard::audit",
                lock = ?name,
                error = &error as &dyn std::error::Error,
                "cannot read the registry: the unlock is logged under the lock's name"
            );
            Vec::new()
        }),
        None => Vec::new(),
    };
    let mut jobs: Vec<String> = registry
        .into_iter()
        .filter_map(|row| row.job)
        .filter(|job| job.lock_name == name)
        .map(|job| job.name)
        .collect();
    jobs.sort();
    jobs.dedup();
    if jobs.is_empty() {
        jobs.push(name.to_owned());
    }
    jobs
}
