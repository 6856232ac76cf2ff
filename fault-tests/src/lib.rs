#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod backend;
mod runs;

pub use backend::{Backend, SchemaAction};
pub use runs::{Run, RunsTable};
