//! What the macros expand to. Not public API: names here may change in any release.
//!
//! The macros emit paths into this module only (`::scheduled_locks::__private::...`, which
//! re-exports it, or `::lock_scheduler::__private::...`), so a service depends on one crate:
//! `lock-core`'s part (a locked call) and the registration of `#[scheduled]` functions.

use std::sync::Arc;

pub use inventory;
pub use lock_core::__private::*;
/// The vocabulary the expansion is written in (`TriggerSpec`, `TriggerKind`, `CronSpec`).
pub use lock_trigger::{CronSpec, Distribution, TriggerKind, TriggerSpec};

/// The extractors' state, named by the expansion of a blocking job's body.
pub use crate::extract::StateMap;
pub use crate::extract::fire_context;
use crate::extract::{ExtractError, FromJob};
use lock_core::{JobContext, JobError};

/// How the scheduler calls the function's body (without the function's own lock wrapper: the
/// scheduler takes the lock itself, with the fire's slot). The body extracts its parameters
/// from the state and the fire's context, inside the lock.
#[derive(Debug, Clone, Copy)]
pub enum JobBody {
    /// An `async fn`.
    Async(fn(&Arc<StateMap>) -> BoxFuture<JobResult>),
    /// A synchronous `fn`, run on the blocking pool.
    Blocking(fn(&StateMap) -> JobResult),
}

/// One `#[scheduled]` function, registered at link time with `inventory::submit!`.
#[derive(Debug)]
pub struct ScheduledJob {
    /// The job's name: its lock's `name`, written in either attribute.
    pub name: &'static str,
    /// When it fires.
    pub trigger: TriggerSpec,
    /// How it is locked.
    pub lock: &'static LockSpec,
    /// What it runs.
    pub body: JobBody,
    /// Checks the parameters' extractors against the registered state (at start).
    pub check: fn(&StateMap) -> Vec<ExtractError>,
    /// How each slot's work is spread (`shards = N`, `broadcast = true`).
    pub distribution: Distribution,
    /// The function's path (`my_service::billing::tick`, `module_path!()` and its name), for
    /// messages that must say which function is meant, such as two jobs with one name.
    pub function: &'static str,
    /// The parents of an `after` trigger (`#[scheduled(after = ..)]`); empty otherwise.
    pub after: &'static [&'static str],
    /// The concurrency group (`#[scheduled(group = "..")]`).
    pub group: Option<&'static str>,
}

inventory::collect!(ScheduledJob);

/// One parameter's extractor, as a `const` in the expansion. Building it is the only place
/// the `FromJob` bound is checked, so a parameter that is not an extractor is reported once,
/// on its type; the uses go through the function pointers.
pub struct Extractor<T> {
    check: fn(&StateMap) -> Result<(), ExtractError>,
    extract: fn(&JobContext, &StateMap) -> Result<T, ExtractError>,
}

/// `T`'s extractor (a function, not `Extractor::new`, so that a type that is not an extractor
/// gets `FromJob`'s own message).
pub const fn extractor<T: FromJob>() -> Extractor<T> {
    Extractor {
        check: T::check,
        extract: T::from_job,
    }
}

impl<T> Extractor<T> {
    /// Adds `T`'s check failure, if any, to `missing`.
    pub fn check(&self, state: &StateMap, missing: &mut Vec<ExtractError>) {
        missing.extend((self.check)(state).err());
    }

    /// The value for this fire (`ctx` from [`fire_context`]).
    pub fn extract(&self, ctx: &JobContext, state: &StateMap) -> Result<T, JobError> {
        (self.extract)(ctx, state).map_err(|e| JobError::new(e.to_string()))
    }
}
