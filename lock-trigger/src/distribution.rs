//! How a job's work is spread over the cluster at each slot: one run (the default), a fixed
//! number of shards, or one run per live instance (broadcast). Described here once, so the
//! macros (`shards = N`, `broadcast = true`) and the scheduler (`Job::with_shards`,
//! `Job::broadcast`) check the same rules and derive the same lock names.
//!
//! Each shard (and each broadcast rank) is locked under a name of its own, the job's lock name
//! with `#<index>` appended, so it has its own lease, fence and once-per-slot record. The
//! longest such name must fit [`MAX_LOCK_NAME_LEN`].

use std::fmt;

use crate::MAX_LOCK_NAME_LEN;

/// The most shards a job may have, and the most instances a broadcast job runs on at once
/// (ranks from 1024 on do not run).
pub const MAX_SHARDS: u32 = 1024;

/// How one slot of a job runs across the cluster.
///
/// ```
/// use lock_trigger::Distribution;
///
/// assert_eq!(Distribution::Shards(4).lock_name("sync_bill", 3), "sync_bill#3");
/// // The longest name a job with 12 shards derives: `#11`, 3 bytes more.
/// assert_eq!(Distribution::Shards(12).suffix_len(), 3);
/// assert_eq!(Distribution::Broadcast.suffix_len(), 5); // `#1023`
/// assert_eq!(Distribution::Single.suffix_len(), 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Distribution {
    /// One run per slot, under the job's lock (the default).
    #[default]
    Single,
    /// `n` runs per slot, one per shard index `0..n`, each under its own lock; spread over the
    /// live instances.
    Shards(u32),
    /// One run per live instance per slot, with the instance's rank among them as the index.
    Broadcast,
}

/// Why a distribution was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DistributionError {
    /// A shard count outside `1..=MAX_SHARDS`.
    ShardCount(u64),
    /// A derived lock name would be longer than [`MAX_LOCK_NAME_LEN`].
    NameTooLong {
        /// The job's lock name.
        name: String,
        /// The longest the job's lock name may be with this distribution.
        max: usize,
    },
}

impl fmt::Display for DistributionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DistributionError::ShardCount(n) => {
                write!(f, "shards = {n}: a job has from 1 to {MAX_SHARDS} shards")
            }
            DistributionError::NameTooLong { name, max } => write!(
                f,
                "the lock name `{name}` is {} bytes, but each shard is locked under the name \
                 with `#<index>` appended, and those names must fit {MAX_LOCK_NAME_LEN} bytes: \
                 with this distribution the lock name may be at most {max} bytes; choose a \
                 shorter name",
                name.len()
            ),
        }
    }
}

impl std::error::Error for DistributionError {}

impl Distribution {
    /// The shards of one slot: `Some(n)` for fixed shards.
    pub fn shards(self) -> Option<u32> {
        match self {
            Distribution::Shards(n) => Some(n),
            _ => None,
        }
    }

    /// How many bytes the longest derived lock name adds to the job's: `#` and the largest
    /// index.
    pub fn suffix_len(self) -> usize {
        let largest = match self {
            Distribution::Single => return 0,
            Distribution::Shards(n) => n.saturating_sub(1),
            Distribution::Broadcast => MAX_SHARDS - 1,
        };
        1 + largest.to_string().len()
    }

    /// The lock name of shard (or rank) `index` of a job locked under `base`.
    pub fn lock_name(self, base: &str, index: u32) -> String {
        format!("{base}#{index}")
    }

    /// Checks the shard count and that every derived lock name of a job locked under
    /// `lock_name` fits [`MAX_LOCK_NAME_LEN`].
    ///
    /// ```
    /// use lock_trigger::{Distribution, DistributionError};
    /// assert!(Distribution::Shards(4).check("report").is_ok());
    /// assert_eq!(Distribution::Shards(0).check("report"), Err(DistributionError::ShardCount(0)));
    /// let long = "x".repeat(63);
    /// assert!(matches!(
    ///     Distribution::Shards(4).check(&long),
    ///     Err(DistributionError::NameTooLong { max: 62, .. })
    /// ));
    /// ```
    pub fn check(self, lock_name: &str) -> Result<(), DistributionError> {
        if let Distribution::Shards(n) = self {
            check_shard_count(u64::from(n))?;
        }
        let max = MAX_LOCK_NAME_LEN - self.suffix_len();
        if lock_name.len() > max {
            return Err(DistributionError::NameTooLong {
                name: lock_name.to_owned(),
                max,
            });
        }
        Ok(())
    }
}

/// Checks a shard count: from 1 to [`MAX_SHARDS`].
pub fn check_shard_count(n: u64) -> Result<(), DistributionError> {
    if (1..=u64::from(MAX_SHARDS)).contains(&n) {
        Ok(())
    } else {
        Err(DistributionError::ShardCount(n))
    }
}

impl fmt::Display for Distribution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distribution::Single => f.write_str("single"),
            Distribution::Shards(n) => write!(f, "{n} shards"),
            Distribution::Broadcast => f.write_str("broadcast"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_count_the_largest_index() {
        assert_eq!(Distribution::Shards(1).suffix_len(), 2);
        assert_eq!(Distribution::Shards(10).suffix_len(), 2);
        assert_eq!(Distribution::Shards(11).suffix_len(), 3);
        assert_eq!(Distribution::Shards(1024).suffix_len(), 5);
        assert!(Distribution::Shards(10).check(&"x".repeat(62)).is_ok());
        assert!(Distribution::Shards(11).check(&"x".repeat(62)).is_err());
        assert_eq!(
            Distribution::Shards(1025).check("a"),
            Err(DistributionError::ShardCount(1025))
        );
    }
}
