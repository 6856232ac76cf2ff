#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod batching;
mod config;
mod context;
pub mod encoding;
mod error;
mod executor;
mod instance;
mod job_error;
mod memory;
pub mod metrics;
mod provider;
mod run_once;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use __private::{JobReturn, LockedReturn};
pub use config::{
    LockConfiguration, MAX_DURATION, MAX_LOCK_NAME_LEN, validate_lock_name,
    validate_stored_lock_name,
};
pub use context::{FireKind, JobContext, Params, assert_locked};
pub use error::{BoxError, LockError};
#[doc(hidden)]
pub use executor::FireOutcome;
#[doc(hidden)]
pub use executor::install_scheduler_executor;
pub use executor::{
    DEFAULT_BATCH_WINDOW, DEFAULT_LOCK_AT_MOST_FOR, DEFAULT_OPERATION_TIMEOUT, LockDefaults,
    LockOutcome, LockingTaskExecutor, MAX_GROWN_AHEAD, default_executor, install_default_executor,
    with_default_executor,
};
pub use instance::{MAX_INSTANCE_ID_LEN, default_instance_id};
pub use job_error::JobError;
pub use lock_macros::scheduler_lock;
pub use memory::InMemoryLockProvider;
pub use provider::{
    AcquireOutcome, DEFAULT_MAX_SLOT_LEAD, FireSlot, Lease, LockProvider, LockRecord, LockRequest,
    Refusal, RefusalReason,
};
pub use run_once::{DEFAULT_RUN_ONCE_LEASE, DEFAULT_RUN_ONCE_WAIT, RunOnce, RunOnceOutcome};
