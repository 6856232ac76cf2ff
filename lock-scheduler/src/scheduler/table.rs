//! The scheduler's jobs while it runs: added at start and by `add_job`, removed by
//! `remove_job`.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::runner::JobRunner;
use super::status::JobState;

/// One running job.
pub(super) struct JobEntry {
    pub(super) state: Arc<JobState>,
    /// The loop's runner, shared with it, for manual fires (one per job: with 10,000 jobs a
    /// copy of its few hundred bytes per job shows).
    pub(super) runner: Arc<JobRunner>,
    /// Stops this job's loop alone (a child of the scheduler's).
    pub(super) stop: CancellationToken,
    /// The loop; it ends at its next sleep once `stop` is cancelled.
    pub(super) task: JoinHandle<()>,
}

impl JobEntry {
    pub(super) fn name(&self) -> &str {
        self.runner.job.name()
    }

    pub(super) fn lock_name(&self) -> &str {
        self.runner.config.name()
    }
}

#[derive(Default)]
pub(super) struct JobTable {
    // A Vec, not a map: `jobs()` lists in start order, and lookups by name are rare (add,
    // remove, trigger) next to the fires, which never touch the table.
    entries: Mutex<Vec<JobEntry>>,
}

impl JobTable {
    pub(super) fn lock(&self) -> MutexGuard<'_, Vec<JobEntry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn push(&self, entry: JobEntry) {
        self.lock().push(entry);
    }

    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }

    /// Every job's status handle, in order.
    pub(super) fn states(&self) -> Vec<Arc<JobState>> {
        self.lock().iter().map(|e| e.state.clone()).collect()
    }

    /// The runner of the job named `name`, for a manual fire.
    pub(super) fn runner(&self, name: &str) -> Option<Arc<JobRunner>> {
        self.lock()
            .iter()
            .find(|e| e.name() == name)
            .map(|e| e.runner.clone())
    }

    /// Takes the job named `name` out of the table.
    pub(super) fn remove(&self, name: &str) -> Option<JobEntry> {
        let mut entries = self.lock();
        let at = entries.iter().position(|e| e.name() == name)?;
        Some(entries.remove(at))
    }
}
