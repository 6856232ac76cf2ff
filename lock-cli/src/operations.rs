//! The cluster commands: `status`, `history`, `pause`, `resume`, `trigger`, `instances`, on
//! the operations tables next to the lock table (`lock_cluster`); `actions` and what
//! the actions write to the action log are in `action_log.rs`.
//!
//! The JSON of each listing command is a stable interface (lock-cli README, "JSON output"):
//! fields are only ever added, never renamed or removed; times are UTC with milliseconds.

use lock_cluster::ClusterProvider;
use lock_core::Params;
use std::fmt::Write as _;
use std::time::Duration;

use lock_cluster::{
    Action, ClusterOptions, ClusterView, InstanceView, JobView, MAX_TEXT_LEN, RunRecord,
};
use serde::Serialize;

use crate::Failure;
use crate::action_log::{record, requester};
use crate::output::{instant, or_dash, pretty_json, text_table};
use crate::tables::{failed, store};
use crate::terminal::visible;

/// How long `trigger` waits for a live instance to claim its request (they poll every
/// heartbeat, 1 s by default).
pub(crate) const TRIGGER_WAIT: Duration = Duration::from_secs(5);

/// Checks a job name before anything connects.
pub(crate) fn validate_job_name(name: &str) -> Result<(), Failure> {
    if name.is_empty() || name.len() > MAX_TEXT_LEN {
        return Err(Failure::usage(format!(
            "job name {name:?}: a job name is 1 to {MAX_TEXT_LEN} bytes"
        )));
    }
    Ok(())
}

/// One run as printed: the fields of `history --json`.
#[derive(Debug, Serialize)]
pub(crate) struct RunRow {
    name: String,
    slot: Option<String>,
    fire_kind: &'static str,
    instance: String,
    fence: u64,
    started_at: String,
    ended_at: Option<String>,
    outcome: &'static str,
    error: Option<String>,
    /// Which attempt of its fire (slot and fence) the row is, from 1.
    attempt: u32,
    /// Cancellation was asked before the body ended; `outcome` is still its own result.
    cancel_requested: bool,
    /// A manual run's parameters (`trigger NAME --param key=value`), by key; empty otherwise.
    params: std::collections::BTreeMap<String, String>,
    /// `history --logs` only: the run's log lines (absent from every other listing).
    #[serde(skip_serializing_if = "Option::is_none")]
    logs: Option<RunLogRow>,
}

/// A run's log lines as printed by `history --logs --json`.
#[derive(Debug, Default, Serialize)]
pub(crate) struct RunLogRow {
    /// Oldest first.
    lines: Vec<RunLogLineRow>,
    /// How many lines the run logged past the bound (not kept).
    dropped: u64,
}

/// One log line: its time (UTC, milliseconds), level, target and message.
#[derive(Debug, Serialize)]
pub(crate) struct RunLogLineRow {
    at: String,
    level: String,
    target: String,
    message: String,
}

impl From<&RunRecord> for RunRow {
    fn from(run: &RunRecord) -> Self {
        RunRow {
            name: run.job.clone(),
            slot: run.slot.map(instant),
            fire_kind: run.fire_kind.as_str(),
            instance: run.instance_id.clone(),
            fence: run.fence,
            started_at: instant(run.started_at),
            ended_at: run.ended_at.map(instant),
            outcome: run.outcome.as_str(),
            error: run.error.clone(),
            attempt: run.attempt,
            cancel_requested: run.cancel_requested,
            params: run
                .params
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            logs: None,
        }
    }
}

/// One job as printed: the fields of `status --json`.
#[derive(Debug, Serialize)]
pub(crate) struct JobRow {
    name: String,
    lock_name: Option<String>,
    trigger: Option<String>,
    zone: Option<String>,
    next_fire: Option<String>,
    paused: bool,
    live_instances: Vec<String>,
    last_run: Option<RunRow>,
    last_success: Option<String>,
    missed: bool,
    pending_triggers: usize,
}

impl From<&JobView> for JobRow {
    fn from(job: &JobView) -> Self {
        JobRow {
            name: job.name.clone(),
            lock_name: job.lock_name.clone(),
            trigger: job.trigger.clone(),
            zone: job.zone.clone(),
            next_fire: job.next_fire.map(instant),
            paused: job.paused,
            live_instances: job.live_instances.clone(),
            last_run: job.last_run.as_ref().map(RunRow::from),
            last_success: job.last_success.map(instant),
            missed: job.missed,
            pending_triggers: job.pending_triggers,
        }
    }
}

/// One instance as printed: the fields of `instances --json`.
#[derive(Debug, Serialize)]
pub(crate) struct InstanceRow {
    instance: String,
    alive: bool,
    host: String,
    pid: u32,
    version: String,
    started_at: String,
    last_heartbeat: String,
    heartbeat_ms: i64,
    clock_offset_ms: i64,
    jobs: Vec<String>,
}

impl From<&InstanceView> for InstanceRow {
    fn from(i: &InstanceView) -> Self {
        InstanceRow {
            instance: i.info.instance_id.clone(),
            alive: i.alive,
            host: i.info.host.clone(),
            pid: i.info.pid,
            version: i.info.version.clone(),
            started_at: instant(i.info.started_at),
            last_heartbeat: instant(i.last_heartbeat),
            heartbeat_ms: i.info.heartbeat_ms,
            clock_offset_ms: i.info.clock_offset_ms,
            jobs: i.jobs.clone(),
        }
    }
}

async fn view(provider: &dyn ClusterProvider, grace: Duration) -> Result<ClusterView, Failure> {
    store(provider)?;
    let options = ClusterOptions {
        missed_grace: grace,
    };
    ClusterView::read(provider, &options).await.map_err(|e| {
        failed(
            format!(
                "cannot read the operations tables of {}",
                provider.describe()
            ),
            e,
        )
    })
}

/// `status [--json] [--grace D]`: every job of the cluster.
pub(crate) async fn status(
    provider: &dyn ClusterProvider,
    json_out: bool,
    grace: Duration,
) -> Result<String, Failure> {
    let view = view(provider, grace).await?;
    let rows: Vec<JobRow> = view.jobs.iter().map(JobRow::from).collect();
    if json_out {
        return Ok(pretty_json(&rows));
    }
    let cells = rows
        .into_iter()
        .map(|job| {
            let last = job.last_run.as_ref();
            vec![
                job.name,
                or_dash(job.trigger),
                or_dash(job.next_fire),
                or_dash(last.map(|r| r.started_at.clone())),
                or_dash(last.map(|r| r.outcome.to_owned())),
                if job.paused { "paused" } else { "active" }.to_owned(),
                job.live_instances.len().to_string(),
                if job.missed { "MISSED" } else { "-" }.to_owned(),
            ]
        })
        .collect();
    Ok(text_table(
        &[
            "JOB",
            "TRIGGER",
            "NEXT_FIRE",
            "LAST_RUN",
            "OUTCOME",
            "STATE",
            "LIVE",
            "MISSED",
        ],
        cells,
    ))
}

/// `instances [--json]`: every instance in the registry, alive or gone.
pub(crate) async fn instances(
    provider: &dyn ClusterProvider,
    json_out: bool,
) -> Result<String, Failure> {
    let view = view(provider, lock_cluster::DEFAULT_MISSED_GRACE).await?;
    let rows: Vec<InstanceRow> = view.instances.iter().map(InstanceRow::from).collect();
    if json_out {
        return Ok(pretty_json(&rows));
    }
    let cells = rows
        .into_iter()
        .map(|i| {
            vec![
                i.instance,
                if i.alive { "alive" } else { "gone" }.to_owned(),
                i.host,
                i.pid.to_string(),
                i.version,
                i.started_at,
                i.last_heartbeat,
                format!("{:+}", i.clock_offset_ms),
                i.jobs.join(","),
            ]
        })
        .collect();
    Ok(text_table(
        &[
            "INSTANCE",
            "STATE",
            "HOST",
            "PID",
            "VERSION",
            "STARTED_AT",
            "LAST_HEARTBEAT",
            "CLOCK_MS",
            "JOBS",
        ],
        cells,
    ))
}

/// `history NAME [--limit N] [--json]`: the job's newest runs first.
pub(crate) async fn history(
    provider: &dyn ClusterProvider,
    name: &str,
    limit: u32,
    json_out: bool,
) -> Result<String, Failure> {
    store(provider)?;
    let runs = ClusterView::history(provider, name, limit)
        .await
        .map_err(|e| failed(format!("cannot read the history of job {name:?}"), e))?;
    let rows: Vec<RunRow> = runs.iter().map(RunRow::from).collect();
    if json_out {
        return Ok(pretty_json(&rows));
    }
    let cells = rows
        .into_iter()
        .map(|r| {
            vec![
                r.started_at,
                or_dash(r.ended_at),
                r.outcome.to_owned(),
                if r.cancel_requested { "yes" } else { "-" }.to_owned(),
                r.fire_kind.to_owned(),
                or_dash(r.slot),
                r.instance,
                r.fence.to_string(),
                r.attempt.to_string(),
                or_dash((!r.params.is_empty()).then(|| params_text(&r.params))),
                or_dash(r.error.map(|e| e.replace('\n', " "))),
            ]
        })
        .collect();
    Ok(text_table(
        &[
            "STARTED_AT",
            "ENDED_AT",
            "OUTCOME",
            "CANCEL_REQUESTED",
            "KIND",
            "SLOT",
            "INSTANCE",
            "FENCE",
            "ATTEMPT",
            "PARAMS",
            "ERROR",
        ],
        cells,
    ))
}

/// `history NAME --logs [--limit N] [--json]`: the job's newest runs first, each followed by
/// its log lines (one read of the history, one of the lines of the runs listed).
pub(crate) async fn history_with_logs(
    provider: &dyn ClusterProvider,
    name: &str,
    limit: u32,
    json_out: bool,
) -> Result<String, Failure> {
    let store = store(provider)?;
    let runs = ClusterView::history(provider, name, limit)
        .await
        .map_err(|e| failed(format!("cannot read the history of job {name:?}"), e))?;
    let logs = match (runs.last(), runs.first()) {
        (Some(oldest), Some(newest)) => store
            .run_logs(name, oldest.id..=newest.id)
            .await
            .map_err(|e| failed(format!("cannot read the log lines of job {name:?}"), e))?,
        _ => Vec::new(),
    };
    let mut rows = Vec::with_capacity(runs.len());
    for run in &runs {
        let mut row = RunRow::from(run);
        let log = match logs.iter().find(|(id, _)| *id == run.id) {
            Some((_, log)) => log_row(name, run.id, log)?,
            None => RunLogRow::default(),
        };
        row.logs = Some(log);
        rows.push(row);
    }
    if json_out {
        return Ok(pretty_json(&rows));
    }
    let mut out = String::new();
    for row in rows {
        let _ = writeln!(
            out,
            "{} {} (run of {}, attempt {}, instance {}, fence {}){}",
            row.started_at,
            row.outcome,
            row.fire_kind,
            row.attempt,
            visible(&row.instance),
            row.fence,
            row.error
                .map(|e| format!(": {}", visible(&e)))
                .unwrap_or_default()
        );
        let log = row.logs.unwrap_or_default();
        if log.lines.is_empty() && log.dropped == 0 {
            out.push_str("    (no log lines)\n");
        }
        for line in &log.lines {
            let _ = writeln!(
                out,
                "    {} {:<5} {}: {}",
                line.at,
                line.level,
                visible(&line.target),
                visible(&line.message)
            );
        }
        if log.dropped > 0 {
            let _ = writeln!(out, "    … {} more lines not kept", log.dropped);
        }
    }
    Ok(out)
}

/// A run's stored lines as printed; a text that does not parse names the run.
fn log_row(job: &str, id: i64, log: &lock_cluster::RunLog) -> Result<RunLogRow, Failure> {
    let lines = log.lines().map_err(|e| {
        Failure::runtime_message(format!(
            "the log lines of run {id} of job {job:?} do not parse ({e})"
        ))
    })?;
    Ok(RunLogRow {
        lines: lines
            .into_iter()
            .map(|line| RunLogLineRow {
                at: instant(line.at),
                level: line.level,
                target: line.target,
                message: line.message,
            })
            .collect(),
        dropped: log.dropped(),
    })
}

/// A run's parameters in a table cell: `key=value` pairs, values escaped as the terminal needs.
fn params_text(params: &std::collections::BTreeMap<String, String>) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{k}={}", visible(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The job as the registry knows it, or a clear refusal naming what is known.
async fn registered(provider: &dyn ClusterProvider, name: &str) -> Result<JobView, Failure> {
    let view = view(provider, lock_cluster::DEFAULT_MISSED_GRACE).await?;
    let known: Vec<_> = view
        .jobs
        .iter()
        .filter(|j| j.trigger.is_some())
        .map(|j| visible(&j.name))
        .collect();
    view.jobs
        .iter()
        .find(|j| j.name == name && j.trigger.is_some())
        .cloned()
        .ok_or_else(|| {
            Failure::runtime_message(format!(
                "no job named {name:?} in the registry of {} (the registry has: {})",
                provider.describe(),
                if known.is_empty() {
                    "no jobs: no instance has heartbeated".to_owned()
                } else {
                    known.join(", ")
                }
            ))
        })
}

/// `pause NAME`.
pub(crate) async fn pause(provider: &dyn ClusterProvider, name: &str) -> Result<String, Failure> {
    registered(provider, name).await?;
    let store = store(provider)?;
    let changed = store
        .pause(name, &requester())
        .await
        .map_err(|e| failed(format!("cannot pause job {name:?}"), e))?;
    let detail = (!changed).then(|| "was paused already; nothing changed".to_owned());
    record(store, &[name.to_owned()], Action::Pause, detail).await;
    Ok(if changed {
        format!(
            "paused job {name:?}: every instance refuses its fires from its next heartbeat \
             (within one heartbeat interval, 1 s by default); `lockctl resume {}` ends it\n",
            visible(name)
        )
    } else {
        format!("job {name:?} was already paused\n")
    })
}

/// `resume NAME`.
pub(crate) async fn resume(provider: &dyn ClusterProvider, name: &str) -> Result<String, Failure> {
    let store = store(provider)?;
    let changed = store
        .resume(name)
        .await
        .map_err(|e| failed(format!("cannot resume job {name:?}"), e))?;
    let detail = (!changed).then(|| "was not paused; nothing changed".to_owned());
    record(store, &[name.to_owned()], Action::Resume, detail).await;
    Ok(if changed {
        format!("resumed job {name:?}: it fires again from each instance's next heartbeat\n")
    } else {
        format!("job {name:?} was not paused\n")
    })
}

/// The run's parameters of `trigger NAME --param key=value ..`, checked before anything is
/// asked of the database.
pub(crate) fn trigger_params(pairs: &[String]) -> Result<Params, Failure> {
    Params::parse_pairs(pairs.iter().map(String::as_str))
        .map_err(|e| Failure::usage(format!("--param: {e}")))
}

/// `trigger NAME`: a request one live instance claims within a heartbeat; waits for the claim.
pub(crate) async fn trigger(
    provider: &dyn ClusterProvider,
    name: &str,
    params: &Params,
) -> Result<String, Failure> {
    let job = registered(provider, name).await?;
    if job.live_instances.is_empty() {
        return Err(Failure::runtime_message(format!(
            "no live instance runs job {name:?}: nothing would run it (`lockctl instances` \
             shows the instances and their last heartbeats)"
        )));
    }
    let store = store(provider)?;
    let id = store
        .request_trigger_with_params(name, &requester(), params)
        .await
        .map_err(|e| failed(format!("cannot request a run of job {name:?}"), e))?;
    let detail = match params.is_empty() {
        true => format!("request {id}"),
        false => format!("request {id} with {}", params.encode()),
    };
    record(store, &[name.to_owned()], Action::Trigger, Some(detail)).await;
    let deadline = tokio::time::Instant::now() + TRIGGER_WAIT;
    loop {
        let control = store
            .control()
            .await
            .map_err(|e| failed(format!("cannot read trigger request {id}"), e))?;
        if let Some(request) = control.iter().find(|c| c.id == id)
            && let (Some(by), Some(at)) = (&request.claimed_by, request.claimed_at)
        {
            return Ok(format!(
                "triggered job {name:?}: request {id} claimed by {} at {}; it runs once now \
                 (after the current run, if one holds the lock), shown by `lockctl history {}`\n",
                visible(by),
                instant(at),
                visible(name)
            ));
        }
        if tokio::time::Instant::now() >= deadline {
            let withdrawn = store
                .withdraw_trigger(id)
                .await
                .map_err(|e| failed(format!("cannot withdraw trigger request {id}"), e))?;
            if withdrawn {
                return Err(Failure::runtime_message(format!(
                    "no instance claimed the run of job {name:?} within {TRIGGER_WAIT:?}; the \
                     request was withdrawn, nothing runs"
                )));
            }
            // Claimed between the last look and the withdrawal.
            continue;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
