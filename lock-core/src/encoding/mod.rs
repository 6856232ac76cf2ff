//! How a lease's numbers are stored: durations as whole milliseconds by one rounding rule, and
//! fences as a signed 64-bit column.
//!
//! Every provider that keeps leases in a store of its own (the SQL providers through
//! `lock-sql`, Redis in its hashes) writes them with these functions, so that a lease means the
//! same on every backend.
//!
//! ```
//! use lock_core::encoding::{lease_millis, at_least_millis, fence_from_sql};
//! use std::time::Duration;
//!
//! assert_eq!(lease_millis(Duration::from_micros(200)), 1); // never 0: a lease is held
//! assert_eq!(at_least_millis(Duration::ZERO), 0);           // release may end it now
//! assert_eq!(fence_from_sql(-5), 0);
//! ```

mod duration;
mod fence;

pub use duration::{COLUMN_UNIT, MAX_INTERVAL, at_least_millis, lease_millis};
pub use fence::{fence_from_sql, fence_to_sql};
