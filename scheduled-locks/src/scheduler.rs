//! The scheduler's vocabulary beyond the root: a job's status and last outcome, how a job's
//! slots are spread and missed slots handled, per-job overrides from the environment, the
//! extractors a job's parameters use, which of a run's log lines the history keeps
//! ([`RunLogs`]), and the jobs the macros registered.
//!
//! ```
//! use scheduled_locks::scheduler::{JobOverride, MisfirePolicy};
//! use scheduled_locks::Trigger;
//!
//! let trigger = Trigger::cron("0 0 3 * * *")?.with_misfire(MisfirePolicy::FireOnce)?;
//! assert_eq!(trigger.misfire(), MisfirePolicy::FireOnce);
//! // A job's trigger replaced at start, as the `LOCK_JOB_<NAME>_CRON` variable would.
//! let _override = JobOverride::new().cron("0 30 4 * * *").zone("Europe/Berlin");
//! # Ok::<(), scheduled_locks::LockError>(())
//! ```

pub use lock_core::default_instance_id;
pub use lock_scheduler::{
    BlockingJobHandler, Distribution, ExtractError, FromJob, HOUSEKEEPING_JOB, JobHandler,
    JobOverride, JobStatus, MisfirePolicy, OVERRIDE_ENV_PREFIX, Overlap, Params, RunLogs,
    RunOutcome, StateMap, override_env_key, parse_duration, registered_jobs,
};
/// The level [`RunLogs::level`] takes (`tracing`'s).
pub use tracing::Level;
