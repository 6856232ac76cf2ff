//! What [`Scheduler::jobs`](super::Scheduler::jobs) reports of each job.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};

use lock_core::JobError;

/// What the last fire of a job did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// The body ran and returned `()` or `Ok(())`.
    Succeeded,
    /// The body returned `()` or `Ok(())` after its
    /// [`JobContext::cancelled`](lock_core::JobContext::cancelled) had resolved: it stopped early
    /// because the scheduler was shutting down or the lease was lost. Whether it finished its
    /// work is the body's to say (a body that must tell "interrupted" apart returns an error);
    /// this outcome says only that it did not run to the end of an undisturbed fire.
    Cancelled,
    /// The body ran and returned an error (by its message chain).
    Failed(JobError),
    /// The body panicked.
    Panicked(String),
    /// An attempt ran past the job's `timeout`: its `cancelled()` resolved, and the body was
    /// dropped if it had not ended a grace later (see
    /// [`Job::with_timeout`](crate::Job::with_timeout)).
    TimedOut,
    /// Another instance held the lock, or the slot had already run.
    Skipped,
    /// The lock could not be asked for (provider error); the body did not run.
    LockFailed(String),
    /// The job is paused cluster-wide (`lockctl pause`): the lock was not asked for and the
    /// body did not run.
    Paused,
}

/// A snapshot of one job, from [`Scheduler::jobs`](super::Scheduler::jobs).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobStatus {
    /// The job's name.
    pub name: String,
    /// The trigger, as text (e.g. ``cron `0 5 1 * * *` in Asia/Shanghai``).
    pub trigger: String,
    /// The next scheduled fire (None while running a fixed-delay job, after the last fire,
    /// or while another instance owns the job under
    /// [`share_jobs`](crate::SchedulerBuilder::share_jobs)).
    pub next_fire: Option<DateTime<Utc>>,
    /// Whether a fire of the job is running now.
    pub running: bool,
    /// What the last fire did.
    pub last_outcome: Option<RunOutcome>,
    /// How long the last fire took (lock included).
    pub last_duration: Option<Duration>,
}

/// [`JobState::registered`] of a job the registry has no row of.
pub(super) const UNREGISTERED: i64 = i64::MIN;

pub(super) struct JobState {
    pub(super) name: Arc<str>,
    /// What [`JobStatus::trigger`] shows, shared by the jobs that show the same (10,000 jobs
    /// of one schedule hold one text).
    pub(super) trigger: Arc<str>,
    progress: Mutex<Progress>,
    /// From the start of a fire until its body returns (or unwinds): what shutdown waits for
    /// and names at its timeout. A fire that is `running` but not in its body is releasing.
    in_body: AtomicBool,
    /// Set when a scheduled fire was refused as a slot too far ahead of the database's clock
    /// (for a sharded job, by any shard), so that the job loop does not count the slot done.
    slot_in_future: AtomicBool,
    /// The next fire the job registry holds for this job, as the heartbeat sent it
    /// (`cluster.rs`): a beat writes the job's row only when it moved.
    pub(super) registered: AtomicI64,
}

/// The changing part of a [`JobStatus`].
#[derive(Default)]
pub(super) struct Progress {
    pub(super) next_fire: Option<DateTime<Utc>>,
    pub(super) running: bool,
    pub(super) last_outcome: Option<RunOutcome>,
    pub(super) last_duration: Option<Duration>,
    /// The fires the database has not answered since (`outage.rs`).
    pub(super) outage: Option<super::outage::Outage>,
}

impl JobState {
    /// The state of the job named `name`, whose trigger shows as `trigger` (its
    /// `trigger_text`, shared with other jobs).
    pub(super) fn new(name: Arc<str>, trigger: Arc<str>) -> Self {
        JobState {
            name,
            trigger,
            progress: Mutex::default(),
            in_body: AtomicBool::new(false),
            slot_in_future: AtomicBool::new(false),
            registered: AtomicI64::new(UNREGISTERED),
        }
    }

    pub(super) fn set_in_body(&self, in_body: bool) {
        self.in_body.store(in_body, Ordering::SeqCst);
    }

    /// A fire is in its body (or still taking the lock).
    pub(super) fn in_body(&self) -> bool {
        self.in_body.load(Ordering::SeqCst)
    }

    /// Notes that a scheduled fire was refused as a slot too far ahead of the database.
    pub(super) fn note_slot_in_future(&self) {
        self.slot_in_future.store(true, Ordering::Relaxed);
    }

    /// Whether a fire was refused as a slot too far ahead since the last call.
    pub(super) fn take_slot_in_future(&self) -> bool {
        self.slot_in_future.swap(false, Ordering::Relaxed)
    }

    /// A fire whose body returned is releasing its lease.
    pub(super) fn releasing(&self) -> bool {
        // Read in_body first: a fire sets it before `running` and clears it before releasing.
        let in_body = self.in_body();
        !in_body && self.lock().running
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn status(&self) -> JobStatus {
        let progress = self.lock();
        JobStatus {
            name: self.name.to_string(),
            trigger: self.trigger.to_string(),
            next_fire: progress.next_fire,
            running: progress.running,
            last_outcome: progress.last_outcome.clone(),
            last_duration: progress.last_duration,
        }
    }
}
