//! What went wrong with a lock: [`LockError`].

use std::error::Error as StdError;
use std::time::Duration;

/// A boxed error from a provider's driver (database client, pool, I/O).
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Everything that can go wrong while configuring, taking, extending or releasing a lock.
///
/// Errors carry the lock name, table or database they concern and keep their source, so
/// `tracing` (or `{:#}`-style reporters walking [`std::error::Error::source`]) show the whole
/// chain.
///
/// ```
/// use lock_core::{LockConfiguration, LockError};
/// use std::time::Duration;
///
/// let err = LockConfiguration::new("", Duration::from_secs(1), Duration::ZERO).unwrap_err();
/// assert!(matches!(err, LockError::InvalidLockName { .. }));
/// assert!(err.to_string().contains("empty"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// The lock name breaks the rule of [`validate_lock_name`](crate::validate_lock_name):
    /// empty, longer than [`MAX_LOCK_NAME_LEN`](crate::MAX_LOCK_NAME_LEN) bytes, or with a
    /// control or bidirectional character, NUL, or whitespace at either end. The message shows
    /// the name escaped (`{:?}`), so it cannot forge a line where it is printed.
    #[error("invalid lock name {name:?}: {reason}")]
    InvalidLockName {
        /// The rejected name.
        name: String,
        /// Why it was rejected: which rule, and the offending character's code point and byte
        /// offset.
        reason: String,
    },

    /// `lock_at_least_for` is longer than `lock_at_most_for`.
    #[error(
        "lock {name:?}: lock_at_least_for ({}) must not exceed lock_at_most_for ({})",
        humanize(*at_least), humanize(*at_most)
    )]
    AtLeastExceedsAtMost {
        /// The lock concerned.
        name: String,
        /// The requested `lock_at_least_for`.
        at_least: Duration,
        /// The requested `lock_at_most_for`.
        at_most: Duration,
    },

    /// `lock_at_most_for` is zero: such a lease would expire before it is taken.
    #[error("lock {name:?}: lock_at_most_for must be greater than zero")]
    ZeroAtMost {
        /// The lock concerned.
        name: String,
    },

    /// A lease bound is longer than [`MAX_DURATION`](crate::MAX_DURATION) (1000 years), the
    /// limit the macros apply at compile time.
    #[error(
        "lock {name:?}: {setting} ({}) exceeds the longest supported duration, 1000 years \
         (lock_core::MAX_DURATION)",
        humanize(*value)
    )]
    DurationTooLong {
        /// The lock concerned.
        name: String,
        /// Which setting: `lock_at_most_for` or `lock_at_least_for`.
        setting: &'static str,
        /// The value given.
        value: Duration,
    },

    /// A configuration value (table or column name, URL, instance id, ...) was refused.
    #[error("invalid configuration: {0}")]
    InvalidConfiguration(String),

    /// The lock table does not exist; the message contains the DDL that creates it.
    #[error("lock table {table} does not exist; create it with `ensure_schema()` or run:\n{ddl}")]
    TableMissing {
        /// The (possibly schema-qualified) table name.
        table: String,
        /// The statement that creates it.
        ddl: String,
        /// The database's own error.
        #[source]
        source: Option<BoxError>,
    },

    /// The provider (database, pool, network) failed; the operation did not take effect or its
    /// effect is unknown. A scheduler treats this as "skip this fire".
    #[error(
        "{operation}{} failed on {backend}",
        if lock.is_empty() { String::new() } else { format!(" of lock {lock:?}") }
    )]
    Provider {
        /// What was attempted: `acquire`, `extend`, `release`, `list`, `unlock`, `schema`.
        operation: &'static str,
        /// The lock concerned (empty for table-wide operations).
        lock: String,
        /// The backend, e.g. `postgres`, `mysql`, `sqlite`, with the table.
        backend: String,
        /// The driver's error.
        #[source]
        source: BoxError,
    },

    /// A provider call did not answer within the executor's operation timeout (a database
    /// behind a link that drops packets); its effect is unknown.
    #[error("{operation} of lock {lock:?} did not answer within {after:?}")]
    Timeout {
        /// What was attempted: `acquire`, `extend` or `release`.
        operation: &'static str,
        /// The lock concerned.
        lock: String,
        /// How long it was given.
        after: Duration,
    },

    /// A locked function was called but no lock provider has been installed (no
    /// `Scheduler` started and no
    /// [`install_default_executor`](crate::install_default_executor) call). The body did not run.
    #[error(
        "lock {name:?}: no lock provider is installed, so the body was not run; start a \
         `Scheduler` (`Scheduler::builder().lock_provider(p).start().await`) or call \
         `install_default_executor(LockingTaskExecutor::new(p))` first"
    )]
    NoProvider {
        /// The lock that could not be taken.
        name: String,
    },

    /// A run-once task given to the scheduler's builder (`SchedulerBuilder::run_once`) failed,
    /// or was still running on another instance at the wait bound: `start()` fails and no job
    /// fires. A failed task is not recorded as done, so the next start runs it again.
    #[error(
        "run-once task `{task}` did not finish, so the scheduler did not start and no job fired; \
         it is not recorded as done: fix it and start again (the next start runs it again)"
    )]
    RunOnceFailed {
        /// The task's `NAME@VERSION`.
        task: String,
        /// The task's own error, or why it was not run here.
        #[source]
        source: BoxError,
    },

    /// `Scheduler::shutdown` waited its `shutdown_timeout` and
    /// these jobs were still running: they keep their leases until they end or their
    /// `lock_at_most_for` passes (releasing a lease under a running body would let another
    /// instance run the job concurrently).
    #[error(
        "shutdown timed out after {}: jobs still running: {}; their leases end when they finish \
         or at lock_at_most_for",
        humanize(*timeout), running.join(", ")
    )]
    ShutdownTimedOut {
        /// The names of the jobs still running.
        running: Vec<String>,
        /// The shutdown timeout that passed.
        timeout: Duration,
    },
}

impl LockError {
    /// Wraps a driver error as [`LockError::Provider`].
    ///
    /// ```
    /// use lock_core::LockError;
    /// let io = std::io::Error::other("connection reset");
    /// let err = LockError::provider("acquire", "sync_bill", "postgres table shedlock", io);
    /// assert_eq!(err.to_string(), r#"acquire of lock "sync_bill" failed on postgres table shedlock"#);
    /// assert!(std::error::Error::source(&err).is_some());
    /// ```
    pub fn provider(
        operation: &'static str,
        lock: impl Into<String>,
        backend: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        LockError::Provider {
            operation,
            lock: lock.into(),
            backend: backend.into(),
            source: source.into(),
        }
    }
}

fn humanize(d: Duration) -> String {
    // humantime would be the obvious choice, but a Debug-like rendering is enough here and
    // keeps lock-core's dependency list short.
    format!("{d:?}")
}
