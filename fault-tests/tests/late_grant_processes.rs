//! A failed acquire is reported within the operation timeout, its read-back included: the
//! acquire and the read-back that looks for its lost grant share one deadline, so a dark link
//! (packets dropped, nothing closed) fails a fire after one operation timeout, not two.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::proxy::{Proxy, proxied, upstream_of};
use fault_tests::{Backend, SchemaAction};
use lock_core::{FireSlot, LockConfiguration, LockError, LockProvider, LockingTaskExecutor};

const OPERATION_TIMEOUT: Duration = Duration::from_secs(1);
/// Timer and scheduling slack on a loaded two-core machine: far less than the second
/// operation timeout a read-back with a deadline of its own would add.
const MARGIN: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_through_a_dark_link_fails_within_the_operation_timeout() {
    let url = common::postgres_url();
    let upstream = upstream_of(&url, 5432).await;
    if let Err(e) = tokio::net::TcpStream::connect(upstream).await {
        common::unreachable("postgres", &url, &e);
        return;
    }
    let proxy = Proxy::start(upstream).await;
    let provider = Backend::Postgres(proxied(&url, proxy.port()))
        .lock_provider("ft_late_grant", SchemaAction::Create)
        .await
        .expect("a provider through the proxy");
    let provider: Arc<dyn LockProvider> = provider;
    let executor =
        LockingTaskExecutor::from_shared(provider).with_operation_timeout(OPERATION_TIMEOUT);
    let name = format!("dark-acquire-{:08x}", rand_suffix());
    let config =
        LockConfiguration::new(name, Duration::from_secs(60), Duration::ZERO).expect("valid");
    // A first fire while the link is up: the pool holds an open connection.
    let slot = FireSlot::new(chrono::Utc::now() - chrono::TimeDelta::seconds(10));
    let first = executor
        .execute_in_slot(&config, Some(slot), async {})
        .await;
    assert!(
        matches!(&first, Ok(outcome) if outcome.is_executed()),
        "the first fire runs while the link is up: {first:?}"
    );

    proxy.darken();
    let next = FireSlot::new(slot.instant() + chrono::TimeDelta::seconds(1));
    let started = Instant::now();
    let dark = executor
        .execute_in_slot(&config, Some(next), async {})
        .await;
    let elapsed = started.elapsed();
    assert!(
        matches!(dark, Err(LockError::Timeout { .. })),
        "the acquire through a dark link must fail with a timeout, got {dark:?}"
    );
    assert!(
        elapsed < OPERATION_TIMEOUT + MARGIN,
        "the failed acquire was reported after {elapsed:?}, beyond the {OPERATION_TIMEOUT:?} \
         operation timeout (+ {MARGIN:?}): its read-back must share the acquire's deadline"
    );
    proxy.heal();
}

/// A name of this run's own: the table is shared with other runs.
fn rand_suffix() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    nanos ^ std::process::id()
}
