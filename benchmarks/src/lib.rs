#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod postgres;
pub mod process;

// One percentile definition and one full/smoke rule for every bench of the workspace: they
// live in `test-support`, which the providers' benches use too.
pub use test_support::{Mode, Samples, Unit, mode, stats};
