//! A real late grant: the acquire of a scheduled fire waits in PostgreSQL for a row lock held
//! by another session until after its sender gave up; decided then, it is refused (the
//! statement compares `give_up_at` with `clock_timestamp()`, the time of the decision, not the
//! transaction's start) and leaves no lease behind.

mod common;

use std::time::Duration;

use chrono::TimeDelta;
use lock_core::{
    FireKind, FireSlot, LockConfiguration, LockError, LockOutcome, LockProvider,
    LockingTaskExecutor, testkit,
};
use lock_provider_postgres::PostgresLockProvider;
use lock_provider_postgres::deadpool_postgres::{Manager, Pool};
use lock_provider_postgres::tokio_postgres::{self, NoTls};
use tokio::time::Instant;

const OPERATION_TIMEOUT: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_decided_after_its_sender_gave_up_leaves_no_lease() {
    if common::pool().await.is_none() {
        return;
    }
    // One connection: every call of the provider queues behind the one before it on that
    // connection, so the read below is answered only after the late acquire was decided.
    let config: tokio_postgres::Config = common::url().parse().expect("LOCK_TEST_POSTGRES_URL");
    let pool = Pool::builder(Manager::new(config, NoTls))
        .max_size(1)
        .build()
        .expect("pool");
    let provider = PostgresLockProvider::new(pool)
        .with_table(common::CONFORMANCE_TABLE)
        .expect("valid table name");
    provider.ensure_schema().await.expect("ensure_schema");
    let name = testkit::unique_name("pg-late-grant");
    let executor = LockingTaskExecutor::new(provider.clone())
        .with_operation_timeout(OPERATION_TIMEOUT)
        .with_batch_window(Duration::ZERO);
    let config = LockConfiguration::new(name.clone(), Duration::from_secs(300), Duration::ZERO)
        .expect("valid");

    // The row exists, its slot S0 ran and it is free.
    let db_now = provider.database_time().await.expect("database_time");
    let s0 = FireSlot::new(db_now - TimeDelta::seconds(1));
    assert!(
        executor
            .execute_in_slot(&config, Some(s0), async {})
            .await
            .expect("first fire")
            .is_executed()
    );
    let before = provider.read_lock(&name).await.expect("read").expect("row");

    // Another session writes the row and keeps its transaction open: the acquire waits.
    let blocker = common::raw_client().await;
    blocker.batch_execute("BEGIN").await.expect("BEGIN");
    blocker
        .execute(
            &format!(
                "UPDATE {} SET locked_at = locked_at WHERE name = $1",
                common::CONFORMANCE_TABLE
            ),
            &[&&*name],
        )
        .await
        .expect("hold the row");

    // A scheduled fire of the slot due now: it gives up after the operation timeout.
    let db_now = provider.database_time().await.expect("database_time");
    let slot = FireSlot::new(db_now);
    let started = Instant::now();
    let late = executor
        .execute_fire(
            &config,
            Some(slot),
            FireKind::Scheduled,
            Some(started),
            None,
            async {},
        )
        .await;
    assert!(
        matches!(late, Err(LockError::Timeout { .. })),
        "the waiting acquire must time out, got {late:?}"
    );
    // Past give_up_at by the database's clock: the slot was read before `started`, so
    // give_up_at lies at or before the database's time at the executor's deadline; the extra
    // 200 ms only keep the commit clear of it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    blocker.batch_execute("COMMIT").await.expect("COMMIT");

    // Queued behind the late acquire on the provider's one connection.
    let after = provider.read_lock(&name).await.expect("read").expect("row");
    assert!(
        !after.held && after.last_fire == before.last_fire && after.fence == before.fence,
        "an acquire decided after its sender gave up left a lease or spent the slot: \
         before {before:?}, after {after:?}"
    );

    // The next slot is granted.
    let next = FireSlot::new(slot.instant() + TimeDelta::milliseconds(1));
    let outcome = executor
        .execute_in_slot(&config, Some(next), async {})
        .await
        .expect("next fire");
    assert!(
        matches!(outcome, LockOutcome::Executed(())),
        "the next slot must run, got {outcome:?}"
    );
}
