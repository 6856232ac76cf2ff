#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod db;
pub mod http;
#[cfg(feature = "logs")]
pub mod logs;
pub mod mode;
pub mod private_postgres;
pub mod process;
#[cfg(feature = "proxy")]
pub mod proxy;
#[cfg(feature = "receiver")]
pub mod receiver;
pub mod redis_server;
pub mod servers;
pub mod skip;
#[cfg(feature = "smtp-sink")]
pub mod smtp_sink;
pub mod stats;
pub mod table;

pub use mode::Mode;
pub use stats::{Samples, Unit};
