//! The run history written around each body: a start row as the body starts, its end after
//! the body (and each retry's attempt) ended.
//!
//! Decisions, and why:
//! - **The body never waits for its start row.** The start joins the window's batch as the
//!   body starts (no task of its own: a burst's thousands of runs would each spawn one), or
//!   where rows are written one by one, is written by a task of its own while the body runs;
//!   the end waits for it (it needs the row's id). A fire's lag is the
//!   lock's alone, and the start time is the store's clock when the row was written (a few
//!   milliseconds after the body started under a burst).
//! - **Rows coalesce** when the store batches them and batching is on: the starts (and the
//!   ends) of the runs of one burst go in one statement each (`executor/history.rs`).
//! - A failure to write is logged and never stops the body: history is for operators, the
//!   lock is for correctness.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;

use super::run_log_capture::RunLogSink;
use super::status::RunOutcome;
use crate::clock::DatabaseClock;
use crate::history_batches::HistoryBatches;
use chrono::{DateTime, Utc};
use lock_cluster::{Cluster, ClusterProvider, MAX_ERROR_LEN, RunEnd, RunStart, RunState, truncate};
use lock_core::batching::later;
use lock_core::{FireKind, JobContext, LockingTaskExecutor};

/// How a run ended, besides its outcome: what [`RunRecorder::ended`] needs to record it.
#[derive(Clone, Copy, Debug)]
pub(super) struct RunEnding {
    /// The scheduler was shutting down when the run ended.
    pub(super) stopping: bool,
    /// Cancellation was asked before the body ended (its `cancelled()` had resolved).
    pub(super) cancel_requested: bool,
}

impl RunEnding {
    /// An attempt that failed and is retried: never cancelled (a cancelled run stops retrying).
    pub(super) const RETRIED: RunEnding = RunEnding {
        stopping: false,
        cancel_requested: false,
    };
}

/// A scheduled fire's slot (on the monotonic clock) and its lock's release linger: its end
/// row may wait until `due + linger` for the others of its burst, as its release does, and its
/// start row's batch waits until `due + linger / 2`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Lingering {
    pub(super) due: tokio::time::Instant,
    pub(super) linger: Duration,
}

/// The current attempt, as far as the history is concerned.
#[derive(Default)]
struct Attempt {
    start: Option<StartWrite>,
    /// When its body ended, by the database's clock.
    body_ended: Option<DateTime<Utc>>,
}

/// A start row being written.
enum StartWrite {
    /// On a task of its own, when rows are written one by one.
    Alone(JoinHandle<Option<i64>>),
    /// In the window's batch, joined when the run started (`sent`).
    Batched {
        id: Pin<Box<dyn Future<Output = Result<i64, lock_core::LockError>> + Send>>,
        sent: tokio::time::Instant,
    },
}

/// Writes one fire's history: a start row per attempt and its end.
#[derive(Clone)]
pub(super) struct RunRecorder {
    provider: Arc<dyn ClusterProvider>,
    batches: Option<Arc<HistoryBatches>>,
    operation_timeout: Duration,
    job: Arc<str>,
    kind: FireKind,
    /// Until when the end row may wait for the others of its burst (the release's linger).
    linger_until: Option<tokio::time::Instant>,
    /// The earliest the start row's batch goes (`history_batches.rs`).
    start_hold: Option<tokio::time::Instant>,
    /// The current attempt's start row being written (its id, once written), and when its
    /// body ended.
    attempt: Arc<Mutex<Attempt>>,
    /// The database's clock (the scheduler's estimate): the times the rows carry.
    clock: DatabaseClock,
    /// The run's log lines being captured, when run logs are on.
    logs: Option<Arc<RunLogSink>>,
}

impl RunRecorder {
    /// A recorder for one fire of `job` (its history name) through `executor`'s provider,
    /// coalescing its rows through `batches` when the store batches them.
    pub(super) fn new(
        executor: &LockingTaskExecutor,
        provider: &Arc<dyn ClusterProvider>,
        batches: Option<&Arc<HistoryBatches>>,
        job: Arc<str>,
        (kind, lingering): (FireKind, Option<Lingering>),
        logs: Option<Arc<RunLogSink>>,
        clock: &DatabaseClock,
    ) -> Self {
        RunRecorder {
            provider: provider.clone(),
            batches: batches.cloned(),
            operation_timeout: executor.operation_timeout(),
            job,
            kind,
            linger_until: lingering.map(|l| later(l.due, l.linger)),
            start_hold: lingering.map(|l| later(l.due, l.linger / 2)),
            attempt: Arc::default(),
            clock: clock.clone(),
            logs,
        }
    }

    /// The buffer the run's log lines are captured into, when run logs are on.
    pub(super) fn log_sink(&self) -> Option<Arc<RunLogSink>> {
        self.logs.clone()
    }

    fn store(&self) -> Option<&dyn Cluster> {
        self.provider.cluster()
    }

    /// Starts writing the start row, from inside the body's scope (its context says fence and
    /// slot), on a task or a blocking body's thread; returns at once.
    pub(super) fn started(&self) {
        let Some(ctx) = JobContext::current() else {
            return;
        };
        let at = self.clock.now();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let run = RunStart {
            job: self.job.to_string(),
            slot: ctx.scheduled_at(),
            fire_kind: self.kind,
            instance_id: ctx.instance_id().to_owned(),
            fence: ctx.fence(),
            attempt: ctx.attempt(),
            params: ctx.params().clone(),
        };
        let write = match &self.batches {
            // Joins the burst's batch now, no task of its own: the end awaits its id.
            Some(batches) => StartWrite::Batched {
                id: Box::pin(batches.started(run, self.job.clone(), self.start_hold, at)),
                sent: tokio::time::Instant::now(),
            },
            None => {
                let this = self.clone();
                StartWrite::Alone(handle.spawn(async move {
                    let store = this.store()?;
                    let written =
                        tokio::time::timeout(this.operation_timeout, store.run_started(&run));
                    this.start_written(written.await)
                }))
            }
        };
        *self.attempt.lock().unwrap_or_else(|p| p.into_inner()) = Attempt {
            start: Some(write),
            body_ended: None,
        };
    }

    /// Notes that the current attempt's body ended (returned, failed, panicked or timed out):
    /// its end row carries this time, not when it is written (after the lock's release).
    pub(super) fn body_ended(&self) {
        let at = self.clock.now();
        self.attempt
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .body_ended = Some(at);
    }

    /// The start row's id, or why there is none (logged).
    fn start_written(
        &self,
        written: Result<Result<i64, lock_core::LockError>, tokio::time::error::Elapsed>,
    ) -> Option<i64> {
        match written {
            Ok(Ok(id)) => Some(id),
            Ok(Err(error)) => {
                tracing::warn!(
                    job = ?self.job,
                    error = &error as &dyn std::error::Error,
                    "the start of this run was not written to the history; the job runs anyway"
                );
                None
            }
            Err(_) => {
                tracing::warn!(
                    job = ?self.job,
                    "writing the start of this run to the history timed out; the job runs anyway"
                );
                None
            }
        }
    }

    /// The start row's id once written, waiting for it within the operation timeout from when
    /// it was sent.
    async fn start_id(&self, write: StartWrite) -> Option<i64> {
        match write {
            StartWrite::Alone(task) => task.await.ok().flatten(),
            StartWrite::Batched { id, sent } => {
                let deadline = lock_core::batching::later(sent, self.operation_timeout);
                self.start_written(tokio::time::timeout_at(deadline, id).await)
            }
        }
    }

    /// The end of the run, from its outcome; nothing when no start row was written (the body
    /// did not run, or the start failed).
    ///
    /// The outcome recorded is the body's own result; `cancel_requested` says that
    /// cancellation was asked (shutdown, lost lease or timeout) before it ended:
    /// - returned `Ok(())` after shutdown asked: `succeeded` (its work is done);
    /// - returned an error after shutdown asked: `cancelled`, with the error (the documented
    ///   way for a body to say it stopped because it was asked to);
    /// - returned `Ok(())` after the lease was lost: `lock_lost` (it ran without its lock);
    /// - otherwise `failed`, `panicked`, `timed_out` as it came.
    pub(super) async fn ended(&self, outcome: &RunOutcome, ending: RunEnding) {
        // This attempt's lines, taken before anything else is logged: the next attempt's
        // start with an empty buffer.
        let logs = self.logs.as_ref().and_then(|sink| sink.take());
        let (start, body_ended) = {
            let mut attempt = self.attempt.lock().unwrap_or_else(|p| p.into_inner());
            (attempt.start.take(), attempt.body_ended.take())
        };
        let Some(start) = start else {
            return;
        };
        let ended_at = body_ended.unwrap_or_else(|| self.clock.now());
        let Some(id) = self.start_id(start).await else {
            return;
        };
        let RunEnding {
            stopping,
            cancel_requested,
        } = ending;
        let (state, error) = match outcome {
            RunOutcome::Succeeded => (RunState::Succeeded, None),
            RunOutcome::Cancelled if stopping => (RunState::Succeeded, None),
            RunOutcome::Cancelled => (RunState::LockLost, None),
            RunOutcome::Failed(error) if stopping && cancel_requested => {
                (RunState::Cancelled, Some(error.message()))
            }
            RunOutcome::Failed(error) => (RunState::Failed, Some(error.message())),
            RunOutcome::Panicked(message) => (RunState::Panicked, Some(message.as_str())),
            RunOutcome::TimedOut => (RunState::TimedOut, None),
            // The body did not run: no start row either.
            _ => return,
        };
        let end = RunEnd::new(id, state, error.map(|e| truncate(e, MAX_ERROR_LEN)))
            .with_cancel_requested(cancel_requested)
            .with_logs(logs);
        let write = async {
            match (&self.batches, self.store()) {
                (Some(batches), _) => {
                    batches
                        .ended(end, self.job.clone(), self.linger_until, ended_at)
                        .await
                }
                (None, Some(store)) => store.run_ended(&end).await,
                (None, None) => Ok(()),
            }
        };
        match tokio::time::timeout(self.operation_timeout, write).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(
                job = ?self.job,
                error = &error as &dyn std::error::Error,
                "the end of this run was not written to the history; it shows as running"
            ),
            Err(_) => {
                tracing::warn!(job = ?self.job, "writing the end of this run to the history timed out")
            }
        }
    }
}
