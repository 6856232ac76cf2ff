//! The circuit breaker (`pause_after_failures = N, pause_for = ".."`): after N failed fires of
//! a job in a row, counted across the cluster from the run history, the job is paused
//! cluster-wide, with the reason in the action log.
//!
//! Decisions, and why:
//! - **Counted from the history, after the end row is committed.** Every instance writes the
//!   history, so it is the one place that knows the cluster's streak. The runner calls
//!   [`after_run`] (from `JobRunner::trip_breaker`, `runner.rs`) once the fire's end row was written: [`RunRecorder::ended`] awaits the
//!   write (the batch writer's `submit` answers when its statement committed), so the row
//!   this instance just wrote is in what it reads.
//! - **Only the instance that ran a failing fire evaluates**: one history read per failed run
//!   of a breaker job, nothing per success (a success ends the streak by being in the history).
//! - **Fires, not attempts.** Rows of one fire share its fence; a fire's outcome is its last
//!   attempt's. `failed`, `panicked` and `timed_out` count; `succeeded` ends the streak; a
//!   running fire and the other outcomes (cancelled, lock lost, skipped) are passed over.
//! - **One pause, one action.** `pause` answers true for exactly one caller; only that one
//!   records [`Action::Pause`] and logs the WARN. An operator's pause (any other requester) is
//!   never resumed here.
//! - **Half-open after `pause_for`.** A resume does not reset the streak (only a success
//!   does), so the first fire after it that fails pauses the job again: one trial per pause.
//!
//! [`RunRecorder::ended`]: super::history::RunRecorder::ended

use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use super::Job;
use super::job::Breaker;
use super::status::RunOutcome;
use lock_cluster::{
    Action, ActionRecord, Cluster, ControlKind, ControlRequest, RunRecord, RunState,
};
use lock_core::LockError;

/// Who the breaker's pauses are requested by, in the pause row and the action log.
pub(super) const BREAKER_REQUESTER: &str = "scheduler:circuit-breaker";

/// Refuses a breaker that cannot work: no failures, more than
/// [`MAX_PAUSE_AFTER_FAILURES`](lock_trigger::MAX_PAUSE_AFTER_FAILURES), a zero `pause_for`.
pub(super) fn check_job(job: &Job) -> Result<(), LockError> {
    let Some(breaker) = job.breaker() else {
        return Ok(());
    };
    let max = lock_trigger::MAX_PAUSE_AFTER_FAILURES;
    if breaker.after == 0 || breaker.after > max {
        return Err(LockError::InvalidConfiguration(format!(
            "job `{}`: pause_after_failures = {} is out of range: give 1 to {max} failed runs \
             in a row (or no circuit breaker)",
            job.name(),
            breaker.after
        )));
    }
    if breaker.pause_for == Some(Duration::ZERO) {
        return Err(LockError::InvalidConfiguration(format!(
            "job `{}`: pause_for is zero: the circuit breaker would resume the job at once; give \
             a positive duration (\"10m\"), or none to leave the resume to an operator",
            job.name()
        )));
    }
    Ok(())
}

/// Refuses jobs with a breaker on a scheduler without the run history (`no_history()`, or a
/// provider without the cluster's tables): it counts failures from the history.
pub(super) fn require_history<'a>(
    jobs: impl IntoIterator<Item = &'a Job>,
    keeps_history: bool,
) -> Result<(), LockError> {
    if keeps_history {
        return Ok(());
    }
    let names: Vec<String> = jobs
        .into_iter()
        .filter(|job| job.breaker().is_some())
        .map(|job| format!("`{}`", job.name()))
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    Err(LockError::InvalidConfiguration(format!(
        "job(s) {} have a circuit breaker (pause_after_failures), which counts failed runs in \
         the run history, and this scheduler keeps none: remove `.no_history()`, use a provider \
         that keeps the cluster's tables and call its ensure_schema(), or remove \
         pause_after_failures",
        names.join(", ")
    )))
}

/// Whether `outcome` is a failure the breaker counts.
pub(super) fn is_failure(outcome: &RunOutcome) -> bool {
    matches!(
        outcome,
        RunOutcome::Failed(_) | RunOutcome::Panicked(_) | RunOutcome::TimedOut
    )
}

/// Failed fires in a row at the head of `runs` (newest first), grouping a fire's attempts by
/// fence and judging each fire by its last attempt.
pub(super) fn failures_in_a_row(runs: &[RunRecord]) -> u32 {
    let mut count = 0;
    let mut seen_fences: Vec<u64> = Vec::new();
    for run in runs {
        if seen_fences.contains(&run.fence) {
            // An earlier attempt of a fire already judged by its newest row.
            continue;
        }
        seen_fences.push(run.fence);
        match run.outcome {
            RunState::Failed | RunState::Panicked | RunState::TimedOut => count += 1,
            RunState::Succeeded => return count,
            _ => {}
        }
    }
    count
}

/// After a fire of `job` ended with `outcome` and its end row was written: counts the job's
/// failed fires in a row and pauses it when they reach the breaker's `after`; true when this call paused it.
#[allow(clippy::too_many_arguments)] // one call site, `JobRunner::trip_breaker`
pub(super) async fn after_run(
    store: &dyn Cluster,
    job: &str,
    history_name: &str,
    breaker: Breaker,
    retries: u32,
    outcome: &RunOutcome,
    now: DateTime<Utc>,
    timeout: Duration,
) -> bool {
    if !is_failure(outcome) {
        return false;
    }
    // Enough rows for `after` fires of every attempt, and a few running ones of others.
    let limit = breaker
        .after
        .saturating_mul(retries.saturating_add(1))
        .saturating_add(8);
    let runs = match tokio::time::timeout(timeout, store.history(history_name, limit)).await {
        Ok(Ok(runs)) => runs,
        Ok(Err(error)) => {
            tracing::warn!(
                job,
                error = &error as &dyn std::error::Error,
                "circuit breaker: the history could not be read; the failure is counted at the next one"
            );
            return false;
        }
        Err(_) => {
            tracing::warn!(job, "circuit breaker: reading the history timed out");
            return false;
        }
    };
    let failures = failures_in_a_row(&runs);
    if failures < breaker.after {
        return false;
    }
    match tokio::time::timeout(timeout, store.pause(job, BREAKER_REQUESTER)).await {
        Ok(Ok(true)) => {}
        // Paused already (by another instance's breaker, or an operator).
        Ok(Ok(false)) => return false,
        Ok(Err(error)) => {
            tracing::warn!(
                job,
                error = &error as &dyn std::error::Error,
                "circuit breaker: the pause failed; tried again at the next failure"
            );
            return false;
        }
        Err(_) => {
            tracing::warn!(job, "circuit breaker: the pause timed out");
            return false;
        }
    }
    let detail = match breaker.pause_for {
        Some(pause_for) => {
            let until = now + TimeDelta::from_std(pause_for).unwrap_or(TimeDelta::MAX / 2);
            format!(
                "circuit breaker: {failures} failed runs in a row; resumes by itself at {until}"
            )
        }
        None => format!(
            "circuit breaker: {failures} failed runs in a row; resume with `lockctl resume {job}`"
        ),
    };
    tracing::warn!(job, failures, "{detail}");
    record(store, job, Action::Pause, detail, timeout).await;
    true
}

/// At each heartbeat: resumes the jobs in `jobs` (name, breaker) whose breaker pause in
/// `control` lasted their `pause_for` by the database's `now`; returns the jobs no longer
/// paused (resumed here, or by another instance just before).
pub(super) async fn resume_elapsed(
    store: &dyn Cluster,
    control: &[ControlRequest],
    now: DateTime<Utc>,
    jobs: impl Fn(&str) -> Option<Breaker>,
    timeout: Duration,
) -> Vec<String> {
    let mut resumed = Vec::new();
    for pause in control
        .iter()
        .filter(|c| c.kind == ControlKind::Pause && c.requested_by == BREAKER_REQUESTER)
    {
        let Some(pause_for) = jobs(&pause.job).and_then(|b| b.pause_for) else {
            continue;
        };
        let due = pause.requested_at + TimeDelta::from_std(pause_for).unwrap_or(TimeDelta::MAX / 2);
        if due > now {
            continue;
        }
        match tokio::time::timeout(timeout, store.resume(&pause.job)).await {
            Ok(Ok(true)) => {
                let detail = format!(
                    "circuit breaker: pause_for {} elapsed",
                    FmtDuration(pause_for)
                );
                tracing::info!(job = ?pause.job, "{detail}; the job runs again");
                record(store, &pause.job, Action::Resume, detail, timeout).await;
                resumed.push(pause.job.clone());
            }
            Ok(Ok(false)) => resumed.push(pause.job.clone()),
            Ok(Err(error)) => {
                tracing::warn!(job = ?pause.job, error = &error as &dyn std::error::Error, "circuit breaker: the resume failed; tried again at the next heartbeat")
            }
            Err(_) => tracing::warn!(job = ?pause.job, "circuit breaker: the resume timed out"),
        }
    }
    resumed
}

async fn record(store: &dyn Cluster, job: &str, action: Action, detail: String, timeout: Duration) {
    let record = ActionRecord::new(job, action, BREAKER_REQUESTER).with_detail(Some(detail));
    match tokio::time::timeout(timeout, store.record_action(&record)).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(
            job,
            error = &error as &dyn std::error::Error,
            "circuit breaker: the action log was not written"
        ),
        Err(_) => tracing::warn!(job, "circuit breaker: writing the action log timed out"),
    }
}

/// A duration as the attribute writes it: `10m`, `30s`, `1.5s`.
struct FmtDuration(Duration);

impl std::fmt::Display for FmtDuration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = self.0;
        let secs = d.as_secs();
        if d.subsec_nanos() == 0 && secs > 0 {
            if secs.is_multiple_of(3600) {
                return write!(f, "{}h", secs / 3600);
            }
            if secs.is_multiple_of(60) {
                return write!(f, "{}m", secs / 60);
            }
            return write!(f, "{secs}s");
        }
        write!(f, "{d:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use lock_core::FireKind;

    fn row(fence: u64, attempt: u32, outcome: RunState) -> RunRecord {
        RunRecord {
            id: 0,
            job: "job".into(),
            slot: None,
            fire_kind: FireKind::Scheduled,
            instance_id: "node-1".into(),
            fence,
            started_at: Utc::now(),
            ended_at: None,
            outcome,
            error: None,
            attempt,
            cancel_requested: false,
            params: Default::default(),
        }
    }

    #[test]
    fn a_fire_is_judged_by_its_last_attempt() {
        use RunState::*;
        // Newest first: fence 3 failed twice, fence 2 succeeded at its retry.
        let runs = [
            row(3, 2, Failed),
            row(3, 1, Failed),
            row(2, 2, Succeeded),
            row(2, 1, Failed),
        ];
        assert_eq!(failures_in_a_row(&runs), 1);
    }

    #[test]
    fn running_and_other_outcomes_are_passed_over_and_a_success_ends_the_streak() {
        use RunState::*;
        let runs = [
            row(6, 1, Running),
            row(5, 1, Panicked),
            row(4, 1, Cancelled),
            row(3, 1, TimedOut),
            row(2, 1, Succeeded),
            row(1, 1, Failed),
        ];
        assert_eq!(failures_in_a_row(&runs), 2);
        assert_eq!(failures_in_a_row(&[]), 0);
    }

    #[test]
    fn durations_read_as_the_attribute_writes_them() {
        assert_eq!(FmtDuration(Duration::from_secs(600)).to_string(), "10m");
        assert_eq!(FmtDuration(Duration::from_secs(7200)).to_string(), "2h");
        assert_eq!(FmtDuration(Duration::from_secs(45)).to_string(), "45s");
        assert_eq!(FmtDuration(Duration::from_millis(1500)).to_string(), "1.5s");
    }
}
