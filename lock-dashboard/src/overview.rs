//! What the Jobs and Instances pages show, as read once ([`Overview`]), and the newest such
//! read that requests share ([`OverviewReads`]). A leaf: the reads themselves are in
//! `read.rs`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use lock_cluster::{ClusterView, JobView};
use lock_core::LockRecord;

/// The Jobs and Instances pages: the cluster at the database's now, and the lock table.
pub(crate) struct Overview {
    pub(crate) view: ClusterView,
    pub(crate) locks: Vec<LockRecord>,
    /// The held locks' positions in `locks`, by name: "running now" of every job in one pass.
    held: HashMap<String, usize>,
}

impl Overview {
    pub(crate) fn new(view: ClusterView, locks: Vec<LockRecord>) -> Self {
        let held = locks
            .iter()
            .enumerate()
            .filter(|(_, record)| record.held)
            .map(|(at, record)| (record.name.clone(), at))
            .collect();
        Overview { view, locks, held }
    }

    /// The lease `job`'s lock holds right now, if any.
    pub(crate) fn running(&self, job: &JobView) -> Option<&LockRecord> {
        let at = *self.held.get(job.lock_name.as_deref()?)?;
        self.locks.get(at)
    }
}

/// The Jobs page's reads, one at a time, each shared by every request that arrived before it
/// began: a flood of page loads costs the database one read per read's duration, not one per
/// request, and no answer is older than its request.
///
/// Decisions, and why:
/// - **No cache with an age.** A page loaded right after a pause must show it: a request only
///   takes a result whose read started after the request arrived, the same freshness as a
///   read of its own.
/// - **One read at a time, behind an async mutex.** The requests that queue while one read
///   runs all arrived before the next one starts, so the next holder reads once for all of
///   them and the rest take its result at once. A failed read is not kept: the next request
///   reads again.
#[derive(Default)]
pub(crate) struct OverviewReads {
    last: tokio::sync::Mutex<Option<(Instant, Arc<Overview>)>>,
}

impl OverviewReads {
    /// The newest read and when it started, held while the caller decides (and reads).
    pub(crate) async fn last(
        &self,
    ) -> tokio::sync::MutexGuard<'_, Option<(Instant, Arc<Overview>)>> {
        self.last.lock().await
    }
}
