//! What a job's body returned when it failed: [`JobError`].

use std::fmt::{self, Display};

/// A job's error as the scheduler keeps it: the body's error rendered as its message chain.
///
/// The run history, the log line of the failure, `RunOutcome::Failed`
/// and `TestFire::run_job` all carry this text. It is
/// what `{:#}` shows of the body's error: for an `anyhow::Error` each context and its cause
/// (`"sync failed: connection refused"`), for any other type its `Display`. Never `{:?}`, so
/// no Debug quoting and no backtrace (`RUST_BACKTRACE=1` does not reach the history).
///
/// ```
/// use lock_core::JobError;
///
/// let error = JobError::new("disk full");
/// assert_eq!(error.message(), "disk full");
/// assert_eq!(error.to_string(), "disk full");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct JobError {
    message: String,
}

impl JobError {
    /// An error whose message chain is `message`.
    pub fn new(message: impl Into<String>) -> Self {
        JobError {
            message: message.into(),
        }
    }

    /// The body's `error`, by its message chain (`{:#}`: anyhow's alternate form prints the
    /// chain, and other types' alternate `Display` is their `Display`).
    pub(crate) fn from_display(error: &impl Display) -> Self {
        JobError::new(format!("{error:#}"))
    }

    /// The message chain, e.g. `"sync failed: connection refused"`.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JobError {}
