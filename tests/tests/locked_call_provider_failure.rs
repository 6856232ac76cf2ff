//! A direct call of a locked function whose lock could not be asked for (the database is
//! unreachable) does not look like a run: a `Result<(), E>` function returns
//! `Err(E::from(LockError))`, while a lock held elsewhere still returns `Ok(())`.
//!
//! Its own test binary: it installs a failing provider as the default executor.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::{
    AcquireOutcome, InMemoryLockProvider, Lease, LockError, LockProvider, LockRecord, LockRequest,
    LockingTaskExecutor,
};
use lock_scheduler::{scheduled, scheduler_lock};

/// A provider whose database is down: every call fails (or, with `held`, the lock is taken
/// elsewhere).
struct Unreachable;

fn down(operation: &'static str, lock: &str) -> LockError {
    LockError::Provider {
        operation,
        lock: lock.to_owned(),
        backend: "test (unreachable)".to_owned(),
        source: "connection refused".into(),
    }
}

#[async_trait]
impl LockProvider for Unreachable {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        Err(down("acquire", &request.name))
    }
    async fn extend(&self, lease: &Lease, _: Duration) -> Result<bool, LockError> {
        Err(down("extend", lease.name()))
    }
    async fn release(&self, lease: &Lease, _: Duration) -> Result<bool, LockError> {
        Err(down("release", lease.name()))
    }
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        Err(down("list", ""))
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        Err(down("unlock", name))
    }
    fn describe(&self) -> String {
        "test (unreachable)".to_owned()
    }
}

static RAN: AtomicBool = AtomicBool::new(false);

#[derive(Debug)]
enum MigrateError {
    Lock(LockError),
}

impl std::fmt::Display for MigrateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MigrateError::Lock(error) => write!(f, "migrate: {error}"),
        }
    }
}

impl From<LockError> for MigrateError {
    fn from(error: LockError) -> Self {
        MigrateError::Lock(error)
    }
}

#[scheduler_lock(name = "migrate")]
async fn migrate() -> Result<(), MigrateError> {
    RAN.store(true, Ordering::SeqCst);
    Ok(())
}

#[scheduler_lock(name = "migrate-sync")]
fn migrate_sync() -> std::io::Result<()> {
    RAN.store(true, Ordering::SeqCst);
    Ok(())
}

#[scheduled(fixed_rate = "1h", name = "scheduled-report")]
async fn scheduled_report() -> anyhow::Result<()> {
    RAN.store(true, Ordering::SeqCst);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_provider_failure_is_an_err_not_ok() {
    lock_core::install_default_executor(LockingTaskExecutor::new(Unreachable));

    let error = migrate()
        .await
        .expect_err("the provider failed: Ok(()) would say it ran");
    let MigrateError::Lock(error) = error;
    assert!(
        matches!(
            error,
            LockError::Provider {
                operation: "acquire",
                ..
            }
        ),
        "{error:?}"
    );

    let error = tokio::task::spawn_blocking(migrate_sync)
        .await
        .unwrap()
        .expect_err("the provider failed");
    assert!(
        error.to_string().contains("connection refused") || error.get_ref().is_some(),
        "{error}"
    );

    let error = scheduled_report().await.expect_err("the provider failed");
    assert!(error.downcast_ref::<LockError>().is_some(), "{error:?}");

    assert!(!RAN.load(Ordering::SeqCst), "a body ran without its lock");

    // A lock held elsewhere is still a skip: Ok(()), the body not run.
    let provider = InMemoryLockProvider::new();
    let request = LockRequest {
        name: "migrate".into(),
        locked_by: "another-instance".into(),
        lock_at_most_for: Duration::from_secs(60),
        slot: None,
        max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
        give_up_at: None,
    };
    assert!(matches!(
        provider.acquire(&request).await.unwrap(),
        AcquireOutcome::Acquired(_)
    ));
    lock_core::install_default_executor(LockingTaskExecutor::new(provider));
    migrate().await.unwrap();
    assert!(!RAN.load(Ordering::SeqCst), "the lock was held elsewhere");
}
