//! What a lock is asked for: its name and how long a lease may and must last.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use lock_trigger::{LeaseError, NameError};

use crate::LockError;
use crate::metrics::LockMetrics;

pub use lock_trigger::{MAX_DURATION, MAX_LOCK_NAME_LEN};

/// How one named lock is held: ShedLock's `name`, `lockAtMostFor`, `lockAtLeastFor`, plus
/// keep-alive.
///
/// - `lock_at_most_for`: the lease expires this long after it was taken, even if the holder
///   died, so a crashed instance cannot block the job forever. Pick it well above the job's
///   normal run time (or enable keep-alive).
/// - `lock_at_least_for`: on release the lease is kept until `locked_at + lock_at_least_for`,
///   so a very short job cannot run again on an instance whose clock is a little behind.
///
/// The values are validated once, at construction; the name is shared (`Arc<str>`) so that
/// taking a lock allocates no string.
///
/// ```
/// use lock_core::LockConfiguration;
/// use std::time::Duration;
///
/// let config = LockConfiguration::new(
///     "sync_bill",
///     Duration::from_secs(30 * 60),
///     Duration::from_secs(10),
/// )?;
/// assert_eq!(config.name(), "sync_bill");
/// assert_eq!(config.lock_at_most_for(), Duration::from_secs(1800));
///
/// // at_least above at_most is refused, naming both values.
/// let err = LockConfiguration::new("x", Duration::from_secs(1), Duration::from_secs(2)).unwrap_err();
/// assert!(err.to_string().contains("lock_at_least_for"));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone, Debug)]
pub struct LockConfiguration {
    name: Arc<str>,
    lock_at_most_for: Duration,
    lock_at_least_for: Duration,
    keep_alive: bool,
    /// The shard this lock runs (index, total), for a sharded or broadcast job's fire.
    shard: Option<(u32, u32)>,
    /// How long after a scheduled fire's slot its release may wait for others (see
    /// [`LockConfiguration::with_release_linger`]).
    release_linger: Duration,
    // Registered on first use and shared by clones, so fires allocate nothing for metrics.
    metrics: Arc<OnceLock<LockMetrics>>,
}

impl PartialEq for LockConfiguration {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.lock_at_most_for == other.lock_at_most_for
            && self.lock_at_least_for == other.lock_at_least_for
            && self.keep_alive == other.keep_alive
    }
}

impl Eq for LockConfiguration {}

impl LockConfiguration {
    /// Validates and builds a configuration.
    ///
    /// Fails with [`LockError::InvalidLockName`] for a name [`validate_lock_name`] refuses
    /// (empty, longer than [`MAX_LOCK_NAME_LEN`] bytes, control or bidirectional characters,
    /// NUL, whitespace at either end), [`LockError::ZeroAtMost`] for a zero `at_most`,
    /// [`LockError::AtLeastExceedsAtMost`] when `at_least > at_most`, and
    /// [`LockError::DurationTooLong`] when `at_most` exceeds [`MAX_DURATION`] (1000 years):
    /// the macros' limits, applied at run time.
    ///
    /// ```
    /// # use lock_core::{LockConfiguration, LockError};
    /// # use std::time::Duration;
    /// let err = LockConfiguration::new("x", Duration::MAX, Duration::ZERO).unwrap_err();
    /// assert!(matches!(err, LockError::DurationTooLong { setting: "lock_at_most_for", .. }));
    /// ```
    pub fn new(
        name: impl Into<Arc<str>>,
        at_most: Duration,
        at_least: Duration,
    ) -> Result<Self, LockError> {
        let name = name.into();
        validate_lock_name(&name)?;
        match lock_trigger::check_lease(at_most, at_least) {
            Ok(()) => {}
            Err(LeaseError::ZeroAtMost) => {
                return Err(LockError::ZeroAtMost {
                    name: name.to_string(),
                });
            }
            Err(LeaseError::AtLeastExceedsAtMost) => {
                return Err(LockError::AtLeastExceedsAtMost {
                    name: name.to_string(),
                    at_least,
                    at_most,
                });
            }
        }
        // at_least <= at_most here, so one bound covers both.
        if at_most > MAX_DURATION {
            return Err(LockError::DurationTooLong {
                name: name.to_string(),
                setting: "lock_at_most_for",
                value: at_most,
            });
        }
        Ok(Self {
            name,
            lock_at_most_for: at_most,
            lock_at_least_for: at_least,
            keep_alive: false,
            shard: None,
            release_linger: Duration::ZERO,
            metrics: Arc::default(),
        })
    }

    #[doc(hidden)]
    pub fn metrics(&self) -> &LockMetrics {
        self.metrics.get_or_init(|| LockMetrics::new(&self.name))
    }

    /// Turns keep-alive on or off: while the body runs the lease is extended every
    /// `lock_at_most_for / 2`, counted from when the acquire was sent; a failed extension is
    /// retried while the lease lasts. [`JobContext::cancelled`](crate::JobContext::cancelled)
    /// resolves when an extension is refused (the lease expired or was taken over) or when
    /// none succeeded by the lease's end (less 5 %), before another instance can take over.
    ///
    /// ```
    /// # use lock_core::LockConfiguration; use std::time::Duration;
    /// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?
    ///     .with_keep_alive(true);
    /// assert!(config.keep_alive());
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    #[must_use]
    pub fn with_keep_alive(mut self, keep_alive: bool) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// The lock name, the primary key of the lock table.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The shared lock name (cloning it does not allocate).
    pub fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// How long a lease lasts if it is neither released nor extended.
    pub fn lock_at_most_for(&self) -> Duration {
        self.lock_at_most_for
    }

    /// The minimum time a lease is held, counted from when it was taken.
    pub fn lock_at_least_for(&self) -> Duration {
        self.lock_at_least_for
    }

    /// Whether the lease is extended while the body runs.
    pub fn keep_alive(&self) -> bool {
        self.keep_alive
    }

    /// The shard a fire under this lock runs, `(index, total)`, which the body reads as
    /// [`JobContext::shard`](crate::JobContext::shard); `None` unless the scheduler built this
    /// lock for one shard of a sharded or broadcast job.
    pub fn shard(&self) -> Option<(u32, u32)> {
        self.shard
    }

    /// A scheduled fire whose body ended within `linger` of its slot may have its release wait
    /// until then for the releases of the other bodies of that instant, so a burst's releases
    /// go in a few batch statements instead of one every batch window (with batching on). The
    /// scheduler sets it to what no next fire of the job can see: 50 ms for a cron job (whose
    /// slots are at least a second apart; the next acquire is at least half that after the
    /// slot), a quarter of the period for a fixed rate. Zero (the default) releases within
    /// one batch window of the body's end.
    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn with_release_linger(mut self, linger: Duration) -> Self {
        self.release_linger = linger;
        self
    }

    /// See [`with_release_linger`](Self::with_release_linger).
    #[doc(hidden)]
    pub fn release_linger(&self) -> Duration {
        self.release_linger
    }

    /// The same lock, for shard `(index, total)` (a clone shares the name and metrics).
    #[doc(hidden)] // For `lock-scheduler`; not part of the API.
    pub fn with_shard(mut self, shard: (u32, u32)) -> Self {
        self.shard = Some(shard);
        self
    }
}

/// Checks a lock name: not empty, at most [`MAX_LOCK_NAME_LEN`] bytes, no control character
/// (C0, DEL, C1), NUL or bidirectional control, no whitespace at either end
/// ([`lock_trigger::check_lock_name`], the rule the macros apply at compile time).
///
/// Providers call this before they send a name to the database, so an over-long name is a
/// [`LockError`], never a truncated row or a silently ignored insert, and a name that would
/// forge a line on a terminal or in a log is never written.
///
/// ```
/// assert!(lock_core::validate_lock_name("sync_bill").is_ok());
/// assert!(lock_core::validate_lock_name(&"x".repeat(65)).is_err());
/// let err = lock_core::validate_lock_name("nl\nbilling").unwrap_err();
/// assert!(err.to_string().contains("U+000A at byte 2"), "{err}");
/// ```
pub fn validate_lock_name(name: &str) -> Result<(), LockError> {
    lock_trigger::check_lock_name(name).map_err(|error| LockError::InvalidLockName {
        name: name.to_owned(),
        reason: error.reason(),
    })
}

/// Checks a name given to find a row that may already exist (force-unlock, reset-slot, read):
/// not empty and at most [`MAX_LOCK_NAME_LEN`] bytes, what the lock table's column can hold,
/// whatever the characters.
///
/// A row written by ShedLock in Java or by an older version may have a name
/// [`validate_lock_name`] refuses today (a newline, a trailing space); an operator must still
/// be able to release it, so only a name no row can have is refused here.
///
/// ```
/// assert!(lock_core::validate_stored_lock_name("legacy \n name ").is_ok());
/// assert!(lock_core::validate_stored_lock_name("").is_err());
/// assert!(lock_core::validate_stored_lock_name(&"x".repeat(65)).is_err());
/// ```
pub fn validate_stored_lock_name(name: &str) -> Result<(), LockError> {
    let error = match name.len() {
        0 => NameError::Empty,
        len if len > MAX_LOCK_NAME_LEN => NameError::TooLong { len },
        _ => return Ok(()),
    };
    Err(LockError::InvalidLockName {
        name: name.to_owned(),
        reason: error.reason(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_values_and_names_them() {
        let long = "n".repeat(65);
        let err = LockConfiguration::new(long.as_str(), Duration::from_secs(1), Duration::ZERO)
            .unwrap_err();
        assert!(err.to_string().contains(&long), "{err}");
        assert!(
            LockConfiguration::new("n".repeat(64), Duration::from_secs(1), Duration::ZERO).is_ok()
        );

        let err = LockConfiguration::new("job", Duration::from_secs(1), Duration::from_secs(2))
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("\"job\"") && text.contains("2s") && text.contains("1s"),
            "{text}"
        );

        assert!(matches!(
            LockConfiguration::new("job", Duration::ZERO, Duration::ZERO),
            Err(LockError::ZeroAtMost { .. })
        ));
        // Equal bounds are allowed.
        assert!(
            LockConfiguration::new("job", Duration::from_secs(1), Duration::from_secs(1)).is_ok()
        );
    }
}
