//! The lock contract and what runs one locked call: for provider authors, and for services
//! that lock a call without a scheduler.
//!
//! These are `lock-core`'s names; a provider crate depends on `lock-core` alone and
//! implements [`LockProvider`].
//!
//! ```
//! use scheduled_locks::provider::{
//!     InMemoryLockProvider, LockConfiguration, LockOutcome, LockingTaskExecutor,
//! };
//! use std::time::Duration;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
//! let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
//! let outcome = executor.execute_with_lock(&config, async { 42 }).await?;
//! assert!(matches!(outcome, LockOutcome::Executed(42)));
//! # Ok::<(), scheduled_locks::LockError>(()) }).unwrap();
//! ```

pub use lock_core::{
    AcquireOutcome, BoxError, FireSlot, InMemoryLockProvider, JobError, JobReturn, Lease,
    LockConfiguration, LockDefaults, LockOutcome, LockProvider, LockRecord, LockRequest,
    LockedReturn, LockingTaskExecutor, Refusal, RefusalReason, RunOnce, RunOnceOutcome,
    default_executor, install_default_executor, validate_lock_name, validate_stored_lock_name,
    with_default_executor,
};
