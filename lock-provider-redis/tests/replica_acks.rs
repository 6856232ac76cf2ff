//! Replica acknowledgements (`with_replica_acks`): a body never runs on a grant no replica
//! acknowledged, also when `WAIT` itself fails and when the grant is found by reading the row
//! back after the acquire's reply was lost. Each test runs a private `redis-server` without
//! replicas, so `WAIT 1` can never be satisfied (or is not allowed at all).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::{
    AcquireOutcome, Lease, LockConfiguration, LockError, LockProvider, LockRecord, LockRequest,
    LockingTaskExecutor, testkit,
};
use lock_provider_redis::{RedisLockConfig, RedisLockProvider};
use test_support::redis_server::{Durability, PrivateRedis};

/// Far shorter than the lease, so a lock left held would still be held when it is read.
const WAIT_FOR: Duration = Duration::from_millis(50);

async fn acked(url: &str, prefix: &str) -> RedisLockProvider {
    let config = RedisLockConfig::default()
        .with_key_prefix(prefix)
        .with_replica_acks(1, WAIT_FOR);
    RedisLockProvider::connect_with_config(url, config)
        .await
        .expect("connect")
}

/// Runs a body under `name` and says whether it ran; the error (if any) is returned too.
async fn body_ran(executor: &LockingTaskExecutor, name: &str) -> (bool, Option<LockError>) {
    let config =
        LockConfiguration::new(name, Duration::from_secs(300), Duration::ZERO).expect("config");
    let ran = AtomicBool::new(false);
    let outcome = executor
        .execute_with_lock(&config, async { ran.store(true, Ordering::SeqCst) })
        .await;
    (ran.load(Ordering::SeqCst), outcome.err())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_whose_wait_fails_is_released_and_its_body_does_not_run() {
    let Some(redis) = PrivateRedis::start(Durability::Nothing) else {
        return;
    };
    // A user that may do everything but WAIT: every WAIT fails (NOPERM) after the grant.
    let reply = redis
        .command("ACL SETUSER nowait on >pw ~* &* +@all -wait")
        .expect("ACL SETUSER");
    assert!(reply.starts_with("+OK"), "{reply}");
    let url = format!("redis://nowait:pw@127.0.0.1:{}", redis.port());
    let provider = acked(&url, "acks").await;
    let executor = LockingTaskExecutor::new(provider.clone());
    let name = testkit::unique_name("wait_fails");

    let (ran, error) = body_ran(&executor, &name).await;
    assert!(!ran, "the body ran on a grant no replica acknowledged");
    let error = error.expect("the failed WAIT is reported");
    let text = error.to_string() + &test_support::skip::chain(&error);
    assert!(text.contains("WAIT failed"), "{text}");
    let record = provider.read_lock(&name).await.unwrap().expect("the row");
    assert!(!record.held, "the grant was not released: {record:?}");
}

/// An acquire whose reply is lost: the grant commits (through a provider without replica
/// acknowledgements, so nothing waits for it) but the caller sees an error, and finds the
/// grant by reading the row back through the provider that asks for acknowledgements.
struct ReplyLost {
    writer: RedisLockProvider,
    reader: RedisLockProvider,
}

#[async_trait]
impl LockProvider for ReplyLost {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        let granted = self.writer.acquire(request).await?;
        assert!(
            matches!(granted, AcquireOutcome::Acquired(_)),
            "{granted:?}"
        );
        Err(LockError::provider(
            "acquire",
            &*request.name,
            self.describe(),
            "the connection dropped before the reply",
        ))
    }
    async fn extend(&self, lease: &Lease, at_most: Duration) -> Result<bool, LockError> {
        self.reader.extend(lease, at_most).await
    }
    async fn release(&self, lease: &Lease, at_least: Duration) -> Result<bool, LockError> {
        self.reader.release(lease, at_least).await
    }
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.reader.list_locks().await
    }
    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.reader.read_lock(name).await
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.reader.force_unlock(name).await
    }
    async fn database_time(&self) -> Result<chrono::DateTime<chrono::Utc>, LockError> {
        self.reader.database_time().await
    }
    async fn confirm_grant(&self, lease: &Lease) -> Result<(), LockError> {
        self.reader.confirm_grant(lease).await
    }
    fn describe(&self) -> String {
        format!("{} (replies lost)", self.reader.describe())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_adopted_from_a_read_back_must_be_acknowledged_too() {
    let Some(redis) = PrivateRedis::start(Durability::Nothing) else {
        return;
    };
    let writer = RedisLockProvider::connect_with_config(
        &redis.url(),
        RedisLockConfig::default().with_key_prefix("acks"),
    )
    .await
    .expect("connect");
    let reader = acked(&redis.url(), "acks").await;
    let executor = LockingTaskExecutor::new(ReplyLost {
        writer,
        reader: reader.clone(),
    });
    let name = testkit::unique_name("read_back");

    let (ran, error) = body_ran(&executor, &name).await;
    assert!(
        !ran,
        "the body ran on an adopted grant no replica acknowledged"
    );
    let error = error.expect("the unacknowledged grant is reported");
    let text = error.to_string() + &test_support::skip::chain(&error);
    assert!(
        text.contains("acknowledged by 0 of the 1 replicas"),
        "{text}"
    );
    let record = reader.read_lock(&name).await.unwrap().expect("the row");
    assert!(!record.held, "the grant was not released: {record:?}");
    assert_eq!(record.fence, 1, "one grant, the lost one");
}
