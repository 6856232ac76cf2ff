//! The action log's record: what an operator did to a job or a lock, and who asked.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};

use crate::{MAX_DETAIL_LEN, MAX_TEXT_LEN, truncate, unknown};
use lock_core::LockError;

/// What an operator did to a job or a lock, as the action log keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// Paused the job cluster-wide.
    Pause,
    /// Resumed a paused job.
    Resume,
    /// Asked for one manual run of the job.
    Trigger,
    /// Released a lock by hand (its job's name is the lock's name when no job uses it).
    Unlock,
}

impl Action {
    /// As stored and printed: `pause`, `resume`, `trigger`, `unlock`.
    ///
    /// ```
    /// use lock_cluster::Action;
    /// assert_eq!(Action::Unlock.as_str(), "unlock");
    /// assert_eq!("resume".parse::<Action>()?, Action::Resume);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Trigger => "trigger",
            Action::Unlock => "unlock",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Action {
    type Err = LockError;
    fn from_str(s: &str) -> Result<Self, LockError> {
        Ok(match s {
            "pause" => Action::Pause,
            "resume" => Action::Resume,
            "trigger" => Action::Trigger,
            "unlock" => Action::Unlock,
            other => return Err(unknown("action", other)),
        })
    }
}

/// One row of the action log: who did what to which job, and when (the store's clock).
///
/// Written by whoever acts (the dashboard with `dashboard:<token name>`, `lockctl` with
/// `lockctl:<user>`) after the action succeeded, and read back newest first by
/// [`OperatorStore::actions`](crate::OperatorStore::actions). The texts are cut to the columns' lengths on write
/// ([`MAX_TEXT_LEN`], [`MAX_DETAIL_LEN`]).
///
/// ```
/// use lock_cluster::{Action, ActionRecord, ClusterProvider};
/// use lock_core::InMemoryLockProvider;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let provider = InMemoryLockProvider::new();
/// let store = provider.cluster().expect("the in-memory provider keeps operations");
/// let changed = store.pause("nightly_report", "dashboard:alice").await?;
/// let record = ActionRecord::new("nightly_report", Action::Pause, "dashboard:alice")
///     .with_detail((!changed).then_some("was paused already"));
/// store.record_action(&record).await?;
/// let log = store.actions("nightly_report", 10).await?;
/// assert_eq!((log[0].action, log[0].requested_by.as_str()), (Action::Pause, "dashboard:alice"));
/// assert_eq!(log[0].detail, None);
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ActionRecord {
    /// The row's id (increasing; 0 before it is written).
    pub id: i64,
    /// When it was done (the store's clock; ignored on write, where the store's now is taken).
    pub at: DateTime<Utc>,
    /// The job, or for an unlock of a lock no job uses, the lock's name.
    pub job: String,
    /// What was done.
    pub action: Action,
    /// Who asked (`dashboard:alice`, `lockctl:bob`).
    pub requested_by: String,
    /// What came of it, or what it was about (`was not paused`, the lock row an unlock
    /// released, a trigger request's id).
    pub detail: Option<String>,
}

impl ActionRecord {
    /// A record to write: `action` on `job` by `requested_by`, without detail.
    pub fn new(job: impl Into<String>, action: Action, requested_by: impl Into<String>) -> Self {
        ActionRecord {
            id: 0,
            at: DateTime::<Utc>::UNIX_EPOCH,
            job: job.into(),
            action,
            requested_by: requested_by.into(),
            detail: None,
        }
    }

    /// The same record with `detail`.
    pub fn with_detail(mut self, detail: Option<impl Into<String>>) -> Self {
        self.detail = detail.map(Into::into);
        self
    }

    /// A record as read back from a store.
    pub fn read(
        id: i64,
        at: DateTime<Utc>,
        job: String,
        action: Action,
        requested_by: String,
        detail: Option<String>,
    ) -> Self {
        ActionRecord {
            id,
            at,
            job,
            action,
            requested_by,
            detail,
        }
    }

    /// The texts cut to the columns' lengths: job and requester to [`MAX_TEXT_LEN`], detail
    /// to [`MAX_DETAIL_LEN`] bytes. What every store writes.
    pub fn truncated(&self) -> (&str, &str, Option<&str>) {
        (
            truncate(&self.job, MAX_TEXT_LEN),
            truncate(&self.requested_by, MAX_TEXT_LEN),
            self.detail.as_deref().map(|d| truncate(d, MAX_DETAIL_LEN)),
        )
    }
}
