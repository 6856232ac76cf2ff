//! What a job receives as parameters: application state registered with
//! [`SchedulerBuilder::state`](crate::SchedulerBuilder::state), the [`JobContext`], and any
//! type implementing [`FromJob`] (axum's extractors, for scheduled jobs).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use crate::__private::{BoxFuture, JobResult, JobReturn};
use lock_core::{JobContext, JobError};

/// A value registered with [`SchedulerBuilder::state`](crate::SchedulerBuilder::state), handed
/// to a job as a parameter (a clone per fire), as axum's `State`.
///
/// Destructure it in the parameter list; wrap a service object in an `Arc` to share it:
///
/// ```standalone_crate
/// use lock_core::{InMemoryLockProvider, JobContext};
/// use lock_scheduler::{Scheduler, State, scheduled};
/// use std::sync::Arc;
///
/// #[derive(Clone)]
/// struct Pool(&'static str); // e.g. a `sqlx::PgPool` or `deadpool_postgres::Pool`
/// struct Billing { currency: &'static str }
///
/// #[scheduled(fixed_rate = "100ms", name = "sync_bill")]
/// async fn sync_bill(State(pool): State<Pool>, State(billing): State<Arc<Billing>>, ctx: JobContext) {
///     println!("billing in {} on {} with fence {}", billing.currency, pool.0, ctx.fence());
/// }
///
/// # tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap().block_on(async {
/// let scheduler = Scheduler::builder()
///     .lock_provider(InMemoryLockProvider::new())
///     .state(Pool("postgres://db/billing"))
///     .state(Arc::new(Billing { currency: "EUR" }))
///     .start()
///     .await?;
/// scheduler.shutdown().await?;
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct State<T>(pub T);

/// The values registered with [`SchedulerBuilder::state`](crate::SchedulerBuilder::state),
/// one per type; what [`FromJob`] extractors read.
#[derive(Default)]
pub struct StateMap {
    values: HashMap<TypeId, Box<dyn Any + Send + Sync>, BuildHasherDefault<TypeIdHasher>>,
}

/// A `TypeId` is a hash already: the lookup at each fire skips SipHash (as `http::Extensions`).
#[derive(Default)]
struct TypeIdHasher(u64);

impl Hasher for TypeIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl fmt::Debug for StateMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateMap")
            .field("types", &self.values.len())
            .finish_non_exhaustive()
    }
}

impl StateMap {
    /// Adds `value` under its type; gives it back if the type was registered already. (The
    /// scheduler builds its map from [`SchedulerBuilder::state`](crate::SchedulerBuilder::state);
    /// this is for testing an extractor on its own.)
    ///
    /// ```
    /// let mut state = lock_scheduler::StateMap::default();
    /// assert!(state.insert(7u32).is_ok());
    /// assert_eq!(state.insert(8u32), Err(8));
    /// assert_eq!(state.get::<u32>(), Some(&7));
    /// ```
    pub fn insert<T: Send + Sync + 'static>(&mut self, value: T) -> Result<(), T> {
        match self.values.entry(TypeId::of::<T>()) {
            std::collections::hash_map::Entry::Occupied(_) => Err(value),
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(Box::new(value));
                Ok(())
            }
        }
    }

    /// The value registered for `T` (one map lookup).
    pub fn get<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.values.get(&TypeId::of::<T>())?.downcast_ref()
    }

    /// Whether a value of type `T` is registered.
    pub fn contains<T: Send + Sync + 'static>(&self) -> bool {
        self.values.contains_key(&TypeId::of::<T>())
    }
}

/// Why an extractor cannot give a job its value. Its message completes "job `name` needs ...",
/// for example `State<PgPool>, which was not registered: add .state(pg_pool) to the builder`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtractError {
    message: String,
}

impl ExtractError {
    /// An error with `message` (what the job needs, and how to provide it).
    pub fn new(message: impl Into<String>) -> Self {
        ExtractError {
            message: message.into(),
        }
    }

    /// A `State<T>` whose `T` was not registered.
    pub fn missing_state<T>() -> Self {
        let ty = short_type_name(std::any::type_name::<T>());
        ExtractError::new(format!(
            "State<{ty}>, which was not registered: add .state({}) to the builder",
            value_name(&ty)
        ))
    }
}

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ExtractError {}

/// A job parameter: what a `#[scheduled]` function (or a [`Job::new`](crate::Job::new)
/// closure) receives at each fire, taken from the registered state and the fire's
/// [`JobContext`].
///
/// [`check`](Self::check) runs for every job at
/// [`SchedulerBuilder::start`](crate::SchedulerBuilder::start), before any job fires, so a
/// job never fails at fire time for a missing value; [`from_job`](Self::from_job) runs inside
/// the lock at each fire.
///
/// ```standalone_crate
/// use lock_core::JobContext;
/// use lock_scheduler::{ExtractError, FromJob, StateMap, scheduled};
///
/// /// The tenant a job works for, from the registered `Tenants` and the lock's fence.
/// struct Tenant(String);
///
/// #[derive(Clone)]
/// struct Tenants(Vec<String>);
///
/// impl FromJob for Tenant {
///     fn check(state: &StateMap) -> Result<(), ExtractError> {
///         match state.contains::<Tenants>() {
///             true => Ok(()),
///             false => Err(ExtractError::new("Tenants: add .state(Tenants(..)) to the builder")),
///         }
///     }
///     fn from_job(ctx: &JobContext, state: &StateMap) -> Result<Self, ExtractError> {
///         let tenants = &state.get::<Tenants>().ok_or_else(ExtractError::missing_state::<Tenants>)?.0;
///         Ok(Tenant(tenants[ctx.fence() as usize % tenants.len()].clone()))
///     }
/// }
///
/// #[scheduled(fixed_rate = "1m", name = "rotate")]
/// async fn rotate(Tenant(tenant): Tenant) {
///     println!("rotating keys of {tenant}");
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a parameter of a scheduled job",
    label = "not an extractor",
    note = "a job's parameters are extractors: `State<T>` for a value registered with `.state(value)` on the builder, `JobContext`, or a type implementing `FromJob` (`scheduled_locks::scheduler::FromJob`)"
)]
pub trait FromJob: Sized + Send + 'static {
    /// Whether the registered state has what this extractor needs (run once per job at
    /// start). The default needs nothing.
    fn check(state: &StateMap) -> Result<(), ExtractError> {
        let _ = state;
        Ok(())
    }

    /// The value for one fire.
    fn from_job(ctx: &JobContext, state: &StateMap) -> Result<Self, ExtractError>;
}

impl<T: Clone + Send + Sync + 'static> FromJob for State<T> {
    fn check(state: &StateMap) -> Result<(), ExtractError> {
        match state.contains::<T>() {
            true => Ok(()),
            false => Err(ExtractError::missing_state::<T>()),
        }
    }

    /// One map lookup and one clone.
    fn from_job(_: &JobContext, state: &StateMap) -> Result<Self, ExtractError> {
        match state.get::<T>() {
            Some(value) => Ok(State(value.clone())),
            None => Err(ExtractError::missing_state::<T>()),
        }
    }
}

impl FromJob for JobContext {
    fn from_job(ctx: &JobContext, _: &StateMap) -> Result<Self, ExtractError> {
        Ok(ctx.clone())
    }
}

/// `alloc::sync::Arc<app::Service>` -> `Arc<Service>`.
fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    let mut segment_start = 0;
    for (i, c) in full.char_indices() {
        if !(c.is_alphanumeric() || c == '_' || c == ':') {
            out.push_str(last_segment(&full[segment_start..i]));
            out.push(c);
            segment_start = i + c.len_utf8();
        }
    }
    out.push_str(last_segment(&full[segment_start..]));
    out
}

fn last_segment(path: &str) -> &str {
    path.rsplit("::").next().unwrap_or(path)
}

/// A variable name for a value of `ty`: `PgPool` -> `pg_pool`, `Pool<Manager>` -> `pool`,
/// `Arc<Service>` -> `service` (through the usual wrappers).
fn value_name(ty: &str) -> String {
    let mut ty = ty;
    for wrapper in ["Arc<", "Rc<", "Box<", "Mutex<", "RwLock<"] {
        if let Some(inner) = ty.strip_prefix(wrapper) {
            ty = inner;
        }
    }
    snake_case(ty.split(['<', '>', ',', ' ']).next().unwrap_or(ty))
}

/// `PgPool` -> `pg_pool`.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_')
        .enumerate()
    {
        if c.is_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    if out.is_empty() {
        "value".to_owned()
    } else {
        out
    }
}

/// A closure [`Job::new`](crate::Job::new) can run: `Fn(A, B, ..) -> impl Future`, each
/// parameter a [`FromJob`] extractor (up to 8), returning `()` or `Result<(), E>`.
///
/// Implemented for closures; not meant to be implemented by hand.
pub trait JobHandler<Args>: Send + Sync + 'static {
    #[doc(hidden)]
    fn check(state: &StateMap) -> Vec<ExtractError>;
    #[doc(hidden)]
    fn call(self: Arc<Self>, state: Arc<StateMap>) -> BoxFuture<JobResult>;
}

/// A closure [`Job::blocking`](crate::Job::blocking) can run: `Fn(A, B, ..) -> R`, each
/// parameter a [`FromJob`] extractor (up to 8), returning `()` or `Result<(), E>`.
///
/// Implemented for closures; not meant to be implemented by hand.
pub trait BlockingJobHandler<Args>: Send + Sync + 'static {
    #[doc(hidden)]
    fn check(state: &StateMap) -> Vec<ExtractError>;
    #[doc(hidden)]
    fn call(&self, state: &StateMap) -> JobResult;
}

/// The context of the fire this code runs in, for extractors (set by the executor around
/// every locked body).
pub fn fire_context() -> Result<JobContext, JobError> {
    JobContext::current().ok_or_else(|| {
        JobError::new("job parameters are extracted inside the lock, but no lock is held")
    })
}

/// A tuple of extractors: a handler's parameters, checked and extracted together.
trait Extractors: Sized {
    fn check(state: &StateMap) -> Vec<ExtractError>;
    fn extract(state: &StateMap) -> Result<Self, JobError>;
}

macro_rules! handlers {
    ($($arg:ident),*) => {
        impl<$($arg: FromJob,)*> Extractors for ($($arg,)*) {
            fn check(_state: &StateMap) -> Vec<ExtractError> {
                #[allow(unused_mut)]
                let mut missing = Vec::new();
                $(missing.extend(<$arg as FromJob>::check(_state).err());)*
                missing
            }

            /// The fire's context is read once, and only when there are parameters.
            #[allow(non_snake_case)]
            fn extract(_state: &StateMap) -> Result<Self, JobError> {
                handlers!(@context _ctx $($arg)*);
                Ok(($(<$arg as FromJob>::from_job(&_ctx, _state)
                    .map_err(|e| JobError::new(e.to_string()))?,)*))
            }
        }

        impl<F, Fut, R, $($arg,)*> JobHandler<($($arg,)*)> for F
        where
            F: Fn($($arg),*) -> Fut + Send + Sync + 'static,
            Fut: Future<Output = R> + Send + 'static,
            R: JobReturn + 'static,
            $($arg: FromJob,)*
        {
            fn check(state: &StateMap) -> Vec<ExtractError> {
                <($($arg,)*) as Extractors>::check(state)
            }

            #[allow(non_snake_case)]
            fn call(self: Arc<Self>, state: Arc<StateMap>) -> BoxFuture<JobResult> {
                Box::pin(async move {
                    let ($($arg,)*) = <($($arg,)*) as Extractors>::extract(&state)?;
                    (self)($($arg),*).await.into_job_result()
                })
            }
        }

        impl<F, R, $($arg,)*> BlockingJobHandler<($($arg,)*)> for F
        where
            F: Fn($($arg),*) -> R + Send + Sync + 'static,
            R: JobReturn + 'static,
            $($arg: FromJob,)*
        {
            fn check(state: &StateMap) -> Vec<ExtractError> {
                <($($arg,)*) as Extractors>::check(state)
            }

            #[allow(non_snake_case)]
            fn call(&self, state: &StateMap) -> JobResult {
                let ($($arg,)*) = <($($arg,)*) as Extractors>::extract(state)?;
                (self)($($arg),*).into_job_result()
            }
        }
    };
    (@context $ctx:ident) => {};
    (@context $ctx:ident $($arg:ident)+) => {
        let $ctx = fire_context()?;
    };
}

handlers!();
handlers!(A1);
handlers!(A1, A2);
handlers!(A1, A2, A3);
handlers!(A1, A2, A3, A4);
handlers!(A1, A2, A3, A4, A5);
handlers!(A1, A2, A3, A4, A5, A6);
handlers!(A1, A2, A3, A4, A5, A6, A7);
handlers!(A1, A2, A3, A4, A5, A6, A7, A8);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_state_names_the_type_and_the_fix() {
        struct PgPool;
        assert_eq!(
            ExtractError::missing_state::<PgPool>().to_string(),
            "State<PgPool>, which was not registered: add .state(pg_pool) to the builder"
        );
        struct Service;
        assert_eq!(
            ExtractError::missing_state::<Arc<Service>>().to_string(),
            "State<Arc<Service>>, which was not registered: add .state(service) to the builder"
        );
        struct Pool<M>(M);
        struct Manager;
        assert_eq!(
            ExtractError::missing_state::<Pool<Manager>>().to_string(),
            "State<Pool<Manager>>, which was not registered: add .state(pool) to the builder"
        );
    }

    #[test]
    fn one_value_per_type() {
        let mut map = StateMap::default();
        assert_eq!(map.insert(1u32), Ok(()));
        assert_eq!(map.insert(2u32), Err(2));
        assert_eq!(map.get::<u32>(), Some(&1));
        assert!(!map.contains::<u64>());
    }
}
