//! ShedLock interop: Java services running ShedLock and Rust services running this provider can
//! share one lock table during a migration. ShedLock's own MySQL statements (its database-time
//! variant, `MySqlServerTimeStatementsSource`, written out below) run against the same table as
//! the provider, and neither side can take a lock the other holds.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lock_core::{AcquireOutcome, FireSlot, Lease, LockProvider, RefusalReason, testkit};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::{Conn, prelude::Queryable};

/// ShedLock's documented DDL for MySQL.
fn shedlock_ddl(table: &str) -> String {
    format!(
        "CREATE TABLE {table}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, \
         locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
         locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
    )
}

/// ShedLock's JDBC provider with `usingDbTime()` on MySQL: the statements of
/// `MySqlServerTimeStatementsSource`, with its named parameters as `?`, and the flow of its
/// `StorageBasedLockProvider` (insert the row if it is new, else update it if expired).
struct ShedLock {
    conn: Conn,
    table: String,
    locked_by: &'static str,
}

impl ShedLock {
    async fn new(table: &str, locked_by: &'static str) -> ShedLock {
        let mut conn = common::admin().await.expect("server reachable");
        // ShedLock's connections must read the TIMESTAMP columns in UTC too (see the README).
        conn.query_drop("SET time_zone = '+00:00'")
            .await
            .expect("time zone");
        ShedLock {
            conn,
            table: table.to_owned(),
            locked_by,
        }
    }

    async fn lock(&mut self, name: &str, at_most: Duration) -> bool {
        let micros = at_most.as_micros() as u64;
        let insert = format!(
            "INSERT IGNORE INTO {}(name, lock_until, locked_at, locked_by) \
             VALUES(?, TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)), UTC_TIMESTAMP(3), ?)",
            self.table
        );
        self.conn
            .exec_drop(insert, (name, micros, self.locked_by))
            .await
            .expect("ShedLock insert");
        if self.conn.affected_rows() == 1 {
            return true;
        }
        let update = format!(
            "UPDATE {} SET lock_until = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)), \
             locked_at = UTC_TIMESTAMP(3), locked_by = ? \
             WHERE name = ? AND lock_until <= UTC_TIMESTAMP(3)",
            self.table
        );
        self.conn
            .exec_drop(update, (micros, self.locked_by, name))
            .await
            .expect("ShedLock update");
        self.conn.affected_rows() == 1
    }

    async fn unlock(&mut self, name: &str, at_least: Duration) {
        let micros = at_least.as_micros() as u64;
        let unlock = format!(
            "UPDATE {} SET lock_until = IF (TIMESTAMPADD(MICROSECOND, ?, locked_at) > \
             UTC_TIMESTAMP(3) , TIMESTAMPADD(MICROSECOND, ?, locked_at), UTC_TIMESTAMP(3)) \
             WHERE name = ? AND locked_by = ?",
            self.table
        );
        self.conn
            .exec_drop(unlock, (micros, micros, name, self.locked_by))
            .await
            .expect("ShedLock unlock");
    }

    async fn extend(&mut self, name: &str, at_most: Duration) -> bool {
        let extend = format!(
            "UPDATE {} SET lock_until = TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)) \
             WHERE name = ? AND locked_by = ? AND lock_until > UTC_TIMESTAMP(3)",
            self.table
        );
        self.conn
            .exec_drop(extend, (at_most.as_micros() as u64, name, self.locked_by))
            .await
            .expect("ShedLock extend");
        self.conn.affected_rows() == 1
    }
}

const LONG: Duration = Duration::from_secs(300);

fn name_of(lease: &Lease) -> Arc<str> {
    lease.name().into()
}

async fn take(provider: &MySqlLockProvider, name: &Arc<str>, owner: &str) -> Lease {
    match provider
        .acquire(&testkit::request(name, owner, LONG, None))
        .await
        .expect("acquire")
    {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("the provider was refused {name:?}: {refused:?}"),
    }
}

async fn refused(provider: &MySqlLockProvider, name: &Arc<str>) -> RefusalReason {
    match provider
        .acquire(&testkit::request(name, "rust-b", LONG, None))
        .await
        .expect("acquire")
    {
        AcquireOutcome::Refused(refusal) => refusal.reason,
        acquired => panic!("the provider took {name:?}, held by ShedLock: {acquired:?}"),
    }
}

/// Both directions of exclusion, plus ShedLock's extend, on one table.
async fn exclusion_both_ways(provider: &MySqlLockProvider, table: &str) -> Lease {
    let mut java = ShedLock::new(table, "java-host").await;

    // The provider holds a lock whose row it created: ShedLock cannot take it.
    let name = testkit::unique_name("interop");
    let lease = take(provider, &name, "rust-a").await;
    assert!(
        !java.lock(&name, LONG).await,
        "ShedLock took a lock the provider holds"
    );
    assert!(
        !java.extend(&name, LONG).await,
        "ShedLock extended a lock the provider holds"
    );
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());

    // Released: ShedLock takes it, and now the provider cannot.
    assert!(
        java.lock(&name, LONG).await,
        "ShedLock could not take a released lock"
    );
    assert_eq!(refused(provider, &name).await, RefusalReason::Held);
    // A longer lease than the one just taken: MySQL counts only rows whose values change, and
    // an extend in the same millisecond with the same duration would change nothing.
    assert!(java.extend(&name, LONG + Duration::from_secs(60)).await);
    java.unlock(&name, Duration::ZERO).await;
    let lease = take(provider, &name, "rust-b").await;
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());

    // A row ShedLock created (its INSERT IGNORE, the extension columns at their defaults).
    let fresh = testkit::unique_name("interop-java-row");
    assert!(java.lock(&fresh, LONG).await);
    refused(provider, &fresh).await;
    java.unlock(&fresh, Duration::ZERO).await;
    take(provider, &fresh, "rust-a").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shedlock_ddl_table_as_is_then_migrated() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let table = common::unique_table("interop_shedlock_ddl");
    let _drop = common::drop_table(&table);
    admin.query_drop(shedlock_ddl(&table)).await.expect("DDL");

    // As ShedLock made it: four TIMESTAMP columns, no fencing.
    let provider = MySqlLockProvider::new(common::pool(4))
        .with_table(&table)
        .expect("valid table");
    let lease = exclusion_both_ways(&provider, &table).await;
    assert_eq!(lease.fence(), 0, "a four-column table has no fence");
    let records = provider.list_locks().await.expect("list_locks");
    assert!(
        records
            .iter()
            .all(|r| r.fence == 0 && r.last_fire.is_none())
    );
    assert!(records.iter().any(|r| r.held && r.locked_by == "rust-a"));
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());

    // Another instance that knows the table as ShedLock made it.
    let other = MySqlLockProvider::new(common::pool(2))
        .with_table(&table)
        .expect("valid table");
    let other_lease = take(&other, &testkit::unique_name("interop-other"), "rust-c").await;
    assert_eq!(other_lease.fence(), 0);

    // Migrated: fences and slots work, and ShedLock's statements still do.
    provider.ensure_schema().await.expect("migration");
    // The other instance goes on working on the migrated table until it inspects it again,
    // and its lease still excludes everyone.
    assert!(other.release(&other_lease, Duration::ZERO).await.unwrap());
    let other_lease = take(&other, &name_of(&other_lease), "rust-c").await;
    assert_eq!(
        refused(&provider, &name_of(&other_lease)).await,
        RefusalReason::Held
    );
    assert!(other.release(&other_lease, Duration::ZERO).await.unwrap());
    let columns: Vec<String> = admin
        .exec(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (&table,),
        )
        .await
        .expect("columns");
    assert_eq!(
        columns,
        [
            "name",
            "lock_until",
            "locked_at",
            "locked_by",
            "fence",
            "last_fire"
        ]
    );
    let lease = exclusion_both_ways(&provider, &table).await;
    assert_eq!(
        lease.fence(),
        1,
        "the first grant of a row ShedLock created has fence 1"
    );
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    let name: Arc<str> = lease.name().into();
    let slot = FireSlot::new(chrono::Utc::now());
    let lease = match provider
        .acquire(&testkit::request(&name, "rust-a", LONG, Some(slot)))
        .await
        .unwrap()
    {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("{refused:?}"),
    };
    assert_eq!(lease.fence(), 2);
    provider.release(&lease, Duration::ZERO).await.unwrap();
    assert_eq!(
        match provider
            .acquire(&testkit::request(&name, "rust-b", LONG, Some(slot)))
            .await
            .unwrap()
        {
            AcquireOutcome::Refused(refusal) => refusal.reason,
            acquired => panic!("a slot ran twice: {acquired:?}"),
        },
        RefusalReason::SlotAlreadyRun
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shedlock_statements_on_our_table() {
    let Some(_) = common::admin().await else {
        return;
    };
    let table = common::unique_table("interop_ours");
    let _drop = common::drop_table(&table);
    let provider = MySqlLockProvider::new(common::pool(4))
        .with_table(&table)
        .expect("valid table");
    provider.ensure_schema().await.expect("create");
    let lease = exclusion_both_ways(&provider, &table).await;
    assert_eq!(lease.fence(), 1);
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
}
