//! What an acquire writes: nothing when it loses, a fresh row when the row was deleted by hand.

mod common;

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use lock_core::{AcquireOutcome, FireSlot, LockProvider, RefusalReason, testkit};
use lock_provider_postgres::PostgresLockProvider;

/// The row's physical identity: a write of any kind (even one that changes no value) gives the
/// row a new `xmin` and usually a new `ctid`.
async fn row_version(client: &tokio_postgres::Client, table: &str, name: &str) -> (String, String) {
    let row = client
        .query_one(
            &format!("SELECT xmin::text, ctid::text FROM {table} WHERE name = $1"),
            &[&name],
        )
        .await
        .expect("row exists");
    (row.get(0), row.get(1))
}

/// Tuple counters of one table, as the statistics system sees them. Backends report their
/// counters lazily (up to seconds later), but always when they exit, so callers close the
/// provider's pool first with [`close`].
async fn tuple_counters(client: &tokio_postgres::Client, table: &str) -> (i64, i64, i64, i64) {
    let row = client
        .query_one(
            "SELECT n_tup_ins, n_tup_upd, n_tup_del, n_tup_hot_upd \
             FROM pg_stat_user_tables WHERE relname = $1",
            &[&table],
        )
        .await
        .expect("table statistics");
    (row.get(0), row.get(1), row.get(2), row.get(3))
}

/// Closes a one-connection provider's pool and waits until its backend has exited, which is
/// when the backend hands its statistics over.
async fn close(provider: PostgresLockProvider, client: &tokio_postgres::Client) {
    let pid: i32 = {
        let conn = provider.pool().get().await.unwrap();
        conn.query_one("SELECT pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0)
    };
    assert_eq!(
        provider.pool().status().size,
        1,
        "expected a one-connection pool"
    );
    provider.pool().close();
    drop(provider);
    for _ in 0..100 {
        let alive = client
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                &[&pid],
            )
            .await
            .unwrap()
            .get::<_, i64>(0);
        if alive == 0 {
            // The exit path reports statistics just before the backend leaves the list.
            tokio::time::sleep(Duration::from_millis(100)).await;
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("backend {pid} did not exit");
}

/// A provider on `table` whose pool holds exactly one connection.
async fn single_connection_provider(table: &str) -> Option<PostgresLockProvider> {
    let pool = common::pool().await?;
    pool.resize(1);
    Some(PostgresLockProvider::new(pool).with_table(table).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_acquire_writes_nothing() {
    let table = common::unique_table("nowrite");
    let _guard = common::drop_table(&table);
    let Some(setup) = common::provider(&table).await else {
        return;
    };
    let client = common::raw_client().await;
    let name = testkit::unique_name("nowrite");
    let slot = FireSlot::new(Utc::now());
    let holder = testkit::request(&name, "instance-a", Duration::from_secs(300), Some(slot));
    let AcquireOutcome::Acquired(lease) = setup.acquire(&holder).await.unwrap() else {
        panic!("first acquire refused");
    };
    setup.pool().close();
    drop(setup);

    // Baseline: the grant's statistics are in once some backend has exited after it; a
    // throw-away provider's exit makes sure the counters are settled before we read them.
    let Some(settle) = single_connection_provider(&table).await else {
        return;
    };
    settle.list_locks().await.unwrap();
    close(settle, &client).await;
    let version = row_version(&client, &table, &name).await;
    let counters = tuple_counters(&client, &table).await;
    assert_eq!(counters.0, 1, "the grant's insert is not counted yet");

    let Some(provider) = single_connection_provider(&table).await else {
        return;
    };
    let holder_slot = slot.instant();
    let later = Some(FireSlot::new(slot.instant() + TimeDelta::seconds(1)));
    for i in 0..50 {
        let owner = format!("instance-{i}");
        for slot in [None, Some(slot), later] {
            let loser = testkit::request(&name, &owner, Duration::from_secs(300), slot);
            match provider.acquire(&loser).await.unwrap() {
                AcquireOutcome::Refused(refusal) => {
                    assert_eq!(refusal.reason, RefusalReason::Held);
                    assert_eq!(refusal.locked_by.as_deref(), Some("instance-a"));
                    // The row's last slot is the holder's, whatever the loser asked for.
                    assert_eq!(refusal.last_fire, Some(holder_slot));
                    assert!(refusal.lock_until.unwrap() > Utc::now());
                }
                AcquireOutcome::Acquired(_) => panic!("a held lock was granted"),
            }
        }
    }
    // The holder's own extra attempt loses too, and writes nothing either.
    assert!(matches!(
        provider.acquire(&holder).await.unwrap(),
        AcquireOutcome::Refused(_)
    ));
    close(provider, &client).await;

    assert_eq!(
        row_version(&client, &table, &name).await,
        version,
        "a losing acquire wrote a new row version"
    );
    assert_eq!(
        tuple_counters(&client, &table).await,
        counters,
        "losing acquires inserted, updated or deleted tuples"
    );

    // Control: the counters do see a write (the release), so the check above can fail.
    let Some(provider) = single_connection_provider(&table).await else {
        return;
    };
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    close(provider, &client).await;
    let after = tuple_counters(&client, &table).await;
    assert_eq!(
        after.1,
        counters.1 + 1,
        "the release's update is not counted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slot_refusal_says_so() {
    let Some(provider) = common::provider(common::CONFORMANCE_TABLE).await else {
        return;
    };
    let name = testkit::unique_name("slot-reason");
    let slot = Some(FireSlot::new(Utc::now()));
    let first = testkit::request(&name, "instance-a", Duration::from_secs(300), slot);
    let AcquireOutcome::Acquired(lease) = provider.acquire(&first).await.unwrap() else {
        panic!("first acquire refused");
    };
    provider.release(&lease, Duration::ZERO).await.unwrap();
    let again = testkit::request(&name, "instance-b", Duration::from_secs(300), slot);
    let AcquireOutcome::Refused(refusal) = provider.acquire(&again).await.unwrap() else {
        panic!("the same slot ran twice");
    };
    assert_eq!(refusal.reason, RefusalReason::SlotAlreadyRun);
    assert_eq!(refusal.last_fire, slot.map(FireSlot::instant));
    assert_eq!(refusal.locked_by.as_deref(), Some("instance-a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn row_deleted_by_hand_is_recreated_at_the_next_fire() {
    let Some(provider) = common::provider(common::CONFORMANCE_TABLE).await else {
        return;
    };
    let client = common::raw_client().await;
    let name = testkit::unique_name("deleted");
    let base = Utc::now();
    let request = |owner: &str, s: i64| {
        testkit::request(
            &name,
            owner,
            Duration::from_secs(300),
            Some(FireSlot::new(base + TimeDelta::seconds(s))),
        )
    };
    let AcquireOutcome::Acquired(lease) = provider.acquire(&request("a", 0)).await.unwrap() else {
        panic!("first acquire refused");
    };
    provider.release(&lease, Duration::ZERO).await.unwrap();
    let AcquireOutcome::Acquired(lease) = provider.acquire(&request("a", 1)).await.unwrap() else {
        panic!("second acquire refused");
    };
    assert_eq!(lease.fence(), 2);

    // An operator deletes the row while the lock is held ...
    let deleted = client
        .execute(
            &format!("DELETE FROM {} WHERE name = $1", common::CONFORMANCE_TABLE),
            &[&&*name],
        )
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    // ... the old holder's release finds nothing to release ...
    assert!(!provider.release(&lease, Duration::ZERO).await.unwrap());
    // ... and the very next fire recreates the row and runs, with no restart.
    let AcquireOutcome::Acquired(lease) = provider.acquire(&request("b", 2)).await.unwrap() else {
        panic!("the next fire after a manual delete was refused");
    };
    assert_eq!(
        lease.fence(),
        1,
        "a recreated row starts a new fence sequence"
    );
    let record = provider
        .list_locks()
        .await
        .unwrap()
        .into_iter()
        .find(|r| *r.name == *name)
        .expect("row recreated");
    assert_eq!(record.locked_by, "b");
    assert_eq!(
        record.last_fire,
        Some(FireSlot::new(base + TimeDelta::seconds(2)).instant())
    );
    provider.release(&lease, Duration::ZERO).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_are_prepared_once_per_connection_and_plans_reused() {
    let Some(provider) = single_connection_provider(common::CONFORMANCE_TABLE).await else {
        return;
    };
    provider.ensure_schema().await.unwrap();
    let sql = provider.statements().await.unwrap();
    let name = testkit::unique_name("prepared");
    let a = testkit::request(&name, "a", Duration::from_secs(60), None);
    let b = testkit::request(&name, "b", Duration::from_secs(60), None);
    for _ in 0..20 {
        let AcquireOutcome::Acquired(lease) = provider.acquire(&a).await.unwrap() else {
            panic!("refused");
        };
        assert!(matches!(
            provider.acquire(&b).await.unwrap(),
            AcquireOutcome::Refused(_)
        ));
        assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    }
    // The pool's only connection: its session's prepared statements.
    let conn = provider.pool().get().await.unwrap();
    let prepared = conn
        .query(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements",
            &[],
        )
        .await
        .unwrap();
    let count = |text: &str| -> (usize, i64, i64) {
        let matching: Vec<_> = prepared
            .iter()
            .filter(|r| r.get::<_, String>(0) == text)
            .collect();
        let generic = matching.iter().map(|r| r.get::<_, i64>(1)).sum();
        let custom = matching.iter().map(|r| r.get::<_, i64>(2)).sum();
        (matching.len(), generic, custom)
    };
    let (acquires, generic, custom) = count(&sql.acquire);
    assert_eq!(
        acquires, 1,
        "acquire prepared {acquires} times on one connection"
    );
    assert!(
        generic + custom >= 40,
        "acquire executed {} times",
        generic + custom
    );
    // PostgreSQL plans the first few executions for their parameters, then reuses one plan.
    assert!(
        generic >= 30,
        "acquire re-planned: {generic} generic, {custom} custom plans"
    );
    let (releases, ..) = count(&sql.release);
    assert_eq!(releases, 1, "release prepared {releases} times");
    // The create statement ran once (the name's first fire), prepared once.
    assert_eq!(count(&sql.create).0, 1);
}
