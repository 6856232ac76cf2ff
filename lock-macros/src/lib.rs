#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod args;
mod distribution;
mod errors;
mod expand;
mod keys;
mod params;
mod root;
mod valid;
mod values;

use proc_macro::TokenStream;

use keys::Macro;

/// Runs a function on a schedule, once per fire across all instances of the service.
///
/// Use it through `lock_scheduler::scheduled`. Every `#[scheduled]` function in the binary is
/// registered at link time; `lock_scheduler::Scheduler` finds and runs them, taking the lock for
/// each fire (a cron or fixed-rate fire carries its scheduled instant, so a slot runs once even
/// on instances whose clocks disagree).
///
/// # Triggers (exactly one)
///
/// | key | value | fires |
/// |---|---|---|
/// | `cron` | Spring six-field cron: `"0 5 1 * * *"` (seconds first), `?`, `L`, `W`, `#`, names, `@daily`, ... | at each matching wall-clock time |
/// | `fixed_rate` | duration: `"5s"`, `"1h 30m"` | every period, slots aligned to the Unix epoch |
/// | `fixed_delay` | duration | this long after the previous run ended |
/// | `after` | a job's name, `"import_orders"`, or a list, `["import_orders", "import_refunds"]` (at least one, none twice, not the job itself) | once for each success of its parents, with their slot (`start()` refuses unknown parents and cycles) |
///
/// `after` takes none of the clock triggers' options below (`zone`, `initial_delay`, the
/// misfire keys, `shards`, `broadcast`): the job has no clock of its own.
///
/// With them: `name = "sync_bill"` (the lock's name, unless `#[scheduler_lock]` gives it),
/// `group = "reports"` (the concurrency group `SchedulerBuilder::group_limit` bounds),
/// `zone = "Asia/Shanghai"` (an IANA name; `cron` only, default UTC) and
/// `initial_delay = "10s"` (`fixed_rate` and `fixed_delay` only). Durations are in `humantime`
/// syntax (`"10s"`) or ISO-8601 as ShedLock writes them (`"PT10S"`), with millisecond precision.
///
/// `cron` and `fixed_rate` jobs (not `fixed_delay`: it has no slots) also take:
///
/// | key | value | default |
/// |---|---|---|
/// | `misfire` | `"skip"`, `"fire_once"` (the latest slot no instance ran runs once, as soon as one can) or `"catch_up"` (each missed slot once, oldest first) | `"skip"` |
/// | `misfire_grace` | duration: how old a missed slot may be and still run | one period of the trigger |
/// | `misfire_max` | integer, 1 to 1000: how many missed slots `catch_up` runs (the most recent) | `10` |
/// | `shards` | integer, 1 to 1024: each slot runs as that many shards, each once in the cluster under the lock `<name>#<index>`; `JobContext::shard()` is `Some((index, total))` | none |
/// | `broadcast` | `true`: each slot runs once on every live instance (`shard()` is its rank among them); needs the provider's registry; not with `shards` | `false` |
///
/// # Locking
///
/// Every job names its lock, once: `name = "..."` in `#[scheduled(...)]`, or in a
/// `#[scheduler_lock(...)]` on the same function (in either order), which also sets the lease.
/// Without `#[scheduler_lock]` the job takes the executor's default `lock_at_most_for`. The name
/// is also the job's name (in `Scheduler::jobs()`, metrics and configuration overrides). It is
/// required, not derived from the function's path: a function moved to another module during a
/// rolling deploy would otherwise be locked under two names, and one slot would run twice. Calling the function directly also takes the lock (without a
/// slot), so a direct call and a scheduled fire never overlap.
///
/// # The function
///
/// `async fn` or `fn` (run on tokio's blocking pool), without generics or `self`, returning `()`
/// or `Result<(), E>` with `E: Display + From<LockError>` (an `Err` is logged and kept in the
/// run history by its message chain, `{:#}`: an `anyhow::Error`'s contexts and cause, no
/// backtrace; a direct call whose lock could not be asked for returns `Err(E::from(error))`).
/// Its parameters are extractors, filled at each fire: `lock_scheduler::State<T>` for a value
/// registered with `Scheduler::builder().state(value)`, `lock_core::JobContext`, or any type
/// implementing `lock_scheduler::FromJob`; `Scheduler::start()` checks what each job needs before
/// any fires.
/// The future of an `async fn` must be `Send`. Inside an `impl` block, the body cannot use
/// `Self` (name the type instead): the body moves into a nested function.
///
/// Everything that can be checked at compile time is: the cron expression and zone (with the
/// same parser the scheduler uses), durations, key names and value types, job names in `after`
/// and `group` (by the rule `start()` applies), and combinations (one trigger, `zone` with
/// `cron` only, a job not after itself, ...). All mistakes are reported at once.
///
/// ```
/// use lock_core::JobContext;
/// use lock_scheduler::{scheduled, scheduler_lock};
///
/// #[scheduled(cron = "0 5 1 * * *", zone = "Asia/Shanghai")]
/// #[scheduler_lock(name = "sync_bill", lock_at_most_for = "30m", lock_at_least_for = "10s")]
/// async fn sync_bill() {
///     let ctx = JobContext::current().expect("inside a locked job");
///     println!("generating bills with fence {}", ctx.fence());
/// }
///
/// // Every 30 s, first 10 s after start, locked under `refresh_cache`.
/// #[scheduled(fixed_rate = "30s", initial_delay = "10s", name = "refresh_cache")]
/// fn refresh_cache() -> std::io::Result<()> {
///     std::fs::metadata(".")?;
///     Ok(())
/// }
///
/// // Registered at link time, found by the scheduler:
/// let names: Vec<_> = lock_scheduler::__private::inventory::iter::<lock_scheduler::__private::ScheduledJob>
///     .into_iter()
///     .map(|job| job.lock.spec.name)
///     .collect();
/// assert!(names.contains(&"sync_bill"));
/// ```
///
/// A mistake is a compile error at the offending value:
///
/// ```compile_fail
/// #[lock_scheduler::scheduled(cron = "*/5 * * * *", name = "tick")] // five fields: seconds are missing
/// async fn tick() {}
/// ```
#[proc_macro_attribute]
pub fn scheduled(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(Macro::Scheduled, args.into(), item.into()).into()
}

/// Runs every call of a function under a named lock: when another instance (or another task
/// of this one) holds it, the call is skipped and returns `()` or `Ok(())`.
///
/// Use it through `lock_core::scheduler_lock`, alone or together with `#[scheduled]` (in
/// either order), where it sets how the scheduled job is locked.
///
/// | key | value | default |
/// |---|---|---|
/// | `name` | the lock's name, 1 to 64 bytes: required here or, with `#[scheduled]`, there | none: a compile error proposes one |
/// | `lock_at_most_for` | duration: the lease ends this long after it was taken even if the holder died | the executor's (30 minutes) |
/// | `lock_at_least_for` | duration: on release the lease is kept until this long after it was taken | `"0s"` |
/// | `keep_alive` | `true` or `false`: extend the lease every `lock_at_most_for / 2` while the body runs | the executor's (off) |
/// | `retries` | integer, 0 to 100: with `#[scheduled]`, a body that returns `Err` or panics runs again this many times, under the same lease and slot (`JobContext::attempt()` counts) | `0` |
/// | `retry_backoff` | duration: the pause before the first retry, doubled at each further one (less up to a quarter of jitter) | `"1s"` |
/// | `timeout` | duration: with `#[scheduled]`, `cancelled()` resolves after this long; an async body still running a grace later (a tenth, 1 s to 30 s) is dropped and the run recorded as timed out | none |
/// | `overlap` | with `#[scheduled]`, what a slot due while the previous run still runs does: `"skip"` it, `"queue"` it (once, right after), or `"replace"` the running body (its `cancelled()` resolves) | `"skip"` |
/// | `pause_after_failures` | integer, 1 to 1000: with `#[scheduled]`, this many failed fires in a row, counted across the cluster, pause the job cluster-wide (the circuit breaker; needs the run history) | none |
/// | `pause_for` | duration, with `pause_after_failures` only: the breaker's pause ends by itself after this long | until an operator resumes |
///
/// Durations are in `humantime` syntax (`"30m"`, `"1h 30m"`, `"500ms"`) or ISO-8601 as
/// ShedLock writes them (`"PT30M"`, `"PT1H30M"`, `"PT0.5S"`), with millisecond precision; `lock_at_least_for` may not exceed `lock_at_most_for`.
///
/// Calls need a lock provider: a started `lock_scheduler::Scheduler` installs one, or call
/// `lock_core::install_default_executor`. Without one, a call panics (the body never runs
/// unlocked). Inside the body, `lock_core::JobContext::current()` gives the lock's name, the
/// fencing token and a cancellation signal. A locked body that calls another function locked
/// under the same name runs it directly (reentrancy).
///
/// The function may be `async fn` or `fn` (which blocks the calling thread while the lock is
/// taken: call it from a multi-thread runtime or `spawn_blocking`), may take parameters and be
/// generic, and must return `()` or `Result<(), E>` with `E: Display + From<LockError>`: a call
/// whose lock could not be asked for (the provider failed) returns `Err(E::from(error))`, never
/// an `Ok(())` that would look like a run. Methods taking `self` are rejected: the lock is named
/// per function, so all values would share it.
///
/// ```
/// use lock_core::{InMemoryLockProvider, JobContext, LockingTaskExecutor, scheduler_lock};
///
/// #[scheduler_lock(name = "export", lock_at_most_for = "10m")]
/// async fn export(day: u32) -> std::io::Result<()> {
///     let ctx = JobContext::current().expect("runs under the lock");
///     assert_eq!(ctx.lock_name(), "export");
///     println!("exporting day {day}");
///     Ok(())
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// lock_core::install_default_executor(LockingTaskExecutor::new(InMemoryLockProvider::new()));
/// export(7).await.unwrap();
/// # });
/// ```
#[proc_macro_attribute]
pub fn scheduler_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(Macro::SchedulerLock, args.into(), item.into()).into()
}
