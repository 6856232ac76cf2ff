//! What the pages and the JSON endpoints show, read once for both.

use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use lock_cluster::{
    ActionRecord, Cluster, ClusterProvider, ClusterView, ControlKind, ControlRequest, JobView,
    RunLog, RunState, RunView,
};
use lock_core::LockRecord;

use crate::failure::Failure;
pub(crate) use crate::overview::Overview;
use crate::state::AppState;

fn store(provider: &dyn ClusterProvider) -> Result<&dyn Cluster, Failure> {
    provider
        .cluster()
        .ok_or_else(|| Failure::no_operations(provider))
}

fn failed(what: &str) -> impl Fn(lock_core::LockError) -> Failure + '_ {
    move |e| Failure::provider(format!("cannot read {what}"), e)
}

/// Reads what [`ClusterView::read`] reads, keeping the lock table for "running now"; shared
/// with the requests waiting for the same read ([`OverviewReads`]).
pub(crate) async fn overview(state: &AppState) -> Result<Arc<Overview>, Failure> {
    let arrived = Instant::now();
    let mut last = state.overview.last().await;
    if let Some((started, overview)) = last.as_ref()
        && *started >= arrived
    {
        return Ok(Arc::clone(overview));
    }
    let started = Instant::now();
    let overview = Arc::new(read_overview(state).await?);
    *last = Some((started, Arc::clone(&overview)));
    Ok(overview)
}

async fn read_overview(state: &AppState) -> Result<Overview, Failure> {
    let provider = state.provider.as_ref();
    let store = store(provider)?;
    // Side by side on the provider's pool: the page waits for the slowest, not the sum.
    let (now, registry, control, last_runs, successes, locks) = tokio::join!(
        provider.database_time(),
        store.registry(),
        store.control(),
        store.last_runs(),
        store.last_successes(),
        provider.list_locks()
    );
    let now = now.map_err(failed("the database's clock"))?;
    let registry = registry.map_err(failed("the job registry"))?;
    let control = control.map_err(failed("the pauses"))?;
    let last_runs = last_runs.map_err(failed("the last runs"))?;
    let successes = successes.map_err(failed("the last successes"))?;
    let locks = locks.map_err(failed("the locks"))?;
    let view = ClusterView::assemble(
        now,
        registry,
        control,
        last_runs,
        successes,
        locks.clone(),
        &state.options,
    );
    Ok(Overview::new(view, locks))
}

/// Its newest run failed, panicked, lost its lock or never ended.
pub(crate) fn failing(job: &JobView) -> bool {
    job.last_run.as_ref().is_some_and(|run| {
        matches!(
            run.outcome,
            RunState::Failed | RunState::Panicked | RunState::LockLost | RunState::Unfinished
        )
    })
}

/// The jobs as the Jobs page lists them: failing and missed first, then by name.
pub(crate) fn ordered(view: &ClusterView) -> Vec<&JobView> {
    let mut jobs: Vec<&JobView> = view.jobs.iter().collect();
    jobs.sort_by_key(|job| (!(failing(job) || job.missed), job.name.as_str()));
    jobs
}

/// One page of a job's history with what the Job page shows around it.
pub(crate) struct JobDetail {
    pub(crate) now: DateTime<Utc>,
    pub(crate) job: JobView,
    pub(crate) runs: Vec<RunView>,
    /// The job's newest runs (the `window` asked for), newest first: what the charts draw.
    pub(crate) recent: Vec<RunView>,
    /// The `before` of the next (older) page, when there is one.
    pub(crate) older: Option<i64>,
    pub(crate) lock: Option<LockRecord>,
    /// The job's pause and trigger requests, oldest first.
    pub(crate) control: Vec<ControlRequest>,
    /// The job's newest [`ACTIONS_SHOWN`] action log rows, newest first, or why they cannot
    /// be read (the rest of the page does not depend on them: a deployment whose action log
    /// `ensure_schema()` has not created yet still sees its jobs).
    pub(crate) actions: Result<Vec<ActionRecord>, String>,
}

/// How many action log rows the Job page shows (and the JSON endpoint returns by default).
pub(crate) const ACTIONS_SHOWN: u32 = 50;

/// The newest `limit` rows of job `name`'s action log, newest first.
pub(crate) async fn actions(
    state: &AppState,
    name: &str,
    limit: u32,
) -> Result<Vec<ActionRecord>, Failure> {
    store(state.provider.as_ref())?
        .actions(name, limit)
        .await
        .map_err(|e| Failure::provider(format!("cannot read the action log of job {name:?}"), e))
}

/// The job page's data: registry, control, one page of history by keyset, the newest
/// `window` runs for the charts (0: none), the lock row. Not the last runs of every job (the Jobs
/// page's heaviest read). The first page of runs is cut from the charts' read (one history
/// query); an older page is a keyset read of its own next to it.
pub(crate) async fn job_detail(
    state: &AppState,
    name: &str,
    before: Option<i64>,
    limit: u32,
    window: u32,
) -> Result<JobDetail, Failure> {
    let provider = state.provider.as_ref();
    let store = store(provider)?;
    // One more run than the page shows: whether there is an older page.
    let page = limit.saturating_add(1);
    let history = async {
        match before {
            _ if window == 0 => Ok((store.history_page(name, before, page).await?, Vec::new())),
            None => store
                .history_page(name, None, page.max(window))
                .await
                .map(|newest| {
                    let runs = newest[..newest.len().min(page as usize)].to_vec();
                    (runs, newest)
                }),
            Some(_) => {
                let (runs, newest) = tokio::join!(
                    store.history_page(name, before, page),
                    store.history(name, window)
                );
                Ok((runs?, newest?))
            }
        }
    };
    let (now, registry, control, history, actions) = tokio::join!(
        provider.database_time(),
        store.registry(),
        store.control(),
        history,
        store.actions(name, ACTIONS_SHOWN)
    );
    let actions = actions.map_err(|e| e.to_string());
    let now = now.map_err(failed("the database's clock"))?;
    let registry = registry.map_err(failed("the job registry"))?;
    let control = control.map_err(failed("the pauses"))?;
    let (mut runs, mut recent) = history
        .map_err(|e| Failure::provider(format!("cannot read the runs of job {name:?}"), e))?;
    recent.truncate(window as usize);
    let older = if runs.len() > limit as usize {
        runs.truncate(limit as usize);
        runs.last().map(|run| run.id)
    } else {
        None
    };
    let mine: Vec<ControlRequest> = control.iter().filter(|c| c.job == name).cloned().collect();
    let view = ClusterView::assemble(
        now,
        registry,
        control,
        Vec::new(),
        Vec::new(),
        Vec::new(),
        &state.options,
    );
    let runs = view.resolve_runs(runs);
    let recent = view.resolve_runs(recent);
    let job = view.jobs.into_iter().find(|job| job.name == name);
    let job = match job {
        Some(job) => job,
        None if !runs.is_empty() || actions.as_ref().is_ok_and(|a| !a.is_empty()) => {
            unregistered(name)
        }
        None => {
            return Err(Failure::new(
                StatusCode::NOT_FOUND,
                format!("there is no job named {name:?} in the registry or the history"),
            ));
        }
    };
    let lock = match &job.lock_name {
        Some(lock) => provider
            .read_lock(lock)
            .await
            .map_err(|e| Failure::provider(format!("cannot read lock {lock:?}"), e))?,
        None => None,
    };
    Ok(JobDetail {
        now,
        job,
        runs,
        recent,
        older,
        lock,
        control: mine,
        actions,
    })
}

/// A job only the history still knows (no instance registers it any more).
fn unregistered(name: &str) -> JobView {
    JobView {
        name: name.to_owned(),
        lock_name: None,
        trigger: None,
        zone: None,
        next_fire: None,
        paused: false,
        live_instances: Vec::new(),
        last_run: None,
        last_success: None,
        missed: false,
        pending_triggers: 0,
    }
}

/// Who paused the job and since when, from its control rows.
pub(crate) fn pause_of(control: &[ControlRequest]) -> Option<&ControlRequest> {
    control.iter().find(|c| c.kind == ControlKind::Pause)
}

/// The lock table, with the database's now.
pub(crate) async fn locks(state: &AppState) -> Result<(DateTime<Utc>, Vec<LockRecord>), Failure> {
    let provider = state.provider.as_ref();
    let now = provider
        .database_time()
        .await
        .map_err(failed("the database's clock"))?;
    let locks = provider.list_locks().await.map_err(failed("the locks"))?;
    Ok((now, locks))
}

/// How long a run took, in milliseconds (None while running).
pub(crate) fn duration_ms(run: &RunView) -> Option<i64> {
    run.ended_at
        .map(|end| (end - run.started_at).num_milliseconds())
}

/// How long after its slot a run started, in milliseconds (None without a slot).
pub(crate) fn lag_ms(run: &RunView) -> Option<i64> {
    run.slot
        .map(|slot| (run.started_at - slot).num_milliseconds())
}

/// The run page's data: one run of a job and its log lines.
pub(crate) struct RunDetail {
    pub(crate) now: DateTime<Utc>,
    pub(crate) run: RunView,
    /// None: the run kept no lines (run logs off, nothing logged at the level kept, or not
    /// ended yet: the lines are written with the end).
    pub(crate) logs: Option<RunLog>,
}

/// Run `id` of job `name` (the keyset page of one run at `id`) and its lines, side by side;
/// 404 when the job has no such run.
pub(crate) async fn run_detail(
    state: &AppState,
    name: &str,
    id: i64,
) -> Result<RunDetail, Failure> {
    let provider = state.provider.as_ref();
    let store = store(provider)?;
    let (now, registry, runs, logs) = tokio::join!(
        provider.database_time(),
        store.registry(),
        store.history_page(name, Some(id.saturating_add(1)), 1),
        store.run_logs(name, id..=id)
    );
    let now = now.map_err(failed("the database's clock"))?;
    let registry = registry.map_err(failed("the job registry"))?;
    let runs =
        runs.map_err(|e| Failure::provider(format!("cannot read run {id} of job {name:?}"), e))?;
    let logs = logs.map_err(|e| {
        Failure::provider(
            format!("cannot read the log lines of run {id} of job {name:?}"),
            e,
        )
    })?;
    let view = ClusterView::assemble(
        now,
        registry,
        Vec::new(),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        &state.options,
    );
    let Some(run) = view.resolve_runs(runs).into_iter().find(|run| run.id == id) else {
        return Err(Failure::new(
            StatusCode::NOT_FOUND,
            format!("job {name:?} has no run {id} in the history"),
        ));
    };
    Ok(RunDetail {
        now,
        run,
        logs: logs.into_iter().next().map(|(_, log)| log),
    })
}
