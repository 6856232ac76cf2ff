//! A server whose time zone has daylight saving time, at the moment a UTC wall time falls into
//! that zone's spring-forward gap: ShedLock's statements on its `TIMESTAMP(3)` table fail or
//! silently store a wrong time there (ShedLock issue 1876), the provider's leases stay exact,
//! on that table and on its own `DATETIME(3)` table, whether or not the pool pins the session
//! time zone.
//!
//! The server's global `time_zone` is set to `America/New_York` for the test (and put back
//! after), loading that zone into the server's time zone tables first if they lack it. The
//! server's clock is moved with `SET timestamp` on the pool's only connection, which every
//! `UTC_TIMESTAMP()` of that session then reads.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use lock_core::{AcquireOutcome, LockProvider, RefusalReason, testkit};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::{self, Conn, Opts, OptsBuilder, Pool, prelude::Queryable};

const ZONE: &str = "America/New_York";
/// 2026-03-08 02:30:00 UTC. New York springs forward that night from 02:00 to 03:00 local time,
/// so this UTC wall time, read as New York time, does not exist.
const IN_THE_GAP: i64 = 1_772_937_000;

/// Loads the zone into the server's time zone tables if it is not there (they are empty on a
/// fresh MariaDB). Returns `false` when that is not possible here.
async fn ensure_zone(admin: &mut Conn) -> bool {
    let loaded: Option<u64> = admin
        .exec_first(
            "SELECT COUNT(*) FROM mysql.time_zone_name WHERE Name = ?",
            (ZONE,),
        )
        .await
        .expect("time_zone_name");
    if loaded.unwrap_or(0) > 0 {
        return true;
    }
    let file = format!("/usr/share/zoneinfo/{ZONE}");
    for tool in ["mariadb-tzinfo-to-sql", "mysql_tzinfo_to_sql"] {
        let Ok(output) = std::process::Command::new(tool)
            .args([&file, ZONE])
            .output()
        else {
            continue;
        };
        assert!(
            output.status.success(),
            "{tool} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let script = String::from_utf8(output.stdout).expect("SQL text");
        let mut conn = common::admin().await.expect("server reachable");
        conn.query_drop("USE mysql").await.expect("USE mysql");
        conn.query_drop(script).await.expect("load the time zone");
        conn.disconnect().await.ok();
        return true;
    }
    false
}

/// Sets the server's global time zone for the test and puts the old one back after, even when
/// the test fails.
async fn with_global_zone<F>(admin: &mut Conn, test: F)
where
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let previous: String = admin
        .query_first("SELECT @@GLOBAL.time_zone")
        .await
        .expect("time_zone")
        .expect("a row");
    admin
        .query_drop(format!("SET GLOBAL time_zone = '{ZONE}'"))
        .await
        .expect("SET GLOBAL time_zone");
    let outcome = tokio::spawn(test).await;
    admin
        .exec_drop("SET GLOBAL time_zone = ?", (previous,))
        .await
        .expect("restore the global time_zone");
    if let Err(failure) = outcome {
        std::panic::resume_unwind(failure.into_panic());
    }
}

/// A pool of one connection whose server clock the test sets; `pinned` builds it the way the
/// provider recommends, otherwise it is a plain pool in the server's (DST) zone.
fn pool(pinned: bool) -> Pool {
    let opts = Opts::from_url(&common::url()).expect("URL");
    let base = OptsBuilder::from_opts(opts).setup(vec![format!("SET timestamp = {IN_THE_GAP}")]);
    let builder = if pinned {
        MySqlLockProvider::pool_options(base)
    } else {
        base
    };
    let pool_opts = Opts::from(builder.clone())
        .pool_opts()
        .clone()
        .with_constraints(mysql_async::PoolConstraints::new(1, 1).unwrap())
        .with_reset_connection(false);
    Pool::new(builder.pool_opts(pool_opts))
}

async fn set_clock(pool: &Pool, unix_seconds: i64) {
    let mut conn = pool.get_conn().await.expect("connection");
    conn.query_drop(format!("SET timestamp = {unix_seconds}"))
        .await
        .expect("SET timestamp");
}

fn at(unix_seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(unix_seconds, 0).unwrap()
}

/// Takes, refuses, expires and releases leases across the gap, checking every time.
async fn leases_stay_exact(pool: &Pool, table: &str) {
    let provider = MySqlLockProvider::new(pool.clone())
        .with_table(table)
        .expect("valid table");
    let minute = Duration::from_secs(60);
    set_clock(pool, IN_THE_GAP).await;
    let name: Arc<str> = testkit::unique_name("dst");
    let lease = match provider
        .acquire(&testkit::request(&name, "instance-a", minute, None))
        .await
        .expect("acquire in the gap")
    {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("{table}: {refused:?}"),
    };
    let record = provider
        .list_locks()
        .await
        .expect("list_locks")
        .into_iter()
        .find(|r| *r.name == *name)
        .expect("listed");
    assert_eq!(record.locked_at, at(IN_THE_GAP), "{table}: locked_at");
    assert_eq!(
        record.lock_until,
        at(IN_THE_GAP + 60),
        "{table}: lock_until"
    );

    let other = testkit::request(&name, "instance-b", minute, None);
    set_clock(pool, IN_THE_GAP + 59).await;
    match provider.acquire(&other).await.expect("acquire") {
        AcquireOutcome::Refused(refusal) => {
            assert_eq!(refusal.reason, RefusalReason::Held);
            assert_eq!(refusal.lock_until, Some(at(IN_THE_GAP + 60)), "{table}");
        }
        acquired => panic!("{table}: granted before the lease ended: {acquired:?}"),
    }
    set_clock(pool, IN_THE_GAP + 61).await;
    let lease_b = match provider.acquire(&other).await.expect("acquire") {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("{table}: refused after the lease ended: {refused:?}"),
    };
    assert!(
        !provider.release(&lease, Duration::ZERO).await.unwrap(),
        "{table}: the expired holder released the new lease"
    );
    // Released early with lock_at_least_for = 30 s: held until locked_at + 30 s.
    set_clock(pool, IN_THE_GAP + 70).await;
    assert!(
        provider
            .release(&lease_b, Duration::from_secs(30))
            .await
            .unwrap()
    );
    let record = provider
        .list_locks()
        .await
        .expect("list_locks")
        .into_iter()
        .find(|r| *r.name == *name)
        .expect("listed");
    assert_eq!(record.lock_until, at(IN_THE_GAP + 91), "{table}: at_least");
    set_clock(pool, IN_THE_GAP + 92).await;
    assert!(matches!(
        provider.acquire(&other).await.expect("acquire"),
        AcquireOutcome::Acquired(_)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_stay_exact_in_a_dst_gap_of_the_servers_zone() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    if !ensure_zone(&mut admin).await {
        test_support::skip::skip_unless_ci(format!(
            "the server has no {ZONE} time zone and no tzinfo-to-sql tool is here"
        ));
        return;
    }
    let shedlock_table = common::unique_table("dst_shedlock");
    let our_table = common::unique_table("dst_ours");
    let _drop = (
        common::drop_table(&shedlock_table),
        common::drop_table(&our_table),
    );
    admin
        .query_drop(format!(
            "CREATE TABLE {shedlock_table}(name VARCHAR(64) NOT NULL, \
             lock_until TIMESTAMP(3) NOT NULL, \
             locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
             locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
        ))
        .await
        .expect("ShedLock DDL");
    MySqlLockProvider::new(common::pool(1))
        .with_table(&our_table)
        .unwrap()
        .ensure_schema()
        .await
        .expect("ensure_schema");

    with_global_zone(&mut admin, async move {
        // The hazard is real here: in the server's zone, ShedLock's statements cannot store the
        // gap's times.
        let mut java = common::admin().await.expect("server reachable");
        let zone: String = java
            .query_first("SELECT @@session.time_zone")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(zone, ZONE, "new sessions do not get the server's zone");
        java.query_drop(format!("SET timestamp = {IN_THE_GAP}"))
            .await
            .unwrap();
        let insert = format!(
            "INSERT INTO {shedlock_table}(name, lock_until, locked_at, locked_by) \
             VALUES(?, TIMESTAMPADD(MICROSECOND, ?, UTC_TIMESTAMP(3)), UTC_TIMESTAMP(3), ?)"
        );
        match java
            .exec_drop(insert, ("java-job", 10_000_000u64, "java-host"))
            .await
        {
            Err(mysql_async::Error::Server(e)) => {
                assert_eq!(e.code, 1292, "expected ER_TRUNCATED_WRONG_VALUE, got {e}")
            }
            other => panic!("ShedLock's insert in the gap did not fail: {other:?}"),
        }
        drop(java);

        for pinned in [true, false] {
            let pool = pool(pinned);
            let zone: String = pool
                .get_conn()
                .await
                .unwrap()
                .query_first("SELECT @@session.time_zone")
                .await
                .unwrap()
                .unwrap();
            assert_eq!(zone, if pinned { "+00:00" } else { ZONE });
            // Our table first: on the plain pool it then runs in the DST zone, before the
            // provider sets UTC on the connection for the TIMESTAMP table.
            leases_stay_exact(&pool, &our_table).await;
            leases_stay_exact(&pool, &shedlock_table).await;
            pool.disconnect().await.ok();
        }
    })
    .await;

    // The server's own setting is back.
    let zone: String = admin
        .query_first("SELECT @@GLOBAL.time_zone")
        .await
        .unwrap()
        .unwrap();
    assert_ne!(zone, ZONE);
}
