//! A sqlx provider and the driver-specific provider of the same database (deadpool-postgres,
//! mysql_async, rusqlite) on ONE table: each
//! reads the other's rows, they exclude each other, fences continue across them and a slot run
//! by one is not run again by the other. Both run the provider kit's statements, so this is what
//! a service migrating from deadpool-postgres or mysql_async to sqlx goes through, instance by
//! instance.

mod common;

use std::time::Duration;

use chrono::TimeDelta;
use lock_core::testkit::{request, unique_name};
use lock_core::{AcquireOutcome, FireSlot, Lease, LockProvider, RefusalReason};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_postgres::PostgresLockProvider;
use lock_provider_sqlite::SqliteLockProvider;

const LEASE: Duration = Duration::from_secs(60);

async fn granted(provider: &dyn LockProvider, req: &lock_core::LockRequest, who: &str) -> Lease {
    match provider.acquire(req).await.expect("acquire") {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("{who} ({}) was refused: {refused:?}", provider.describe()),
    }
}

async fn refused(provider: &dyn LockProvider, req: &lock_core::LockRequest) -> RefusalReason {
    match provider.acquire(req).await.expect("acquire") {
        AcquireOutcome::Refused(refusal) => refusal.reason,
        AcquireOutcome::Acquired(lease) => panic!(
            "{} took {:?} (fence {}) while the other provider should hold it or have run the slot",
            provider.describe(),
            lease.name(),
            lease.fence()
        ),
    }
}

/// `first` takes the lock, `second` is kept out, reads the row and takes over after the
/// release with the next fence; the slot `first` ran is refused to `second`.
async fn exclude_each_other(first: &dyn LockProvider, second: &dyn LockProvider) {
    let name = unique_name("shared");
    let now = first.database_time().await.expect("database time");
    let slot = FireSlot::new(now - TimeDelta::minutes(2));
    let next_slot = FireSlot::new(now - TimeDelta::minutes(1));

    let lease = granted(first, &request(&name, "first", LEASE, Some(slot)), "first").await;
    assert!(lease.fence() >= 1, "a full table hands out fences from 1");
    assert_eq!(
        refused(second, &request(&name, "second", LEASE, None)).await,
        RefusalReason::Held
    );
    let row = second
        .list_locks()
        .await
        .expect("list")
        .into_iter()
        .find(|r| *r.name == *name)
        .expect("the other provider's row is listed");
    assert_eq!(row.locked_by, "first");
    assert_eq!(row.fence, lease.fence());
    assert!(row.held);
    assert_eq!(row.last_fire, Some(slot.instant()));

    assert!(
        first
            .release(&lease, Duration::ZERO)
            .await
            .expect("release")
    );
    // Free now, but that slot has run: once per slot holds across the two providers.
    assert_eq!(
        refused(second, &request(&name, "second", LEASE, Some(slot))).await,
        RefusalReason::SlotAlreadyRun
    );
    let taken = granted(
        second,
        &request(&name, "second", LEASE, Some(next_slot)),
        "second",
    )
    .await;
    assert_eq!(
        taken.fence(),
        lease.fence() + 1,
        "fences continue across providers"
    );
    assert_eq!(
        refused(first, &request(&name, "first", LEASE, None)).await,
        RefusalReason::Held
    );
    // The first holder's stale lease can neither extend nor release the second's.
    assert!(!first.extend(&lease, LEASE).await.expect("extend"));
    assert!(
        !first
            .release(&lease, Duration::ZERO)
            .await
            .expect("release")
    );
    assert!(
        second
            .release(&taken, Duration::ZERO)
            .await
            .expect("release")
    );
    let record = first
        .force_unlock(&name)
        .await
        .expect("unlock")
        .expect("row exists");
    assert_eq!(record.locked_by, "second");
    assert_eq!(record.fence, taken.fence());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sqlx_and_deadpool_share_one_table() {
    let table = common::unique_table("locksqlx_pg_shared");
    let _drop = common::drop_postgres_table(&table);
    // sqlx creates the table; the deadpool provider finds it complete.
    let Some(sqlx) = common::pg_provider(&table).await else {
        return;
    };
    let deadpool = PostgresLockProvider::connect(&common::postgres_url())
        .await
        .expect("connect")
        .with_table(&table)
        .expect("valid table");
    assert_eq!(
        deadpool.check_schema().await.expect("check_schema"),
        lock_provider_postgres::TableShape::Full
    );
    assert_eq!(deadpool.create_table_sql(), sqlx.create_table_sql());
    exclude_each_other(&sqlx, &deadpool).await;
    exclude_each_other(&deadpool, &sqlx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_sqlx_and_mysql_async_share_one_table() {
    let table = common::unique_table("locksqlx_my_shared");
    let _drop = common::drop_mysql_table(&table);
    let Some(sqlx) = common::mysql_provider(&table).await else {
        return;
    };
    let mysql_async = MySqlLockProvider::connect(&common::mysql_url())
        .await
        .expect("connect")
        .with_table(&table)
        .expect("valid table");
    mysql_async
        .ensure_schema()
        .await
        .expect("ensure_schema on the sqlx-made table");
    assert_eq!(mysql_async.create_table_sql(), sqlx.create_table_sql());
    exclude_each_other(&sqlx, &mysql_async).await;
    exclude_each_other(&mysql_async, &sqlx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sqlx_and_rusqlite_share_one_file() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("locks.db");
    // rusqlite creates the table this time; sqlx finds it complete.
    let rusqlite = SqliteLockProvider::open(&file)
        .expect("open")
        .with_table("shared_locks")
        .expect("valid table");
    rusqlite.ensure_schema().await.expect("ensure_schema");
    let sqlx = lock_provider_sqlx::SqlxLockProvider::sqlite(common::sqlite_pool(&file).await)
        .with_table("shared_locks")
        .expect("valid table");
    sqlx.ensure_schema()
        .await
        .expect("ensure_schema on the rusqlite-made table");
    assert_eq!(rusqlite.create_table_sql(), sqlx.create_table_sql());
    exclude_each_other(&sqlx, &rusqlite).await;
    exclude_each_other(&rusqlite, &sqlx).await;
}
