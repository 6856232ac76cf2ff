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

/// The history batches (one text query of single-row statements, one transaction): a batch
/// of starts writes the rows one-by-one starts write (no slot, parameters, quotes and
/// non-ASCII text in names and values), each id its own row's; a batch of ends changes
/// exactly its rows, as single ends would. A batch the table refuses midway (a trigger
/// signals on one row) leaves none of its rows, and the connection (the pool's only one)
/// is back in autocommit for the next call: what it writes, another connection reads.
#[tokio::test]
async fn history_batches_write_what_single_writes_would_and_fail_whole() {
    use lock_cluster::{ClusterProvider, RunEnd, RunLogWriter, RunStart, RunState};
    use lock_core::{FireKind, FireSlot, LockProvider, Params};
    use lock_provider_mysql::mysql_async::prelude::Queryable;
    let table = common::unique_table("lockmy_hist");
    let _drop = common::drop_table(&table);
    let Some(mut admin) = common::admin().await else {
        return;
    };
    let provider = MySqlLockProvider::new(common::pool(1))
        .with_table(&table)
        .expect("table name");
    provider.ensure_schema().await.expect("ensure_schema");
    let store = provider.cluster().expect("mysql keeps them");
    assert_eq!(store.max_history_batch(), 1000);

    let now = provider.database_time().await.expect("database time");
    let slot = FireSlot::new(now).instant();
    let mut params = Params::new();
    params
        .insert("who", "O'Brien \"é\" \\ 日本")
        .expect("a parameter");
    let odd = "it's \"odd\" \\ é 日本 `x`";
    let runs: Vec<RunStart> = [
        (
            format!("{odd} a"),
            Some(slot),
            FireKind::Scheduled,
            Params::new(),
        ),
        (format!("{odd} b"), None, FireKind::Manual, params.clone()),
        ("plain c".to_owned(), Some(slot), FireKind::CatchUp, params),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, (job, slot, fire_kind, params))| RunStart {
        job: format!("{job} {table}"),
        slot,
        fire_kind,
        instance_id: format!("host-{i} '日本'"),
        fence: if i == 0 {
            i64::MAX as u64
        } else {
            7 + i as u64
        },
        attempt: 1 + i as u32,
        params,
    })
    .collect();
    let singles: Vec<RunStart> = runs
        .iter()
        .map(|run| RunStart {
            job: format!("{} single", run.job),
            ..run.clone()
        })
        .collect();
    let mut single_ids = Vec::new();
    for run in &singles {
        single_ids.push(store.run_started(run).await.expect("a single start"));
    }
    let ids = store.runs_started(&runs).await.expect("a batch of starts");
    assert_eq!(ids.len(), runs.len());
    for ((run, id), (single, single_id)) in
        runs.iter().zip(&ids).zip(singles.iter().zip(&single_ids))
    {
        let rows = store.history(&run.job, 5).await.expect("history");
        assert_eq!(rows.len(), 1, "{rows:?}");
        let row = &rows[0];
        let single_row = &store.history(&single.job, 1).await.expect("history")[0];
        assert_eq!(row.id, *id, "the id returned is {}'s row", run.job);
        assert_eq!(single_row.id, *single_id);
        for (row, run) in [(row, run), (single_row, single)] {
            assert_eq!(
                (
                    row.job.as_str(),
                    row.slot,
                    row.fire_kind,
                    row.instance_id.as_str(),
                    row.fence,
                    row.attempt,
                    &row.params,
                ),
                (
                    run.job.as_str(),
                    run.slot,
                    run.fire_kind,
                    run.instance_id.as_str(),
                    run.fence,
                    run.attempt,
                    &run.params,
                ),
            );
            assert_eq!(
                (
                    row.outcome,
                    row.ended_at,
                    row.error.as_deref(),
                    row.cancel_requested
                ),
                (RunState::Running, None, None, false)
            );
            assert!(
                row.started_at >= now - chrono::TimeDelta::seconds(5),
                "{row:?}"
            );
        }
    }

    // Ends: the batch's first two rows and the third single row, not the others.
    let mut writer = RunLogWriter::new(10, 65536);
    writer.line(now, "INFO", "t", |m| m.push_str("line 'one' é \\ 日本"));
    let logs = writer.finish().expect("lines");
    let ends = [
        RunEnd::new(ids[0], RunState::Failed, Some("it's \"bad\" é \\ 日本"))
            .with_logs(Some(logs.clone())),
        RunEnd::new(ids[1], RunState::Succeeded, None).with_cancel_requested(true),
        RunEnd::new(single_ids[2], RunState::Panicked, Some("")),
    ];
    store.runs_ended(&ends).await.expect("a batch of ends");
    let ended = [
        (&runs[0].job, &ends[0]),
        (&runs[1].job, &ends[1]),
        (&singles[2].job, &ends[2]),
    ];
    for (job, end) in ended {
        let row = &store.history(job, 1).await.expect("history")[0];
        assert_eq!(row.id, end.id);
        assert_eq!(
            (row.outcome, row.error.as_ref(), row.cancel_requested),
            (end.outcome, end.error.as_ref(), end.cancel_requested),
            "{job}"
        );
        assert!(
            row.ended_at.is_some_and(|at| at >= row.started_at),
            "{row:?}"
        );
    }
    let kept = store
        .run_logs(&runs[0].job, ids[0]..=ids[0])
        .await
        .expect("run logs");
    assert_eq!(kept, vec![(ids[0], logs)]);
    for job in [&runs[2].job, &singles[0].job, &singles[1].job] {
        let row = &store.history(job, 1).await.expect("history")[0];
        assert_eq!(
            (row.outcome, row.ended_at),
            (RunState::Running, None),
            "{job}"
        );
    }

    // A batch the table refuses at its second row.
    admin
        .query_drop(format!(
            "CREATE TRIGGER `{table}_refuse_start` BEFORE INSERT ON `{table}_runs` FOR EACH ROW \
             IF NEW.job_name LIKE 'refused%' THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF"
        ))
        .await
        .expect("a trigger that refuses");
    let refused: Vec<RunStart> = ["kept-not", "refused", "kept-neither"]
        .into_iter()
        .map(|job| RunStart {
            job: format!("{job} {table}"),
            ..runs[0].clone()
        })
        .collect();
    let error = store
        .runs_started(&refused)
        .await
        .expect_err("the table refuses a row");
    assert!(
        format!("{error:?}").contains("refused by the test"),
        "{error:?}"
    );
    for run in [&refused[0], &refused[2]] {
        assert!(
            store
                .history(&run.job, 5)
                .await
                .expect("history")
                .is_empty(),
            "no row of the failed batch, on its own connection either: {}",
            run.job
        );
    }
    // The ends refused at their second row: the first is not applied either.
    admin
        .query_drop(format!(
            "CREATE TRIGGER `{table}_refuse_end` BEFORE UPDATE ON `{table}_runs` FOR EACH ROW \
             IF NEW.error_text = 'refused' THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF"
        ))
        .await
        .expect("a trigger that refuses");
    store
        .runs_ended(&[
            RunEnd::new(ids[2], RunState::Succeeded, None),
            RunEnd::new(single_ids[0], RunState::Failed, Some("refused")),
        ])
        .await
        .expect_err("the table refuses an end");
    let row = &store.history(&runs[2].job, 1).await.expect("history")[0];
    assert_eq!(
        (row.outcome, row.ended_at),
        (RunState::Running, None),
        "{row:?}"
    );

    // The same (only) connection, in autocommit: another connection sees what it writes.
    let later = store
        .runs_started(&[RunStart {
            job: format!("later {table}"),
            ..runs[1].clone()
        }])
        .await
        .expect("the next batch");
    let seen: Vec<i64> = admin
        .query(format!(
            "SELECT id FROM `{table}_runs` WHERE job_name = 'later {table}'"
        ))
        .await
        .expect("read from another connection");
    assert_eq!(seen, later);
    drop(admin);
    let _ = provider.pool().clone().disconnect().await;
}
