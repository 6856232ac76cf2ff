//! The operations tables (registry, history, control) on the real MySQL/MariaDB: the store's
//! contract (`lock_cluster::testkit::operations_store`, `heartbeat_of_many_jobs`) on tables of
//! the test's own, created by `ensure_schema` next to the lock table.

mod common;

use lock_provider_mysql::MySqlLockProvider;

#[tokio::test]
async fn operations_tables_keep_the_store_contract() {
    let table = common::unique_table("lockmy_ops");
    // Drops the operations tables too.
    let _drop = common::drop_table(&table);
    let provider = match MySqlLockProvider::connect(&common::url()).await {
        Ok(provider) => provider.with_table(&table).expect("table name"),
        Err(e) => return common::unreachable(&e).unwrap_or(()),
    };
    provider.ensure_schema().await.expect("ensure_schema");
    lock_cluster::testkit::operations_store(&provider).await;
    // ensure_schema again: the tables exist, nothing fails.
    provider.ensure_schema().await.expect("ensure_schema twice");
    let _ = provider.pool().clone().disconnect().await;
}

/// A beat of 6,000 jobs: more than MySQL's 65,535 parameters allow in one statement of 13 per
/// row, so the upsert is cut into several.
#[tokio::test]
async fn a_heartbeat_of_more_jobs_than_one_statement_takes() {
    let table = common::unique_table("lockmy_beat");
    let _drop = common::drop_table(&table);
    let provider = match MySqlLockProvider::connect(&common::url()).await {
        Ok(provider) => provider.with_table(&table).expect("table name"),
        Err(e) => return common::unreachable(&e).unwrap_or(()),
    };
    provider.ensure_schema().await.expect("ensure_schema");
    lock_cluster::testkit::heartbeat_of_many_jobs(&provider).await;
    let _ = provider.pool().clone().disconnect().await;
}

/// A history table from before `attempt`, `cancel_requested` and `params`, a control table
/// from before `slot_at`, `params` and their index: the scheduler's check reports them with
/// the DDL, `ensure_schema()` adds them (MySQL has no `ADD COLUMN IF NOT EXISTS`: a catalog
/// check), old rows read as attempt 1 without cancellation nor parameters, and new rows keep
/// what they are given.
#[tokio::test]
async fn ensure_schema_adds_the_attempt_columns_to_an_existing_history_table() {
    use lock_cluster::{ClusterProvider, RunEnd, RunStart, RunState};
    use lock_core::{FireKind, LockError, Params};
    use lock_provider_mysql::mysql_async::prelude::Queryable;
    let table = common::unique_table("lockmy_cols");
    let _drop = common::drop_table(&table);
    let provider = match MySqlLockProvider::connect(&common::url()).await {
        Ok(provider) => provider.with_table(&table).expect("table name"),
        Err(e) => return common::unreachable(&e).unwrap_or(()),
    };
    provider.ensure_schema().await.expect("ensure_schema");
    let mut admin = common::admin().await.expect("admin connection");
    admin
        .query_drop(format!(
            "ALTER TABLE {table}_runs DROP COLUMN attempt, DROP COLUMN cancel_requested, \
             DROP COLUMN params"
        ))
        .await
        .expect("the history table of an older version");
    admin
        .query_drop(format!(
            "ALTER TABLE {table}_control DROP INDEX {table}_control_after, \
             DROP COLUMN slot_at, DROP COLUMN params"
        ))
        .await
        .expect("the control table of an older version");
    admin
        .query_drop(format!(
            "INSERT INTO {table}_runs (job_name, fire_kind, instance_id, fence, started_at, \
             ended_at, outcome) VALUES ('old', 'scheduled', 'a', 1, NOW(3), NOW(3), 'succeeded')"
        ))
        .await
        .expect("an old row");
    let store = provider.cluster().expect("mysql keeps them");
    match store.check().await {
        Err(LockError::TableMissing { ddl, .. }) => assert!(
            ddl.contains(&format!(
                "ALTER TABLE `{table}_control` ADD COLUMN slot_at DATETIME(3) NULL"
            )),
            "{ddl}"
        ),
        other => panic!("expected the missing columns, got {other:?}"),
    }
    provider
        .ensure_schema()
        .await
        .expect("ensure_schema adds them");
    provider.ensure_schema().await.expect("ensure_schema twice");
    store.check().await.expect("every column there");
    let index: Vec<String> = admin
        .query(format!(
            "SELECT column_name FROM information_schema.statistics WHERE table_schema = \
             DATABASE() AND table_name = '{table}_control' AND index_name = \
             '{table}_control_after' ORDER BY seq_in_index"
        ))
        .await
        .expect("the index's columns");
    assert_eq!(index, ["job_name", "request_kind", "slot_at"]);
    let old = &store.history("old", 1).await.expect("history")[0];
    assert_eq!((old.attempt, old.cancel_requested), (1, false), "{old:?}");
    assert!(old.params.is_empty(), "{old:?}");
    let id = store
        .run_started(&RunStart {
            job: "old".into(),
            slot: None,
            fire_kind: FireKind::Manual,
            instance_id: "a".into(),
            fence: 2,
            attempt: 2,
            params: Params::parse_pairs(["day=2026-12-01"]).expect("params"),
        })
        .await
        .expect("start");
    store
        .run_ended(&RunEnd::new(id, RunState::Succeeded, None).with_cancel_requested(true))
        .await
        .expect("end");
    let new = &store.history("old", 1).await.expect("history")[0];
    assert_eq!((new.attempt, new.cancel_requested), (2, true), "{new:?}");
    assert_eq!(new.params.get("day"), Some("2026-12-01"), "{new:?}");
    drop(admin);
    let _ = provider.pool().clone().disconnect().await;
}

/// A deployment whose operations tables predate the incidents: the scheduler's check still
/// passes, reading the incidents reports the missing table with its DDL, and `ensure_schema`
/// creates it beside the others, its key compared byte for byte.
#[tokio::test]
async fn ensure_schema_adds_the_incidents_to_older_operations_tables() {
    use lock_provider_mysql::mysql_async::prelude::Queryable;
    let table = common::unique_table("lockmy_incidents");
    let _drop = common::drop_table(&table);
    let provider = match MySqlLockProvider::connect(&common::url()).await {
        Ok(provider) => provider.with_table(&table).expect("table name"),
        Err(e) => return common::unreachable(&e).unwrap_or(()),
    };
    provider.ensure_schema().await.expect("ensure_schema");
    let mut admin = common::admin().await.expect("admin connection");
    admin
        .query_drop(format!("DROP TABLE {table}_incidents"))
        .await
        .expect("drop the incidents");
    lock_cluster::testkit::incidents_added_later(
        &provider,
        &format!("`{table}_incidents`"),
        || provider.ensure_schema(),
    )
    .await;
    let collation: Vec<String> = admin
        .query(format!(
            "SELECT collation_name FROM information_schema.columns WHERE table_schema = \
             DATABASE() AND table_name = '{table}_incidents' AND column_name = 'incident_key'"
        ))
        .await
        .expect("the key's collation");
    assert_eq!(collation, ["utf8mb4_bin"]);
    drop(admin);
    let _ = provider.pool().clone().disconnect().await;
}

/// Instances starting at once each run `ensure_schema()` on fresh tables: every one succeeds
/// (the added columns' catalog checks race no `ALTER`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_ensure_schema_on_fresh_tables_all_succeed() {
    let table = common::unique_table("lockmy_race");
    let _drop = common::drop_table(&table);
    let mut providers = Vec::new();
    for _ in 0..2 {
        match MySqlLockProvider::connect(&common::url()).await {
            Ok(provider) => providers.push(provider.with_table(&table).expect("table name")),
            Err(e) => return common::unreachable(&e).unwrap_or(()),
        }
    }
    let (a, b) = tokio::join!(providers[0].ensure_schema(), providers[1].ensure_schema());
    for result in [a, b] {
        if let Err(e) = result {
            let mut chain = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                chain.push_str(&format!(": {s}"));
                source = s.source();
            }
            panic!("{chain}");
        }
    }
}
