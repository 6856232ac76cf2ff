//! What a run's log lines are kept of: [`RunLogs`], set with
//! [`SchedulerBuilder::run_logs`](crate::SchedulerBuilder::run_logs). The capture itself is
//! `run_log_capture.rs`.

use lock_cluster::MAX_RUN_LOG_BYTES;
use tracing::Level;

use super::SchedulerBuilder;

/// Which of a run's `tracing` events the history keeps with the run, and how many.
///
/// On by default: events at `INFO` and above, at most 200 lines and 64 KiB per run (per
/// attempt of a job with retries: each attempt is a row of its own). The lines are stored
/// with the run's history row (so only while history is on), shown by
/// `lockctl history NAME --logs` and the dashboard's run page, and deleted with the row by the
/// history's retention.
///
/// What is kept: every event emitted while the run's body runs, in the body and in what it
/// awaits, and in a blocking body's thread; not what it hands to tasks of its own
/// (`tokio::spawn`). Past a bound the first lines are kept, the line reaching the byte bound
/// is cut at a character boundary, and the rest are counted: the log then ends with
/// "… N more lines not kept". The service's own log output is unchanged (see
/// [`SchedulerBuilder::run_logs`](crate::SchedulerBuilder::run_logs)).
///
/// ```
/// use lock_scheduler::RunLogs;
/// use tracing::Level;
///
/// let verbose = RunLogs::default().level(Level::DEBUG).max_lines(1000).max_bytes(256 * 1024);
/// assert_eq!(verbose.max_lines_kept(), 1000);
/// assert!(!RunLogs::disabled().is_enabled());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLogs {
    /// The least severe level kept; None: nothing is captured.
    level: Option<Level>,
    max_lines: usize,
    max_bytes: usize,
}

impl Default for RunLogs {
    /// `INFO` and above, 200 lines, 64 KiB.
    fn default() -> Self {
        RunLogs {
            level: Some(Level::INFO),
            max_lines: 200,
            max_bytes: 64 * 1024,
        }
    }
}

impl RunLogs {
    /// Keeps no log lines: nothing is captured, and a run costs what it did without.
    pub fn disabled() -> Self {
        RunLogs {
            level: None,
            ..RunLogs::default()
        }
    }

    /// Keeps events at `level` and above (`Level::DEBUG` keeps `DEBUG`, `INFO`, `WARN` and
    /// `ERROR`); turns the capture on.
    #[must_use]
    pub fn level(mut self, level: Level) -> Self {
        self.level = Some(level);
        self
    }

    /// Keeps at most `lines` lines per run (at least 1; counted past it).
    #[must_use]
    pub fn max_lines(mut self, lines: usize) -> Self {
        self.max_lines = lines;
        self
    }

    /// Keeps at most `bytes` bytes of text per run (at most 1 MiB,
    /// [`MAX_RUN_LOG_BYTES`](lock_cluster::MAX_RUN_LOG_BYTES); at least 128).
    #[must_use]
    pub fn max_bytes(mut self, bytes: usize) -> Self {
        self.max_bytes = bytes;
        self
    }

    /// Whether lines are captured at all.
    pub fn is_enabled(&self) -> bool {
        self.level.is_some()
    }

    /// The least severe level kept, None when disabled.
    pub fn min_level(&self) -> Option<Level> {
        self.level
    }

    /// The most lines kept per run.
    pub fn max_lines_kept(&self) -> usize {
        self.max_lines
    }

    /// The most bytes kept per run.
    pub fn max_bytes_kept(&self) -> usize {
        self.max_bytes
    }

    /// The start-time check: bounds that can hold a line and fit every store.
    pub(super) fn check(&self) -> Result<(), String> {
        if !self.is_enabled() {
            return Ok(());
        }
        if self.max_lines == 0 {
            return Err(
                "run_logs: max_lines must be at least 1 (RunLogs::disabled() keeps none)".into(),
            );
        }
        if self.max_bytes < MIN_BYTES || self.max_bytes > MAX_RUN_LOG_BYTES {
            return Err(format!(
                "run_logs: max_bytes {} is outside {MIN_BYTES}..={MAX_RUN_LOG_BYTES} (1 MiB, what every store keeps)",
                self.max_bytes
            ));
        }
        Ok(())
    }
}

/// Room for a line's time, level and target and some of its message.
const MIN_BYTES: usize = 128;

impl SchedulerBuilder {
    /// Which of each run's log lines the history keeps (default [`RunLogs::default`]: `INFO`
    /// and above, 200 lines and 64 KiB per run); [`RunLogs::disabled`] keeps none. Bounds
    /// outside those of [`RunLogs`] are refused at start. Without history
    /// ([`no_history`](Self::no_history), or a provider without its tables) nothing is
    /// captured.
    ///
    /// No subscriber setup is needed: while a run's body is polled, the scheduler makes a
    /// dispatcher of its own the current one, which passes every call on to the dispatcher
    /// that was current when the run started (your `tracing_subscriber` setup, with its span
    /// ids and filters, so your log output is the same) and keeps a copy of the run's events
    /// at the level asked. Each run has its own buffer, so concurrent runs never mix their
    /// lines. One limit: code in the body that downcasts the current dispatcher (an
    /// OpenTelemetry layer's `Span::context()`, `tracing-error`'s `SpanTrace`) does not find
    /// your subscriber through it; disable the capture for such a service.
    ///
    /// ```
    /// use lock_cluster::ClusterProvider;
    /// use lock_core::InMemoryLockProvider;
    /// use lock_scheduler::{Job, RunLogs, Scheduler, Trigger};
    /// use tracing::Level;
    ///
    /// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
    /// let provider = std::sync::Arc::new(InMemoryLockProvider::new());
    /// let job = Job::new("report", Trigger::cron("0 0 3 * * *")?, || async {
    ///     tracing::info!(rows = 42, "report written");
    /// });
    /// let scheduler = Scheduler::builder()
    ///     .lock_provider(provider.clone())
    ///     .run_logs(RunLogs::default().level(Level::INFO).max_lines(500))
    ///     .jobs([job])
    ///     .start()
    ///     .await?;
    /// scheduler.trigger("report").await?;
    /// let store = provider.cluster().unwrap();
    /// let run = &store.history("report", 1).await?[0];
    /// let logs = store.run_logs("report", run.id..=run.id).await?;
    /// let lines = logs[0].1.lines().unwrap();
    /// assert_eq!(lines[0].message, "report written rows=42");
    /// scheduler.shutdown().await?;
    /// # Ok::<(), lock_core::LockError>(()) }).unwrap();
    /// ```
    pub fn run_logs(mut self, logs: RunLogs) -> Self {
        self.run_logs = logs;
        self
    }
}
