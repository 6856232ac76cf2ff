//! Jobs defined in a library crate, as a service keeps them next to its domain code.
//!
//! They are registered only in a binary that links this crate; a binary that never names it
//! does not link it. `use jobs_lib as _;` in the binary is enough (see
//! `tests/tests/jobs_library.rs`).

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use lock_scheduler::scheduled;

/// Runs every night at 02:00 UTC.
#[scheduled(cron = "0 0 2 * * *", name = "nightly_report")]
pub async fn nightly_report() {}
