//! The table and the connection as users configure them: missing tables, custom names, refused
//! identifiers, unreachable servers, and pools the provider did not build.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;

use lock_core::{AcquireOutcome, FireSlot, LockError, LockProvider, RefusalReason, testkit};
use lock_provider_mysql::mysql_async::{Opts, OptsBuilder, Pool, prelude::Queryable};
use lock_provider_mysql::{ColumnNames, MySqlLockProvider};

const LONG: Duration = Duration::from_secs(300);

async fn acquired(provider: &MySqlLockProvider, name: &Arc<str>, owner: &str) -> lock_core::Lease {
    match provider
        .acquire(&testkit::request(name, owner, LONG, None))
        .await
        .expect("acquire")
    {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("{name:?} refused: {refused:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_table_error_carries_the_ddl_until_ensure_schema() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let table = common::unique_table("missing");
    let _drop = common::drop_table(&table);
    let provider = MySqlLockProvider::new(common::pool(2))
        .with_table(&table)
        .unwrap();
    let name = testkit::unique_name("missing");
    let check = |err: LockError| match err {
        LockError::TableMissing { table: t, ddl, .. } => {
            assert_eq!(t, table);
            assert!(
                ddl.starts_with(&format!("CREATE TABLE IF NOT EXISTS `{table}`")),
                "{ddl}"
            );
            assert!(ddl.contains("DATETIME(3)"), "{ddl}");
        }
        other => panic!("expected TableMissing, got {other:?}"),
    };
    let err = provider
        .acquire(&testkit::request(&name, "a", LONG, None))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ensure_schema"), "{err}");
    check(err);
    check(provider.list_locks().await.unwrap_err());

    provider.ensure_schema().await.expect("ensure_schema");
    let lease = acquired(&provider, &name, "a").await;
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());

    // Dropped while the provider knows the table: the server's own error is the source.
    admin
        .query_drop(format!("DROP TABLE `{table}`"))
        .await
        .unwrap();
    let err = provider
        .acquire(&testkit::request(&name, "a", LONG, None))
        .await
        .unwrap_err();
    assert!(
        std::error::Error::source(&err).is_some_and(|s| s.to_string().contains("doesn't exist")),
        "{err:?}"
    );
    check(err);
    provider.ensure_schema().await.expect("ensure_schema again");
    let lease = acquired(&provider, &name, "a").await;
    assert_eq!(lease.fence(), 1, "a recreated table starts over");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_table_and_column_names() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let table = common::unique_table("custom");
    let _drop = common::drop_table(&table);
    let columns = ColumnNames {
        name: "job".into(),
        lock_until: "held_until".into(),
        locked_at: "taken_at".into(),
        locked_by: "owner".into(),
        fence: "token".into(),
        last_fire: "last_slot".into(),
    };
    let database: String = admin
        .query_first("SELECT DATABASE()")
        .await
        .unwrap()
        .unwrap();
    let provider = MySqlLockProvider::new(common::pool(4))
        .with_table(&format!("{database}.{table}"))
        .unwrap()
        .with_columns(columns)
        .unwrap();
    assert_eq!(
        provider.describe(),
        format!("mysql table {database}.{table}")
    );
    provider.ensure_schema().await.expect("ensure_schema");
    let created: Vec<String> = admin
        .exec(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS \
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
            (&table,),
        )
        .await
        .unwrap();
    assert_eq!(
        created,
        [
            "job",
            "held_until",
            "taken_at",
            "owner",
            "token",
            "last_slot"
        ]
    );
    testkit::exclusion(&provider).await;
    testkit::once_per_slot(&provider).await;
    testkit::stale_lease_cannot_release_new_one(&provider).await;
    testkit::list_and_force_unlock(&provider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_migrated_table_is_explained_then_completed() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let table = common::unique_table("half");
    let _drop = common::drop_table(&table);
    admin
        .query_drop(format!(
            "CREATE TABLE {table} (name VARCHAR(64) NOT NULL PRIMARY KEY, \
             lock_until DATETIME(3) NOT NULL, locked_at DATETIME(3) NOT NULL, \
             locked_by VARCHAR(255) NOT NULL, fence BIGINT NOT NULL DEFAULT 0)"
        ))
        .await
        .unwrap();
    let provider = MySqlLockProvider::new(common::pool(2))
        .with_table(&table)
        .unwrap();
    let name = testkit::unique_name("half");
    match provider
        .acquire(&testkit::request(&name, "a", LONG, None))
        .await
    {
        Err(LockError::InvalidConfiguration(message)) => {
            assert!(message.contains("ensure_schema"), "{message}")
        }
        other => panic!("expected InvalidConfiguration, got {other:?}"),
    }
    provider.ensure_schema().await.expect("ensure_schema");
    testkit::once_per_slot(&provider).await;
    // Run twice (every instance does at startup): nothing left to add.
    provider.ensure_schema().await.expect("ensure_schema again");
}

#[tokio::test]
async fn unsafe_names_are_refused_at_construction() {
    // Pool::new connects lazily, so no server is needed here.
    let pool = Pool::new(Opts::from_url("mysql://root@127.0.0.1:3306/test").unwrap());
    for table in [
        "shedlock; DROP TABLE users",
        "shed`lock",
        "a.b.c",
        "",
        "1shedlock",
    ] {
        match MySqlLockProvider::new(pool.clone()).with_table(table) {
            Err(LockError::InvalidConfiguration(message)) => {
                assert!(message.contains("table name"), "{message}")
            }
            other => panic!("table {table:?} accepted: {other:?}"),
        }
    }
    let bad = ColumnNames {
        locked_by: "owner` = 'x' --".into(),
        ..ColumnNames::default()
    };
    assert!(matches!(
        MySqlLockProvider::new(pool.clone()).with_columns(bad),
        Err(LockError::InvalidConfiguration(_))
    ));
    let twice = ColumnNames {
        fence: "name".into(),
        ..ColumnNames::default()
    };
    assert!(MySqlLockProvider::new(pool).with_columns(twice).is_err());
}

#[tokio::test]
async fn unreachable_server_and_bad_url_are_errors_with_sources() {
    match MySqlLockProvider::connect("mysql://root@127.0.0.1:1/test").await {
        Err(err @ LockError::Provider { operation, .. }) => {
            assert_eq!(operation, "connect");
            assert!(err.to_string().contains("127.0.0.1:1"), "{err}");
            let source = std::error::Error::source(&err).expect("the driver's error");
            assert!(!source.to_string().is_empty());
        }
        other => panic!("expected a connect error, got {other:?}"),
    }
    assert!(matches!(
        MySqlLockProvider::connect("postgres://localhost/x").await,
        Err(LockError::InvalidConfiguration(_))
    ));
}

/// A host that accepts the TCP connection and never answers (as a black-holed or overloaded
/// server does) fails the connect after the configured timeout, not after TCP's minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_fails_the_connect_within_its_timeout() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let url = format!("mysql://root@127.0.0.1:{port}/test?prefer_socket=false");
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(
        Duration::from_secs(20),
        MySqlLockProvider::connect_with_timeout(&url, Duration::from_millis(500)),
    )
    .await
    .expect("the connect hung past 20 s: no connect timeout");
    let elapsed = started.elapsed();
    silent.abort();
    match result {
        Err(err @ LockError::Provider { operation, .. }) => {
            assert_eq!(operation, "connect");
            // The cause, below the error that names the server and the kind of failure.
            let io = std::iter::successors(std::error::Error::source(&err), |e| e.source())
                .find_map(|e| e.downcast_ref::<std::io::Error>())
                .expect("an I/O error in the chain");
            assert_eq!(io.kind(), std::io::ErrorKind::TimedOut, "{err}");
            assert!(
                err.to_string().contains(&format!("127.0.0.1:{port}")),
                "{err}"
            );
        }
        other => panic!("expected a connect timeout, got {other:?}"),
    }
    assert!(
        elapsed >= Duration::from_millis(500) && elapsed < Duration::from_secs(3),
        "the connect gave up after {elapsed:?}, not after its 500 ms timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_database_selected_is_explained() {
    if common::admin().await.is_none() {
        return;
    }
    let opts = Opts::from_url(&common::url()).unwrap();
    let without_db = OptsBuilder::from_opts(opts).db_name(None::<String>);
    let provider = MySqlLockProvider::new(Pool::new(MySqlLockProvider::pool_options(without_db)));
    let name = testkit::unique_name("no-db");
    match provider
        .acquire(&testkit::request(&name, "a", LONG, None))
        .await
    {
        Err(LockError::InvalidConfiguration(message)) => {
            assert!(message.contains("no database selected"), "{message}")
        }
        other => panic!("expected InvalidConfiguration, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_deleted_by_hand_is_recreated_at_the_next_fire() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let Some(provider) = common::provider().await else {
        return;
    };
    let name = testkit::unique_name("deleted");
    for _ in 0..3 {
        let lease = acquired(&provider, &name, "a").await;
        assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    }
    admin
        .exec_drop(
            format!("DELETE FROM `{}` WHERE name = ?", common::CONFORMANCE_TABLE),
            (&*name,),
        )
        .await
        .unwrap();
    let lease = acquired(&provider, &name, "b").await;
    assert_eq!(lease.fence(), 1, "the recreated row starts a new fence");
    assert!(
        provider
            .list_locks()
            .await
            .unwrap()
            .iter()
            .any(|r| *r.name == *name && r.held)
    );
    provider.release(&lease, Duration::ZERO).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_say_why_and_until_when() {
    let Some(provider) = common::provider().await else {
        return;
    };
    let name = testkit::unique_name("why");
    let slot = FireSlot::new(Utc::now());
    let lease = match provider
        .acquire(&testkit::request(&name, "a", LONG, Some(slot)))
        .await
        .unwrap()
    {
        AcquireOutcome::Acquired(lease) => lease,
        refused => panic!("{refused:?}"),
    };
    let until = provider
        .list_locks()
        .await
        .unwrap()
        .into_iter()
        .find(|r| *r.name == *name)
        .unwrap()
        .lock_until;
    match provider
        .acquire(&testkit::request(&name, "b", LONG, None))
        .await
        .unwrap()
    {
        AcquireOutcome::Refused(refusal) => {
            assert_eq!(refusal.reason, RefusalReason::Held);
            // To the whole second, rounded down.
            let reported = refusal.lock_until.expect("lock_until");
            assert_eq!(reported.timestamp(), until.timestamp());
        }
        acquired => panic!("{acquired:?}"),
    }
    provider.release(&lease, Duration::ZERO).await.unwrap();
    match provider
        .acquire(&testkit::request(&name, "b", LONG, Some(slot)))
        .await
        .unwrap()
    {
        AcquireOutcome::Refused(refusal) => {
            assert_eq!(refusal.reason, RefusalReason::SlotAlreadyRun);
            let last = refusal.last_fire.expect("last_fire");
            assert_eq!(last.timestamp(), slot.instant().timestamp());
        }
        acquired => panic!("{acquired:?}"),
    }
}

/// `lock_at_least_for = lock_at_most_for`: the release leaves `lock_until` as it was, which
/// the server counts as no row affected; the provider must still see its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_that_changes_nothing_still_finds_the_lease() {
    let Some(provider) = common::provider().await else {
        return;
    };
    let name = testkit::unique_name("same-until");
    let lease = acquired(&provider, &name, "a").await;
    assert!(provider.release(&lease, LONG).await.unwrap());
    assert!(
        provider.release(&lease, LONG).await.unwrap(),
        "a release that left lock_until unchanged reported the lease lost"
    );
}

/// Pools the provider did not build: mysql_async's defaults (connections reset on return, the
/// server's time zone), and `client_found_rows`, which changes what affected-row counts mean.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_built_by_the_user() {
    if common::admin().await.is_none() {
        return;
    }
    for url in [
        common::url(),
        format!(
            "{}{}client_found_rows=true",
            common::url(),
            if common::url().contains('?') {
                '&'
            } else {
                '?'
            }
        ),
    ] {
        let provider = MySqlLockProvider::new(Pool::from_url(&url).unwrap())
            .with_table(common::CONFORMANCE_TABLE)
            .unwrap();
        provider.ensure_schema().await.unwrap();
        testkit::exclusion(&provider).await;
        testkit::release_only_by_owner(&provider).await;
        testkit::once_per_slot(&provider).await;
        testkit::fence_strictly_increasing(&provider).await;
        testkit::list_and_force_unlock(&provider).await;
        let name = testkit::unique_name("user-pool");
        let lease = acquired(&provider, &name, "a").await;
        assert!(provider.release(&lease, LONG).await.unwrap());
        assert!(provider.release(&lease, LONG).await.unwrap(), "{url}");
    }
}

/// MariaDB's `SIMULTANEOUS_ASSIGNMENT` makes `SET` assignments read the row's old values
/// instead of MySQL's left-to-right order; the acquire statement is written to be right under
/// both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_simultaneous_assignment_mode() {
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let version: String = admin
        .query_first("SELECT VERSION()")
        .await
        .unwrap()
        .unwrap();
    if !version.contains("MariaDB") {
        common::skipped(format!(
            "not MariaDB ({version}): no SIMULTANEOUS_ASSIGNMENT mode to test"
        ));
        return;
    }
    let opts = OptsBuilder::from_opts(Opts::from_url(&common::url()).unwrap()).setup(vec![
        "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',SIMULTANEOUS_ASSIGNMENT')",
    ]);
    let pool = Pool::new(MySqlLockProvider::pool_options(opts));
    let mode: String = pool
        .get_conn()
        .await
        .unwrap()
        .query_first("SELECT @@SESSION.sql_mode")
        .await
        .unwrap()
        .unwrap();
    assert!(mode.contains("SIMULTANEOUS_ASSIGNMENT"), "{mode}");
    let provider = MySqlLockProvider::new(pool)
        .with_table(common::CONFORMANCE_TABLE)
        .unwrap();
    testkit::exclusion(&provider).await;
    testkit::once_per_slot(&provider).await;
    testkit::slot_refused_while_held(&provider).await;
    testkit::fence_strictly_increasing(&provider).await;
    testkit::fuzz(&provider).await;
}
