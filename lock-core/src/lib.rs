#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod clock;
mod config;
mod context;
mod error;
mod executor;
mod extract;
mod instance;
mod job_error;
pub mod kit;
mod memory;
pub mod metrics;
pub mod operations;
mod provider;
mod run_once;
mod scheduler;
mod shutdown;
#[cfg(feature = "tokio-cron-scheduler")]
pub mod tcs;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
pub mod testing;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use __private::{JobReturn, LockedReturn};
pub use clock::DEFAULT_CLOCK_REFRESH;
pub use config::{LockConfiguration, MAX_DURATION, MAX_LOCK_NAME_LEN, validate_lock_name};
pub use context::{FireKind, JobContext, assert_locked};
pub use error::{BoxError, LockError};
pub use executor::{
    DEFAULT_BATCH_WINDOW, DEFAULT_LOCK_AT_MOST_FOR, DEFAULT_OPERATION_TIMEOUT, LockDefaults,
    LockOutcome, LockingTaskExecutor, default_executor, install_default_executor,
    with_default_executor,
};
pub use extract::{BlockingJobHandler, ExtractError, FromJob, JobHandler, State, StateMap};
pub use instance::{MAX_INSTANCE_ID_LEN, default_instance_id};
pub use job_error::JobError;
pub use kit::{ColumnNames, DEFAULT_TABLE, validate_identifier, validate_table_name};
pub use lock_macros::{scheduled, scheduler_lock};
pub use lock_trigger::MisfirePolicy;
pub use lock_trigger::{Distribution, MAX_SHARDS};
pub use memory::InMemoryLockProvider;
pub use provider::{
    AcquireOutcome, DEFAULT_MAX_SLOT_LEAD, FireSlot, Lease, LockProvider, LockRecord, LockRequest,
    Refusal, RefusalReason,
};
pub use run_once::{DEFAULT_RUN_ONCE_LEASE, DEFAULT_RUN_ONCE_WAIT, RunOnce, RunOnceOutcome};
pub use scheduler::{
    DEFAULT_ACQUIRE_AHEAD, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_SHUTDOWN_TIMEOUT,
    HOUSEKEEPING_BATCH, HOUSEKEEPING_JOB, Job, JobStatus, RunOutcome, SHARD_TAKEOVER_DELAY,
    Scheduler, SchedulerBuilder, Trigger, registered_jobs,
};
pub use scheduler::{JobOverride, OVERRIDE_ENV_PREFIX, override_env_key, parse_duration};
pub use shutdown::shutdown_signal;
