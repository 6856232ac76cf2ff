#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod mode;
pub mod postgres;
pub mod process;
pub mod stats;

pub use mode::Mode;
pub use stats::{Samples, Unit};
