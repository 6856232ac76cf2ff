#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod backend;
mod runs;

pub use backend::Backend;
/// What a service does about the lock table at start (`--schema create|check`).
pub use lock_providers::SchemaAction;
pub use runs::{Run, RunsTable};
