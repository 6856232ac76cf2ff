//! Fencing tokens as a `BIGINT` column holds them.
//!
//! A [`Lease`](crate::Lease) carries its fence as `u64`; the column is a signed 64-bit integer
//! that a provider only ever increments from 0. The two conversions below are the only ones
//! a provider needs, and they never fail: a stored value that cannot be a fence reads as 0, and
//! a fence that cannot be stored matches no row.

use crate::Lease;

/// A lease's fence as bound to SQL. Fences are handed out by the table from 1 upwards, so they
/// fit an `i64`; a lease from elsewhere with a larger one becomes -1 and matches no row (no
/// owner- and fence-checked release or extend can then touch the row).
///
/// ```
/// use lock_core::{Lease, LockRequest};
/// use std::time::Duration;
/// let request = LockRequest {
///     name: "job".into(),
///     locked_by: "me".into(),
///     lock_at_most_for: Duration::from_secs(1),
///     slot: None,
///     max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
///     give_up_at: None,
/// };
/// assert_eq!(lock_core::encoding::fence_to_sql(&Lease::granted(&request, 7)), 7);
/// assert_eq!(lock_core::encoding::fence_to_sql(&Lease::granted(&request, u64::MAX)), -1);
/// ```
pub fn fence_to_sql(lease: &Lease) -> i64 {
    i64::try_from(lease.fence()).unwrap_or(-1)
}

/// A stored fence as a lease's: a negative value (written by hand) reads as 0 rather than
/// failing every acquire.
///
/// ```
/// assert_eq!(lock_core::encoding::fence_from_sql(41), 41);
/// assert_eq!(lock_core::encoding::fence_from_sql(-5), 0);
/// ```
pub fn fence_from_sql(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or(0)
}
