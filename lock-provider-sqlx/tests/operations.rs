//! The operations tables (registry, history, control, action log, incidents) through sqlx on
//! the real servers and a SQLite file: the store's contract
//! (`lock_cluster::testkit::operations_store`, `heartbeat_of_many_jobs`) on tables of the
//! test's own, created by `ensure_schema` next to the lock table; a sqlx provider and the driver-specific provider
//! reading and writing ONE set of operations tables; a ShedLock table alone, without them,
//! where the scheduler runs the jobs and warns once; and tables from before later columns and
//! the incidents, which `ensure_schema` completes.

mod common;

use lock_cluster::ClusterProvider;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lock_cluster::{
    Cluster, ControlKind, Heartbeat, InstanceInfo, JobRegistration, RunEnd, RunStart, RunState,
};
use lock_core::{FireKind, FireSlot, LockError};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_postgres::PostgresLockProvider;
use lock_provider_sqlite::SqliteLockProvider;
use lock_provider_sqlx::SqlxLockProvider;
use lock_provider_sqlx::sqlx::{self, AssertSqlSafe};
use lock_scheduler::{Job, Scheduler, Trigger};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_operations_tables_keep_the_store_contract() {
    let table = common::unique_table("locksqlx_ops_pg");
    // Drops the operations tables too.
    let _drop = common::drop_postgres_table(&table);
    let Some(provider) = common::pg_provider(&table).await else {
        return;
    };
    lock_cluster::testkit::operations_store(&provider).await;
    // ensure_schema again: the tables exist, nothing fails.
    provider.ensure_schema().await.expect("ensure_schema twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_operations_tables_keep_the_store_contract() {
    let table = common::unique_table("locksqlx_ops_my");
    let _drop = common::drop_mysql_table(&table);
    let Some(provider) = common::mysql_provider(&table).await else {
        return;
    };
    lock_cluster::testkit::operations_store(&provider).await;
    provider.ensure_schema().await.expect("ensure_schema twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_operations_tables_keep_the_store_contract() {
    let Some((_dir, provider)) = common::sqlite_provider().await else {
        return;
    };
    lock_cluster::testkit::operations_store(&provider).await;
    provider.ensure_schema().await.expect("ensure_schema twice");
}

/// A beat of 6,000 jobs: more than one statement of 13 parameters per row can carry in
/// PostgreSQL's protocol and MySQL (65,535) or SQLite (32,766). PostgreSQL's beat is one
/// statement over arrays; MySQL's and SQLite's are cut into several.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_heartbeat_of_more_jobs_than_one_statement_takes() {
    let table = common::unique_table("locksqlx_beat_pg");
    let _drop = common::drop_postgres_table(&table);
    let Some(provider) = common::pg_provider(&table).await else {
        return;
    };
    lock_cluster::testkit::heartbeat_of_many_jobs(&provider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_heartbeat_of_more_jobs_than_one_statement_takes() {
    let table = common::unique_table("locksqlx_beat_my");
    let _drop = common::drop_mysql_table(&table);
    let Some(provider) = common::mysql_provider(&table).await else {
        return;
    };
    lock_cluster::testkit::heartbeat_of_many_jobs(&provider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_heartbeat_of_more_jobs_than_one_statement_takes() {
    let Some((_dir, provider)) = common::sqlite_provider().await else {
        return;
    };
    lock_cluster::testkit::heartbeat_of_many_jobs(&provider).await;
}

/// `instance`'s heartbeat with one job, `report`.
fn beat(instance: &str, started_at: chrono::DateTime<chrono::Utc>) -> Heartbeat {
    Heartbeat {
        instance: InstanceInfo {
            instance_id: instance.to_owned(),
            host: format!("{instance}-host"),
            pid: 77,
            version: "1.2.3".into(),
            started_at,
            clock_offset_ms: 3,
            heartbeat_ms: 1000,
        },
        jobs: vec![JobRegistration {
            name: "report".into(),
            lock_name: "report".into(),
            trigger: "fixed rate 5s".into(),
            zone: None,
            next_fire: Some(started_at + chrono::TimeDelta::seconds(5)),
            following_fire: Some(started_at + chrono::TimeDelta::seconds(10)),
        }],
    }
}

/// Two providers on one set of operations tables: each sees the other's registry rows and
/// runs, ends the other's runs, honours the other's pause, and a trigger request one makes is
/// claimed once across both. Whatever one reads, the other reads the same.
async fn share_operations(sqlx: &dyn ClusterProvider, driver: &dyn ClusterProvider) {
    let a: &dyn Cluster = sqlx.cluster().expect("sqlx keeps operations");
    let b: &dyn Cluster = driver.cluster().expect("the driver keeps operations");
    assert_eq!(a.tables(), b.tables());
    let now = FireSlot::new(sqlx.database_time().await.expect("now")).instant();

    assert!(
        a.heartbeat(&beat("via-sqlx", now))
            .await
            .expect("beat")
            .is_empty()
    );
    assert!(
        b.heartbeat(&beat("via-driver", now))
            .await
            .expect("beat")
            .is_empty()
    );
    let registry = a.registry().await.expect("registry");
    assert_eq!(registry, b.registry().await.expect("registry"));
    let instances: Vec<&str> = registry
        .iter()
        .filter(|r| r.job.is_none())
        .map(|r| r.instance.instance_id.as_str())
        .collect();
    assert_eq!(instances, ["via-driver", "via-sqlx"], "{registry:?}");
    assert_eq!(registry.len(), 4, "an instance row and a job row each");

    // A run started by one and ended by the other, and the other way round.
    let run = |fence, instance: &str| RunStart {
        job: "report".into(),
        slot: Some(now),
        fire_kind: FireKind::Scheduled,
        instance_id: instance.to_owned(),
        fence,
        attempt: 1,
        params: Default::default(),
    };
    let first = a.run_started(&run(7, "via-sqlx")).await.expect("start");
    b.run_ended(&RunEnd::new(first, RunState::Failed, Some("boom")))
        .await
        .expect("end");
    let second = b.run_started(&run(8, "via-driver")).await.expect("start");
    assert!(second > first, "one id sequence: {first} then {second}");
    a.run_ended(&RunEnd::new(second, RunState::Succeeded, None))
        .await
        .expect("end");
    let history = a.history("report", 10).await.expect("history");
    assert_eq!(history, b.history("report", 10).await.expect("history"));
    assert_eq!(
        history
            .iter()
            .map(|r| (r.id, r.fence, r.outcome, r.error.as_deref()))
            .collect::<Vec<_>>(),
        [
            (second, 8, RunState::Succeeded, None),
            (first, 7, RunState::Failed, Some("boom"))
        ]
    );
    assert!(history.iter().all(|r| r.slot == Some(now)));
    assert_eq!(a.last_runs().await.unwrap(), b.last_runs().await.unwrap());
    assert_eq!(
        a.last_successes().await.unwrap(),
        b.last_successes().await.unwrap()
    );

    // A pause by one is a pause for the other; the other resumes it.
    assert!(b.pause("report", "op@driver").await.expect("pause"));
    assert!(!a.pause("report", "op@sqlx").await.expect("pause again"));
    let control = a.heartbeat(&beat("via-sqlx", now)).await.expect("beat");
    assert_eq!(
        control
            .iter()
            .map(|c| (c.kind, c.job.as_str(), c.requested_by.as_str()))
            .collect::<Vec<_>>(),
        [(ControlKind::Pause, "report", "op@driver")]
    );
    assert!(a.resume("report").await.expect("resume"));
    assert!(!b.resume("report").await.expect("resume again"));

    // A trigger request by one is claimed once across both.
    let request = a.request_trigger("report", "op").await.expect("trigger");
    assert!(b.claim_trigger(request, "via-driver").await.expect("claim"));
    assert!(!a.claim_trigger(request, "via-sqlx").await.expect("claim"));
    assert!(!a.withdraw_trigger(request).await.expect("withdraw"));
    let control = a.control().await.expect("control");
    assert_eq!(control, b.control().await.expect("control"));
    assert_eq!(control.len(), 1);
    assert_eq!(control[0].claimed_by.as_deref(), Some("via-driver"));

    // An `after` row written by one is the other's, to the millisecond; so are parameters.
    let slot = now + chrono::TimeDelta::milliseconds(123);
    a.request_after("child", slot, "report#1")
        .await
        .expect("request after");
    assert_eq!(
        b.after_requests("child", slot).await.expect("after"),
        ["report#1"]
    );
    let params = lock_core::Params::parse_pairs(["day=2026-12-01", "q=a&b"]).expect("params");
    let asked = b
        .request_trigger_with_params("report", "op", &params)
        .await
        .expect("trigger with params");
    let control = a.control().await.expect("control");
    assert_eq!(control, b.control().await.expect("control"));
    let asked = control.iter().find(|c| c.id == asked).expect("the request");
    assert_eq!(asked.params, params);
    let after = control
        .iter()
        .find(|c| c.kind == ControlKind::After)
        .expect("the after row");
    assert_eq!(after.slot, Some(slot));
    let manual = a
        .run_started(&RunStart {
            params: params.clone(),
            ..run(9, "via-sqlx")
        })
        .await
        .expect("start with params");
    let history = b.history("report", 1).await.expect("history");
    assert_eq!((history[0].id, &history[0].params), (manual, &params));
    assert_eq!(b.delete_after("child", slot).await.expect("delete"), 1);

    // An incident opened by one is open for the other, read the same (its time too), and
    // resolved by exactly one of them.
    let key = "failed_in_a_row/report";
    assert!(
        a.open_incident(key, "report failed 3 times")
            .await
            .expect("open")
    );
    assert!(!b.open_incident(key, "again").await.expect("open"));
    let open = b.open_incidents().await.expect("incidents");
    assert_eq!(open, a.open_incidents().await.expect("incidents"));
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0].summary, "report failed 3 times");
    assert!(b.resolve_incident(key).await.expect("resolve"));
    assert!(!a.resolve_incident(key).await.expect("resolve"));
    assert!(a.open_incident(key, "reopened").await.expect("reopen"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_sqlx_and_deadpool_share_the_operations_tables() {
    let table = common::unique_table("locksqlx_ops_pg_shared");
    let _drop = common::drop_postgres_table(&table);
    // sqlx creates the tables; the deadpool provider finds them.
    let Some(sqlx) = common::pg_provider(&table).await else {
        return;
    };
    let deadpool = PostgresLockProvider::connect(&common::postgres_url())
        .await
        .expect("connect")
        .with_table(&table)
        .expect("valid table");
    deadpool.ensure_schema().await.expect("ensure_schema");
    share_operations(&sqlx, &deadpool).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_sqlx_and_mysql_async_share_the_operations_tables() {
    let table = common::unique_table("locksqlx_ops_my_shared");
    let _drop = common::drop_mysql_table(&table);
    let Some(sqlx) = common::mysql_provider(&table).await else {
        return;
    };
    let mysql_async = MySqlLockProvider::connect(&common::mysql_url())
        .await
        .expect("connect")
        .with_table(&table)
        .expect("valid table");
    mysql_async.ensure_schema().await.expect("ensure_schema");
    share_operations(&sqlx, &mysql_async).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_sqlx_and_rusqlite_share_the_operations_tables() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let file = dir.path().join("locks.db");
    // rusqlite creates the tables this time; sqlx finds them.
    let rusqlite = SqliteLockProvider::open(&file).expect("open");
    rusqlite.ensure_schema().await.expect("ensure_schema");
    let sqlx = SqlxLockProvider::sqlite(common::sqlite_pool(&file).await);
    sqlx.ensure_schema().await.expect("ensure_schema");
    share_operations(&sqlx, &rusqlite).await;
}

/// What the store of a provider on a ShedLock table alone says.
async fn missing(provider: &SqlxLockProvider, table: &str, quoted_runs: &str) {
    let store = provider.cluster().expect("sqlx keeps them");
    match store.check().await {
        Err(LockError::TableMissing {
            table: missing,
            ddl,
            ..
        }) => {
            assert_eq!(
                missing,
                format!(
                    "{table}_instances, {table}_runs, {table}_control, {table}_actions, \
                     {table}_incidents"
                )
            );
            assert!(
                ddl.contains(&format!("CREATE TABLE IF NOT EXISTS {quoted_runs}")),
                "{ddl}"
            );
        }
        other => panic!("expected TableMissing, got {other:?}"),
    }
}

/// On a ShedLock table alone (no `ensure_schema`), the locks work and the scheduler runs the
/// jobs, with one warning naming the missing operations tables.
#[tokio::test]
async fn postgres_a_shedlock_table_alone_runs_the_jobs_and_warns_once() {
    let table = common::unique_table("locksqlx_ops_pg_alone");
    let _drop = common::drop_postgres_table(&table);
    let Some(pool) = common::pg_pool().await else {
        return;
    };
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE {table} (name VARCHAR(64) NOT NULL PRIMARY KEY, \
         lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL, \
         locked_by VARCHAR(255) NOT NULL)"
    )))
    .execute(&pool)
    .await
    .expect("ShedLock's DDL");
    let provider = SqlxLockProvider::postgres(pool)
        .with_table(&table)
        .expect("table name");
    missing(&provider, &table, &format!("\"{table}_runs\"")).await;

    let (logs, _guard) = test_support::logs::capture();
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let tick = Job::new(
        "tick",
        Trigger::fixed_rate(Duration::from_millis(200)).expect("a valid rate"),
        move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        },
    );
    let scheduler = Scheduler::builder()
        .lock_provider(provider)
        .history(Duration::from_secs(60))
        .jobs([tick])
        .start()
        .await
        .expect("start");
    // Bounded wait for a state; 3 runs of a 200 ms rate, with room for a loaded machine.
    test_support::process::eventually(Duration::from_secs(30), "three runs", || async {
        (runs.load(Ordering::SeqCst) >= 3).then_some(())
    })
    .await;
    scheduler.shutdown().await.expect("shutdown");
    let text = logs.text();
    assert_eq!(
        text.matches("the operations tables are missing or unreadable")
            .count(),
        1,
        "{text}"
    );
    assert!(text.contains(&format!("{table}_runs")), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_shedlock_table_alone_reports_the_missing_operations_tables() {
    let table = common::unique_table("locksqlx_ops_my_alone");
    let _drop = common::drop_mysql_table(&table);
    let Some(pool) = common::mysql_pool().await else {
        return;
    };
    sqlx::raw_sql(AssertSqlSafe(format!(
        "CREATE TABLE `{table}` (name VARCHAR(64) NOT NULL PRIMARY KEY, \
         lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL, \
         locked_by VARCHAR(255) NOT NULL)"
    )))
    .execute(&pool)
    .await
    .expect("ShedLock's DDL");
    let provider = SqlxLockProvider::mysql(pool)
        .with_table(&table)
        .expect("table name");
    missing(&provider, &table, &format!("`{table}_runs`")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_shedlock_table_alone_reports_the_missing_operations_tables() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let pool = common::sqlite_pool(&dir.path().join("locks.db")).await;
    sqlx::raw_sql(
        "CREATE TABLE shedlock (name VARCHAR(64) NOT NULL PRIMARY KEY, \
         lock_until TEXT NOT NULL, locked_at TEXT NOT NULL, locked_by VARCHAR(255) NOT NULL)",
    )
    .execute(&pool)
    .await
    .expect("ShedLock's DDL");
    let provider = SqlxLockProvider::sqlite(pool);
    missing(&provider, "shedlock", "\"shedlock_runs\"").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_ensure_schema_adds_the_incidents_to_older_operations_tables() {
    let table = common::unique_table("locksqlx_ops_pg_incidents");
    let _drop = common::drop_postgres_table(&table);
    let Some(provider) = common::pg_provider(&table).await else {
        return;
    };
    let pool = common::pg_pool().await.expect("pool");
    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE {table}_incidents")))
        .execute(&pool)
        .await
        .expect("drop the incidents");
    lock_cluster::testkit::incidents_added_later(
        &provider,
        &format!("\"{table}_incidents\""),
        || provider.ensure_schema(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_ensure_schema_adds_the_incidents_to_older_operations_tables() {
    let table = common::unique_table("locksqlx_ops_my_incidents");
    let _drop = common::drop_mysql_table(&table);
    let Some(provider) = common::mysql_provider(&table).await else {
        return;
    };
    let pool = common::mysql_pool().await.expect("pool");
    sqlx::raw_sql(AssertSqlSafe(format!("DROP TABLE `{table}_incidents`")))
        .execute(&pool)
        .await
        .expect("drop the incidents");
    lock_cluster::testkit::incidents_added_later(
        &provider,
        &format!("`{table}_incidents`"),
        || provider.ensure_schema(),
    )
    .await;
    // Created by this `ensure_schema`, the key compares bytes (`testkit::incidents` tells two
    // keys apart by case on the tables a first `ensure_schema` created).
    let collation: String = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT collation_name FROM information_schema.columns WHERE table_schema = \
         DATABASE() AND table_name = '{table}_incidents' AND column_name = 'incident_key'"
    )))
    .fetch_one(&pool)
    .await
    .expect("the key's collation");
    assert_eq!(collation, "utf8mb4_bin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_ensure_schema_adds_the_incidents_to_older_operations_tables() {
    let Some((dir, provider)) = common::sqlite_provider().await else {
        return;
    };
    let pool = common::sqlite_pool(&dir.path().join("locks.db")).await;
    sqlx::raw_sql("DROP TABLE shedlock_incidents")
        .execute(&pool)
        .await
        .expect("drop the incidents");
    pool.close().await;
    lock_cluster::testkit::incidents_added_later(&provider, "\"shedlock_incidents\"", || {
        provider.ensure_schema()
    })
    .await;
}

/// SQLite tables from before the history's `attempt`, `cancel_requested` and `params` and the
/// control table's `slot_at` and `params`: the check reports them with the DDL, and sqlx's
/// `ensure_schema()` adds them, then their index, as `lock-provider-sqlite` does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_ensure_schema_adds_the_later_columns_to_older_tables() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("locks.db");
    let pool = common::sqlite_pool(&path).await;
    sqlx::raw_sql(
        "CREATE TABLE shedlock_runs (id INTEGER PRIMARY KEY AUTOINCREMENT, \
         job_name TEXT NOT NULL, slot_at TEXT NULL, fire_kind TEXT NOT NULL, \
         instance_id TEXT NOT NULL, fence INTEGER NOT NULL, started_at TEXT NOT NULL, \
         ended_at TEXT NULL, outcome TEXT NOT NULL, error_text TEXT NULL); \
         CREATE TABLE shedlock_instances (instance_id TEXT NOT NULL, job_name TEXT NOT NULL, \
         lock_name TEXT NOT NULL, trigger_text TEXT NOT NULL, zone_name TEXT NULL, \
         next_fire TEXT NULL, host_name TEXT NOT NULL, pid INTEGER NOT NULL, \
         app_version TEXT NOT NULL, started_at TEXT NOT NULL, heartbeat_at TEXT NOT NULL, \
         clock_offset_ms INTEGER NOT NULL, heartbeat_ms INTEGER NOT NULL, \
         following_fire TEXT NULL, PRIMARY KEY (instance_id, job_name)); \
         CREATE TABLE shedlock_control (id INTEGER PRIMARY KEY AUTOINCREMENT, \
         job_name TEXT NOT NULL, request_kind TEXT NOT NULL, requested_at TEXT NOT NULL, \
         requested_by TEXT NOT NULL, claimed_by TEXT NULL, claimed_at TEXT NULL);",
    )
    .execute(&pool)
    .await
    .expect("the tables of an older version");
    let provider = SqlxLockProvider::sqlite(pool.clone());
    let store = provider.cluster().expect("sqlx keeps them");
    match store.check().await {
        Err(LockError::TableMissing { ddl, .. }) => assert!(
            ddl.contains(r#"ALTER TABLE "shedlock_runs" ADD COLUMN params TEXT NULL"#),
            "{ddl}"
        ),
        other => panic!("expected the missing columns, got {other:?}"),
    }
    provider.ensure_schema().await.expect("ensure_schema");
    provider.ensure_schema().await.expect("ensure_schema twice");
    store.check().await.expect("every column there");
    let index: Vec<String> =
        sqlx::query_scalar("SELECT name FROM pragma_index_info('shedlock_control_after')")
            .fetch_all(&pool)
            .await
            .expect("the index");
    assert_eq!(index, ["job_name", "request_kind", "slot_at"]);
}
