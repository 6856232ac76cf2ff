//! What `start()` checks before any job fires: unique job names, one job per lock name, each
//! job's lock configuration, and every job's parameters against the registered state.

use std::collections::HashMap;

use super::Job;
use crate::{LockConfiguration, LockError, LockingTaskExecutor, StateMap};

/// The jobs with their lock configurations, or every problem of the first kind found.
pub(super) fn prepare(
    jobs: Vec<Job>,
    executor: &LockingTaskExecutor,
    state: &StateMap,
) -> Result<Vec<(Job, LockConfiguration)>, LockError> {
    let mut prepared = Vec::with_capacity(jobs.len());
    // Maps, not scans of `prepared`: start-up stays linear with 10,000 jobs.
    let mut names = std::collections::HashSet::with_capacity(jobs.len());
    let mut lock_holders: HashMap<String, String> = HashMap::with_capacity(jobs.len());
    let mut missing = Vec::new();
    for job in jobs {
        if !names.insert(job.name().to_owned()) {
            return Err(LockError::InvalidConfiguration(format!(
                "two jobs are named `{}`",
                job.name()
            )));
        }
        // An initial delay set by `with_initial_delay` is first checked here.
        job.trigger()
            .check_limits()
            .map_err(|e| LockError::InvalidConfiguration(format!("job `{}`: {e}", job.name())))?;
        let config = job.lock_configuration(executor)?;
        // Two jobs under one lock share its `last_fire`: each would refuse the other's slots
        // as already run.
        if let Some(other) = lock_holders.insert(config.name().to_owned(), job.name().to_owned()) {
            return Err(LockError::InvalidConfiguration(format!(
                "jobs `{other}` and `{}` are both locked under `{}`: they would share the lock's \
                 last fire, so one job's fires would be refused as already run whenever the \
                 other ran a later slot; give one of them another lock name",
                job.name(),
                config.name()
            )));
        }
        missing.extend(
            job.missing_state(state)
                .into_iter()
                .map(|need| format!("job {} needs {need}", job.name())),
        );
        prepared.push((job, config));
    }
    if !missing.is_empty() {
        return Err(LockError::InvalidConfiguration(missing.join("; ")));
    }
    Ok(prepared)
}

/// The warning for a scheduler started without jobs: why it happens, and the fix.
pub(super) fn warn_no_jobs(from_registry: bool) {
    if from_registry {
        tracing::warn!(
            "scheduler started with no jobs: no #[scheduled] function is linked into this binary. \
             Jobs defined in a library crate are registered only when the binary links that \
             crate, and a crate the binary never names is not linked. Name it once in the \
             binary, e.g. `use my_jobs as _;` in main.rs (with your crate's name), or pass the \
             jobs with .jobs(..)"
        );
    } else {
        tracing::warn!("scheduler started with no jobs: .jobs(..) was given an empty list");
    }
}
