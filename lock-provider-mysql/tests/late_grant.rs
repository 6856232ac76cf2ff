//! A real late grant on MySQL/MariaDB: the acquire of a scheduled fire waits for a row lock
//! held by another session until after its sender gave up; decided then (the update clause
//! reads `SYSDATE()`, the time of the decision, not the statement's start), it is refused and
//! leaves no lease behind.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use lock_core::{
    FireKind, FireSlot, LockConfiguration, LockError, LockOutcome, LockProvider,
    LockingTaskExecutor, testkit,
};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::prelude::Queryable;
use tokio::time::Instant;

const OPERATION_TIMEOUT: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_decided_after_its_sender_gave_up_leaves_no_lease() {
    let Some(mut blocker) = common::admin().await else {
        return;
    };
    // One connection: every call of the provider waits for the one before it, so the read
    // below is answered only after the late acquire was decided.
    let provider = MySqlLockProvider::new(common::pool(1))
        .with_table(common::CONFORMANCE_TABLE)
        .expect("valid table name");
    provider.ensure_schema().await.expect("ensure_schema");
    let provider = Arc::new(provider);
    let name = testkit::unique_name("my-late-grant");
    let executor = LockingTaskExecutor::from_shared(provider.clone())
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

    // Another session locks the row and keeps its transaction open: the acquire waits.
    blocker
        .query_drop("START TRANSACTION")
        .await
        .expect("START TRANSACTION");
    blocker
        .exec_drop(
            format!(
                "SELECT name FROM {} WHERE name = ? FOR UPDATE",
                common::CONFORMANCE_TABLE
            ),
            (name.to_string(),),
        )
        .await
        .expect("hold the row");

    // A scheduled fire of the slot due now: it gives up after the operation timeout.
    let db_now = provider.database_time().await.expect("database_time");
    let slot = FireSlot::new(db_now);
    let late = executor
        .execute_fire(
            &config,
            Some(slot),
            FireKind::Scheduled,
            Some(Instant::now()),
            None,
            async {},
        )
        .await;
    assert!(
        matches!(late, Err(LockError::Timeout { .. })),
        "the waiting acquire must time out, got {late:?}"
    );
    // Past give_up_at by the server's clock (the slot was read before the fire's due instant);
    // the extra 200 ms only keep the commit clear of it.
    tokio::time::sleep(Duration::from_millis(200)).await;
    blocker.query_drop("COMMIT").await.expect("COMMIT");

    // Answered on the provider's one connection after the late acquire.
    let after = provider.read_lock(&name).await.expect("read").expect("row");
    assert!(
        !after.held && after.last_fire == before.last_fire && after.fence == before.fence,
        "an acquire decided after its sender gave up left a lease or spent the slot: \
         before {before:?}, after {after:?}"
    );

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
