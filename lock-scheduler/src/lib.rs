#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod clock;
mod extract;
mod history_batches;
mod scheduler;
mod shutdown;
#[cfg(feature = "tokio-cron-scheduler")]
pub mod tcs;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
pub mod testing;

pub use clock::DEFAULT_CLOCK_REFRESH;
pub use extract::{BlockingJobHandler, ExtractError, FromJob, JobHandler, State, StateMap};
pub use lock_macros::{scheduled, scheduler_lock};
pub use lock_trigger::{Distribution, MAX_SHARDS, MisfirePolicy, Overlap, Params};
pub use scheduler::{
    ALERT_ENV_PREFIX, DEFAULT_ACQUIRE_AHEAD, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_SHUTDOWN_TIMEOUT,
    HOUSEKEEPING_BATCH, HOUSEKEEPING_JOB, Job, JobOverride, JobStatus, OVERRIDE_ENV_PREFIX,
    RunLogs, RunOutcome, SHARD_TAKEOVER_DELAY, Scheduler, SchedulerBuilder, Trigger,
    override_env_key, parse_duration, registered_jobs,
};
#[cfg(feature = "alerts")]
pub use scheduler::{ALERT_RULES_JOB, AlertRules};
pub use shutdown::shutdown_signal;
