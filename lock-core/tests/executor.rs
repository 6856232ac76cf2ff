//! The locking executor: keep-alive, lock loss, reentrancy, release on every path.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lock_core::{
    AcquireOutcome, InMemoryLockProvider, JobContext, LockConfiguration, LockOutcome, LockProvider,
    LockRequest, LockingTaskExecutor, testkit,
};

const MINUTE: Duration = Duration::from_secs(60);

async fn held(provider: &dyn LockProvider, name: &str) -> bool {
    provider
        .list_locks()
        .await
        .unwrap()
        .iter()
        .any(|r| r.name == name && r.held)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_holds_the_lease_past_lock_at_most_for() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let executor = LockingTaskExecutor::from_shared(provider.clone());
    let config = LockConfiguration::new("kept", Duration::from_millis(400), Duration::ZERO)
        .unwrap()
        .with_keep_alive(true);
    let other = provider.clone();
    let outcome = executor
        .execute_with_lock(&config, async move {
            // Three times lock_at_most_for: without extensions another owner would get in.
            for _ in 0..6 {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let attempt = other
                    .acquire(&testkit::request(&"kept".into(), "intruder", MINUTE, None))
                    .await
                    .unwrap();
                assert!(
                    matches!(attempt, AcquireOutcome::Refused(_)),
                    "lease expired while kept alive"
                );
            }
            !JobContext::current().unwrap().is_cancelled()
        })
        .await
        .unwrap();
    assert_eq!(outcome, LockOutcome::Executed(true));
    assert!(
        !held(provider.as_ref(), "kept").await,
        "released after the body"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_resolves_cancelled() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let executor = LockingTaskExecutor::from_shared(provider.clone());
    let config = LockConfiguration::new("lost", Duration::from_millis(300), Duration::ZERO)
        .unwrap()
        .with_keep_alive(true);
    let other = provider.clone();
    let outcome = executor
        .execute_with_lock(&config, async move {
            // An operator force-unlocks and another instance takes the lock over.
            other
                .force_unlock("lost")
                .await
                .unwrap()
                .expect("the row exists");
            let taken = other
                .acquire(&testkit::request(&"lost".into(), "new-owner", MINUTE, None))
                .await
                .unwrap();
            assert!(matches!(taken, AcquireOutcome::Acquired(_)));
            let ctx = JobContext::current().unwrap();
            tokio::time::timeout(Duration::from_secs(2), ctx.cancelled())
                .await
                .is_ok()
        })
        .await
        .unwrap();
    assert_eq!(
        outcome,
        LockOutcome::Executed(true),
        "cancelled() must resolve when the extend is refused"
    );
    let record = provider.list_locks().await.unwrap().pop().unwrap();
    assert_eq!(
        record.locked_by, "new-owner",
        "the old holder's release must not touch the new lease"
    );
    assert!(record.held);
}

#[tokio::test]
async fn reentrant_calls_do_not_acquire_again() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let executor = LockingTaskExecutor::from_shared(provider.clone());
    let outer = LockConfiguration::new("outer", Duration::from_secs(60), Duration::ZERO).unwrap();
    let other = LockConfiguration::new("other", Duration::from_secs(60), Duration::ZERO).unwrap();
    let inner_executor = executor.clone();
    let (same, different) = executor
        .execute_with_lock(&outer, async {
            let same = inner_executor
                .execute_with_lock(&outer, async { JobContext::current().unwrap().fence() })
                .await
                .unwrap();
            let different = inner_executor
                .execute_with_lock(&other, async {
                    JobContext::current().unwrap().lock_name().to_owned()
                })
                .await
                .unwrap();
            (same, different)
        })
        .await
        .unwrap()
        .executed()
        .unwrap();
    assert_eq!(
        same,
        LockOutcome::Executed(1),
        "the same name runs inside without a second acquire"
    );
    assert_eq!(different, LockOutcome::Executed("other".to_owned()));
}

#[tokio::test]
async fn a_panicking_body_releases_and_the_panic_continues() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let executor = LockingTaskExecutor::from_shared(provider.clone());
    let config = LockConfiguration::new("panics", Duration::from_secs(60), Duration::ZERO).unwrap();
    let task = tokio::spawn(async move {
        executor
            .execute_with_lock(&config, async {
                if std::hint::black_box(true) {
                    panic!("boom");
                }
            })
            .await
    });
    let panic = task.await.unwrap_err();
    assert!(panic.is_panic());
    assert!(!held(provider.as_ref(), "panics").await);
}

#[tokio::test]
async fn dropping_the_call_mid_body_releases_the_lease() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let executor = LockingTaskExecutor::from_shared(provider.clone());
    let config =
        LockConfiguration::new("dropped", Duration::from_secs(60), Duration::ZERO).unwrap();
    let started = Arc::new(AtomicBool::new(false));
    let flag = started.clone();
    let call = executor.execute_with_lock(&config, async move {
        flag.store(true, Ordering::SeqCst);
        std::future::pending::<()>().await
    });
    assert!(
        tokio::time::timeout(Duration::from_millis(100), call)
            .await
            .is_err()
    );
    assert!(started.load(Ordering::SeqCst));
    // The release is spawned from the drop; give it a turn.
    for _ in 0..50 {
        if !held(provider.as_ref(), "dropped").await {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("a dropped call must release its lease");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_bodies_block_the_caller_and_see_the_context() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let executor = LockingTaskExecutor::from_shared(provider.clone());
    let config =
        LockConfiguration::new("sync", Duration::from_secs(60), Duration::from_millis(200))
            .unwrap();
    let out = executor
        .execute_sync(&config, || {
            JobContext::current().map(|c| c.lock_name().to_owned())
        })
        .unwrap();
    assert_eq!(out, LockOutcome::Executed(Some("sync".to_owned())));
    // lock_at_least_for keeps it held right after the body.
    assert!(held(provider.as_ref(), "sync").await);
    assert_eq!(
        executor.execute_sync(&config, || ()).unwrap(),
        LockOutcome::Skipped
    );
}

#[test]
fn sync_calls_on_a_current_thread_runtime_panic_with_advice() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let panic = runtime.block_on(async {
        let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
        let config = LockConfiguration::new("ct", Duration::from_secs(60), Duration::ZERO).unwrap();
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            executor.execute_sync(&config, || ())
        }))
        .unwrap_err()
    });
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    assert!(
        message.contains("current-thread") && message.contains("spawn_blocking"),
        "{message}"
    );
}

/// A provider behind a link that drops packets: calls never answer (the in-memory provider
/// underneath still takes the first acquire).
struct Dark {
    inner: InMemoryLockProvider,
    acquire_hangs: bool,
}

#[async_trait::async_trait]
impl LockProvider for Dark {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, lock_core::LockError> {
        if self.acquire_hangs {
            std::future::pending::<()>().await;
        }
        self.inner.acquire(request).await
    }
    async fn extend(
        &self,
        _: &lock_core::Lease,
        _: Duration,
    ) -> Result<bool, lock_core::LockError> {
        std::future::pending().await
    }
    async fn release(
        &self,
        _: &lock_core::Lease,
        _: Duration,
    ) -> Result<bool, lock_core::LockError> {
        std::future::pending().await
    }
    async fn list_locks(&self) -> Result<Vec<lock_core::LockRecord>, lock_core::LockError> {
        self.inner.list_locks().await
    }
    async fn force_unlock(
        &self,
        name: &str,
    ) -> Result<Option<lock_core::LockRecord>, lock_core::LockError> {
        self.inner.force_unlock(name).await
    }
    fn describe(&self) -> String {
        "a provider behind a dark link".into()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_extend_cancels_before_the_lease_can_end() {
    let provider = Dark {
        inner: InMemoryLockProvider::new(),
        acquire_hangs: false,
    };
    let executor =
        LockingTaskExecutor::new(provider).with_operation_timeout(Duration::from_secs(2));
    let config = LockConfiguration::new("dark", Duration::from_millis(600), Duration::ZERO)
        .unwrap()
        .with_keep_alive(true);
    let began = tokio::time::Instant::now();
    let cancelled_after = executor
        .execute_with_lock(&config, async {
            let ctx = JobContext::current().unwrap();
            tokio::time::timeout(Duration::from_secs(5), ctx.cancelled())
                .await
                .expect("cancelled() must resolve");
            began.elapsed()
        })
        .await
        .unwrap()
        .executed()
        .unwrap();
    // The first extend goes out at 300 ms and is given until the lease's end (600 ms), not the
    // 2 s operation timeout: the body hears of it before another instance could take over.
    assert!(
        cancelled_after < Duration::from_millis(900),
        "cancelled after {cancelled_after:?}"
    );
    assert!(
        cancelled_after >= Duration::from_millis(550),
        "cancelled too early: {cancelled_after:?}"
    );
}

#[tokio::test]
async fn an_unanswered_acquire_times_out_as_an_error() {
    let provider = Dark {
        inner: InMemoryLockProvider::new(),
        acquire_hangs: true,
    };
    let executor =
        LockingTaskExecutor::new(provider).with_operation_timeout(Duration::from_millis(200));
    let config =
        LockConfiguration::new("dark-acquire", Duration::from_secs(60), Duration::ZERO).unwrap();
    let error = executor
        .execute_with_lock(&config, async { unreachable!("never runs") })
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            lock_core::LockError::Timeout {
                operation: "acquire",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("did not answer within"),
        "{error}"
    );
}
