//! What `#[scheduler_lock]` expands to. Not public API: names here may change in any release.
//!
//! The macros emit paths into one `__private` module only: `lock_scheduler`'s (which adds what
//! `#[scheduled]` registers to this one), re-exported by `scheduled_locks`, or this one in a
//! crate that depends on `lock-core` alone and locks calls without a scheduler.

use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;

/// The vocabulary the expansion is written in (`lock_trigger::LockSpec` inside [`LockSpec`]).
pub use lock_trigger;

use crate::executor::default_executor_shared;
use crate::{
    JobError, LockConfiguration, LockDefaults, LockError, LockOutcome, LockingTaskExecutor,
};

/// A boxed job future.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A job run's result as the scheduler reports it: the body's error by its message chain.
pub type JobResult = Result<(), JobError>;

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

/// The return types a locked function may have: `()` and `Result<(), E>`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be returned by a locked function",
    label = "a locked function returns `()` or `Result<(), E>` with `E: Display`",
    note = "a skipped call returns `()` or `Ok(())`, and an `Err` is logged and kept in the run history by its message chain (`{{:#}}`), so the error type must implement `Display`"
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

impl<E: Display> JobReturn for Result<(), E> {
    fn skipped() -> Self {
        Ok(())
    }
    fn into_job_result(self) -> JobResult {
        self.map_err(|e| JobError::from_display(&e))
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
/// impl std::fmt::Display for MigrateError {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         match self {
///             MigrateError::Lock(error) => write!(f, "{error}"),
///             MigrateError::Sql(message) => write!(f, "migration failed: {message}"),
///         }
///     }
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
    label = "a locked function returns `()` or `Result<(), E>` with `E: Display + From<lock_core::LockError>`",
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

impl<E: Display + From<LockError>> LockedReturn for Result<(), E> {
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

/// `R`'s values for a skipped call and a failed lock, passed to [`run_locked`]. Building it is
/// the only place the `LockedReturn` bound is checked: on `run_locked` itself, rustc checked
/// it for the call and again for the future it returns, and counted the second error, which it
/// did not print ("3 previous errors" above two).
pub struct Returns<R> {
    skipped: fn() -> R,
    lock_failed: fn(LockError) -> R,
}

/// `R`'s [`Returns`], checking that a locked function may return `R`.
pub const fn returns<R: LockedReturn>() -> Returns<R> {
    Returns {
        skipped: R::skipped,
        lock_failed: R::lock_failed,
    }
}

/// A direct call of an `async fn` with `#[scheduler_lock]`: runs `body` under the lock, returns
/// `R::skipped()` when the lock is held elsewhere, and `R::lock_failed(error)` when it could
/// not be asked for (logged); `returns` is [`returns::<R>()`](returns).
///
/// Panics when no executor is installed: the body must never run unlocked.
pub async fn run_locked<R>(
    spec: &'static LockSpec,
    returns: Returns<R>,
    body: impl Future<Output = R>,
) -> R {
    let executor = executor_for(spec);
    let config = match resolve(spec, &executor) {
        Ok(config) => config,
        Err(error) => return (returns.lock_failed)(error),
    };
    match executor.execute_with_lock(&config, body).await {
        Ok(LockOutcome::Executed(out)) => out,
        // Skips and provider errors are logged by the executor.
        Ok(LockOutcome::Skipped) => (returns.skipped)(),
        Err(error) => (returns.lock_failed)(error),
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
