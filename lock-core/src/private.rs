//! What the macros expand to. Not public API: names here may change in any release.
//!
//! The macros emit paths into this module only (`::scheduled_locks::__private::...`, which
//! re-exports it, or `::lock_core::__private::...`), so users depend on one crate.

use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

pub use inventory;
/// The vocabulary the expansion is written in (`TriggerSpec`, `TriggerKind`, `CronSpec`, and
/// `lock_trigger::LockSpec` inside [`LockSpec`]).
pub use lock_trigger::{self, CronSpec, Distribution, TriggerKind, TriggerSpec};

use crate::executor::default_executor_shared;
/// The extractors' state, named by the expansion of a blocking job's body.
pub use crate::extract::StateMap;
pub use crate::extract::fire_context;
use crate::extract::{ExtractError, FromJob};
use crate::{
    JobContext, LockConfiguration, LockDefaults, LockError, LockOutcome, LockingTaskExecutor,
};

/// A boxed job future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A job run's result as the scheduler reports it: the body's error, rendered with `{:?}`.
pub type JobResult = Result<(), String>;

/// One locked function's lock, as a `static` in the expansion: its [`LockSpec`] (the
/// `#[scheduler_lock]` arguments, or the defaults for a `#[scheduled]` function without one)
/// and the configuration resolved from it.
#[derive(Debug)]
pub struct LockSpec {
    /// The arguments, as the macro checked them.
    pub spec: lock_trigger::LockSpec,
    /// The configuration built for the first executor's defaults; later calls under the same
    /// defaults clone it (two reference counts) instead of validating and allocating again.
    cached: OnceLock<(LockDefaults, LockConfiguration)>,
}

impl LockSpec {
    /// Used by the expansion in a `static`.
    pub const fn new(spec: lock_trigger::LockSpec) -> Self {
        LockSpec {
            spec,
            cached: OnceLock::new(),
        }
    }

    /// The lock name.
    pub fn name(&self) -> &'static str {
        self.spec.name
    }

    /// The validated configuration under `executor`'s defaults (allocates nothing after the
    /// first call: the name is shared).
    pub fn configuration(
        &self,
        executor: &LockingTaskExecutor,
    ) -> Result<LockConfiguration, LockError> {
        let defaults = executor.defaults();
        if let Some((cached_for, config)) = self.cached.get()
            && *cached_for == defaults
        {
            return Ok(config.clone());
        }
        let spec = &self.spec;
        let at_least = spec.lock_at_least_for;
        // A default at_most shorter than an explicit at_least: hold at least as long as asked.
        let at_most = spec
            .lock_at_most_for
            .unwrap_or_else(|| defaults.lock_at_most_for.max(at_least));
        let config = LockConfiguration::new(spec.name, at_most, at_least)?
            .with_keep_alive(spec.keep_alive.unwrap_or(defaults.keep_alive));
        // Only the first executor's defaults are cached; another set rebuilds per call.
        let _ = self.cached.set((defaults, config.clone()));
        Ok(config)
    }
}

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
}

inventory::collect!(ScheduledJob);

/// The return types a locked function may have: `()` and `Result<(), E>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned by a locked function",
    label = "a locked function returns `()` or `Result<(), E>` with `E: Debug`",
    note = "a skipped call returns `()` or `Ok(())`, and an `Err` is logged with `{{:?}}`, so the error type must implement `Debug`"
)]
pub trait JobReturn: Sized {
    /// What a call returns when the lock was not taken: `()` or `Ok(())`.
    fn skipped() -> Self;
    /// The outcome for the scheduler's logs.
    fn into_job_result(self) -> JobResult;
}

impl JobReturn for () {
    fn skipped() -> Self {}
    fn into_job_result(self) -> JobResult {
        Ok(())
    }
}

impl<E: Debug> JobReturn for Result<(), E> {
    fn skipped() -> Self {
        Ok(())
    }
    fn into_job_result(self) -> JobResult {
        self.map_err(|e| format!("{e:?}"))
    }
}

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
    pub fn extract(&self, ctx: &JobContext, state: &StateMap) -> Result<T, String> {
        (self.extract)(ctx, state).map_err(|e| e.to_string())
    }
}

/// What a direct call of a locked function returns when the lock could not be asked for (the
/// provider failed, or the lock's configuration is invalid): `()` (the failure is logged), or
/// `Err(E::from(error))`, so that a failure never looks like a run.
///
/// `Result<(), E>` needs `E: From<LockError>`: `anyhow::Error`, `Box<dyn Error + Send + Sync>`,
/// [`LockError`] itself, `std::io::Error` and `String` have it; implement it for your own error
/// type (or derive it with `thiserror`'s `#[from]`).
///
/// ```
/// use lock_core::{InMemoryLockProvider, LockError, LockingTaskExecutor, scheduler_lock};
///
/// #[derive(Debug)]
/// enum MigrateError {
///     Lock(LockError),
///     Sql(String),
/// }
///
/// impl From<LockError> for MigrateError {
///     fn from(error: LockError) -> Self {
///         MigrateError::Lock(error)
///     }
/// }
///
/// #[scheduler_lock(name = "migrate")]
/// async fn migrate() -> Result<(), MigrateError> {
///     Ok(()) // ... run the migrations; Err(MigrateError::Sql(..)) on failure
/// }
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// # lock_core::install_default_executor(LockingTaskExecutor::new(InMemoryLockProvider::new()));
/// // Ok(()) also when another instance holds the lock; Err(MigrateError::Lock(..)) when the
/// // database could not be asked.
/// migrate().await.unwrap();
/// # });
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned by a locked function",
    label = "a locked function returns `()` or `Result<(), E>` with `E: Debug + From<lock_core::LockError>`",
    note = "a direct call returns `Err(E::from(error))` when the lock could not be asked for (the provider failed), so that a failure never looks like success"
)]
pub trait LockedReturn: JobReturn {
    /// The value of a call whose lock could not be asked for.
    fn lock_failed(error: LockError) -> Self;
}

impl LockedReturn for () {
    /// Logged by the executor; `()` has no way to say more.
    fn lock_failed(_: LockError) -> Self {}
}

impl<E: Debug + From<LockError>> LockedReturn for Result<(), E> {
    fn lock_failed(error: LockError) -> Self {
        Err(E::from(error))
    }
}

/// So that `std::io::Result<()>` functions can be locked: the error keeps the `LockError` as
/// its source (`ErrorKind::Other`).
impl From<LockError> for std::io::Error {
    fn from(error: LockError) -> Self {
        std::io::Error::other(error)
    }
}

/// So that `Result<(), String>` functions can be locked: the error's message.
impl From<LockError> for String {
    fn from(error: LockError) -> Self {
        error.to_string()
    }
}

/// The executor a direct locked call uses: the default one, shared (one reference count, no
/// clone of the executor). Public for the macro-overhead benchmark, which times this lookup.
pub fn executor_for(spec: &LockSpec) -> std::sync::Arc<LockingTaskExecutor> {
    match default_executor_shared() {
        Some(executor) => executor,
        None => panic!(
            "{}",
            LockError::NoProvider {
                name: spec.name().to_owned()
            }
        ),
    }
}

fn resolve(
    spec: &LockSpec,
    executor: &LockingTaskExecutor,
) -> Result<LockConfiguration, LockError> {
    spec.configuration(executor).inspect_err(|error| {
        tracing::error!(
            lock = spec.name(),
            error = error as &dyn std::error::Error,
            "invalid lock configuration; body not run"
        );
    })
}

/// A direct call of an `async fn` with `#[scheduler_lock]`: runs `body` under the lock, returns
/// `R::skipped()` when the lock is held elsewhere, and `R::lock_failed(error)` when it could
/// not be asked for (logged).
///
/// Panics when no executor is installed: the body must never run unlocked.
pub async fn run_locked<R: LockedReturn>(
    spec: &'static LockSpec,
    body: impl Future<Output = R>,
) -> R {
    let executor = executor_for(spec);
    let config = match resolve(spec, &executor) {
        Ok(config) => config,
        Err(error) => return R::lock_failed(error),
    };
    match executor.execute_with_lock(&config, body).await {
        Ok(LockOutcome::Executed(out)) => out,
        // Skips and provider errors are logged by the executor.
        Ok(LockOutcome::Skipped) => R::skipped(),
        Err(error) => R::lock_failed(error),
    }
}

/// A direct call of a synchronous `fn` with `#[scheduler_lock]`: takes the lock (blocking the
/// calling thread), runs `body` on it, releases.
///
/// Panics when no executor is installed, or when called on a current-thread tokio runtime's
/// thread (blocking there would deadlock).
pub fn run_locked_blocking<R: LockedReturn>(
    spec: &'static LockSpec,
    body: impl FnOnce() -> R,
) -> R {
    let executor = executor_for(spec);
    let config = match resolve(spec, &executor) {
        Ok(config) => config,
        Err(error) => return R::lock_failed(error),
    };
    match executor.execute_sync(&config, body) {
        Ok(LockOutcome::Executed(out)) => out,
        Ok(LockOutcome::Skipped) => R::skipped(),
        Err(error) => R::lock_failed(error),
    }
}
