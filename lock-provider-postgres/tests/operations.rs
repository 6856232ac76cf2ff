//! The operations tables (registry, history, control) on the real PostgreSQL: the store's
//! contract (`lock_cluster::testkit::operations_store`, `heartbeat_of_many_jobs`) on tables of
//! the test's own, created by `ensure_schema` next to the lock table.

mod common;

use lock_cluster::ClusterProvider;
use lock_core::LockError;

#[tokio::test]
async fn operations_tables_keep_the_store_contract() {
    let table = common::unique_table("ops");
    // Drops the operations tables too.
    let _drop = common::drop_table(&table);
    let Some(provider) = common::provider(&table).await else {
        return;
    };
    lock_cluster::testkit::operations_store(&provider).await;
}

/// A beat of 6,000 jobs: more than one statement of 13 parameters per row could carry
/// (65,535); PostgreSQL's is one statement over arrays.
#[tokio::test]
async fn a_heartbeat_of_more_jobs_than_one_statement_takes() {
    let table = common::unique_table("ops_beat");
    let _drop = common::drop_table(&table);
    let Some(provider) = common::provider(&table).await else {
        return;
    };
    lock_cluster::testkit::heartbeat_of_many_jobs(&provider).await;
}

#[tokio::test]
async fn a_shedlock_table_alone_reports_the_missing_operations_tables() {
    let table = common::unique_table("ops_missing");
    let _drop = common::cleanup(format!("DROP TABLE IF EXISTS {table}"));
    let Some(pool) = common::pool().await else {
        return;
    };
    let client = pool.get().await.expect("connection");
    client
        .batch_execute(&format!(
            "CREATE TABLE {table} (name VARCHAR(64) NOT NULL PRIMARY KEY, \
             lock_until TIMESTAMP(3) NOT NULL, locked_at TIMESTAMP(3) NOT NULL, \
             locked_by VARCHAR(255) NOT NULL)"
        ))
        .await
        .expect("ShedLock's DDL");
    let provider = lock_provider_postgres::PostgresLockProvider::new(pool)
        .with_table(&table)
        .expect("table name");
    let store = lock_cluster::ClusterProvider::cluster(&provider).expect("postgres keeps them");
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
            assert!(ddl.contains(&format!("CREATE TABLE IF NOT EXISTS \"{table}_runs\"")));
        }
        other => panic!("expected TableMissing, got {other:?}"),
    }
}

/// A deployment whose operations tables predate the action log: the scheduler's check still
/// passes (registry, history and pauses keep working), writing the log reports the missing
/// table, and `ensure_schema` creates it beside the others.
#[tokio::test]
async fn ensure_schema_adds_the_action_log_to_older_operations_tables() {
    use lock_cluster::{Action, ActionRecord};
    let table = common::unique_table("ops_upgrade");
    let _drop = common::drop_table(&table);
    let Some(provider) = common::provider(&table).await else {
        return;
    };
    let pool = common::pool().await.expect("pool");
    let client = pool.get().await.expect("connection");
    client
        .batch_execute(&format!("DROP TABLE {table}_actions"))
        .await
        .expect("drop the action log");
    let store = lock_cluster::ClusterProvider::cluster(&provider).expect("postgres keeps them");
    store
        .check()
        .await
        .expect("the scheduler's tables are all there");
    let record = ActionRecord::new("report", Action::Resume, "lockctl:ops");
    match store.record_action(&record).await {
        Err(LockError::TableMissing {
            table: missing,
            ddl,
            ..
        }) => {
            assert!(missing.contains(&format!("{table}_actions")), "{missing}");
            assert!(ddl.contains(&format!("CREATE TABLE IF NOT EXISTS \"{table}_actions\"")));
        }
        other => panic!("expected TableMissing, got {other:?}"),
    }
    provider.ensure_schema().await.expect("ensure_schema again");
    store.record_action(&record).await.expect("record");
    assert_eq!(store.actions("report", 5).await.expect("read").len(), 1);
}

/// A deployment whose operations tables predate the incidents: the scheduler's check still
/// passes, reading the incidents reports the missing table with its DDL, and `ensure_schema`
/// (its probe sees the table missing) creates it beside the others.
#[tokio::test]
async fn ensure_schema_adds_the_incidents_to_older_operations_tables() {
    let table = common::unique_table("ops_incidents");
    let _drop = common::drop_table(&table);
    let Some(provider) = common::provider(&table).await else {
        return;
    };
    let pool = common::pool().await.expect("pool");
    let client = pool.get().await.expect("connection");
    client
        .batch_execute(&format!("DROP TABLE {table}_incidents"))
        .await
        .expect("drop the incidents");
    lock_cluster::testkit::incidents_added_later(
        &provider,
        &format!("\"{table}_incidents\""),
        || provider.ensure_schema(),
    )
    .await;
}

/// A history table from before `attempt`, `cancel_requested` and `params`, a control table
/// from before `slot_at` and `params`: the scheduler's check reports them with the DDL,
/// `ensure_schema()` adds them (its probe sees them missing), old rows read as attempt 1
/// without cancellation nor parameters, and new rows keep what they are given.
#[tokio::test]
async fn ensure_schema_adds_the_attempt_columns_to_an_existing_history_table() {
    use lock_cluster::{RunEnd, RunStart, RunState};
    use lock_core::{FireKind, Params};
    let table = common::unique_table("ops_cols");
    let _drop = common::drop_table(&table);
    let Some(provider) = common::provider(&table).await else {
        return;
    };
    let pool = common::pool().await.expect("pool");
    let client = pool.get().await.expect("connection");
    client
        .batch_execute(&format!(
            "ALTER TABLE {table}_runs DROP COLUMN attempt, DROP COLUMN cancel_requested, \
             DROP COLUMN params; \
             ALTER TABLE {table}_control DROP COLUMN slot_at, DROP COLUMN params; \
             INSERT INTO {table}_runs (job_name, fire_kind, instance_id, fence, started_at, \
             ended_at, outcome) VALUES ('old', 'scheduled', 'a', 1, now(), now(), 'succeeded')"
        ))
        .await
        .expect("the history table of an older version");
    let store = lock_cluster::ClusterProvider::cluster(&provider).expect("postgres keeps them");
    match store.check().await {
        Err(LockError::TableMissing { ddl, .. }) => assert!(
            ddl.contains(&format!(
                "ALTER TABLE \"{table}_control\" ADD COLUMN IF NOT EXISTS slot_at"
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
}

/// A `params` text written by hand that does not decode fails the read, naming the row:
/// a manual run is never read without the parameters it was asked with.
#[tokio::test]
async fn a_params_text_that_does_not_decode_names_its_row() {
    let table = common::unique_table("ops_params");
    let _drop = common::drop_table(&table);
    let Some(provider) = common::provider(&table).await else {
        return;
    };
    let pool = common::pool().await.expect("pool");
    let client = pool.get().await.expect("connection");
    let row = client
        .query_one(
            &format!(
                "INSERT INTO {table}_control (job_name, request_kind, requested_at, requested_by, \
                 params) VALUES ('report', 'trigger', now(), 'psql', 'bad key=1') RETURNING id"
            ),
            &[],
        )
        .await
        .expect("a row written by hand");
    let id: i64 = row.get(0);
    let store = lock_cluster::ClusterProvider::cluster(&provider).expect("postgres keeps them");
    let error = store.control().await.expect_err("refused");
    let chain = test_support::skip::chain(&error);
    assert!(
        chain.contains(&format!("row {id} of {table}_control")),
        "{chain}"
    );
}

/// The run history of a burst is coalesced: twenty jobs due at the same slot write their rows
/// in a few statements, not twenty, and every run's end is written. The rows' last writers
/// tell the statements apart (rows one statement wrote share its transaction id, `xmin`): the
/// end statements, which are coalesced as the starts are. Each row carries its own body's
/// start and end (`run_times_are_the_bodys`), so the times no longer tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bursts_history_rows_share_a_few_statements() {
    use std::time::Duration;

    use lock_scheduler::{Job, Scheduler, Trigger};

    let table = common::unique_table("ops_burst");
    let _drop = common::drop_table(&table);
    let Some(provider) = common::provider(&table).await else {
        return;
    };
    let provider = std::sync::Arc::new(provider);
    let names: Vec<String> = (0..20).map(|i| format!("burst_{i:02}")).collect();
    let jobs = names.iter().map(|name| {
        Job::new(
            name.as_str(),
            Trigger::fixed_rate(Duration::from_secs(1)).expect("a period"),
            || async {},
        )
    });
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .jobs(jobs)
        .start()
        .await
        .expect("started");
    let store = provider.cluster().expect("operations tables");
    // Two slots, so that at least one burst is whole (the first may catch a job late).
    test_support::process::eventually(
        Duration::from_secs(20),
        "two ended runs of every job",
        || async {
            for name in &names {
                let runs = store.history(name, 5).await.expect("history");
                if runs.iter().filter(|r| r.ended_at.is_some()).count() < 2 {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
    scheduler.shutdown().await.expect("shut down");
    let mut by_slot: std::collections::BTreeMap<_, Vec<_>> = Default::default();
    for name in &names {
        for run in store.history(name, 10).await.expect("history") {
            assert!(run.ended_at.is_some(), "every run ended: {run:?}");
            by_slot.entry(run.slot).or_default().push(run.id);
        }
    }
    let (slot, ids) = by_slot
        .iter()
        .find(|(_, ids)| ids.len() == names.len())
        .expect("a slot every job ran");
    let client = common::pool()
        .await
        .expect("the pool")
        .get()
        .await
        .expect("a connection");
    let writers: Vec<String> = client
        .query(
            &format!("SELECT DISTINCT xmin::text FROM {table}_runs WHERE id = ANY($1)"),
            &[ids],
        )
        .await
        .expect("the rows' writers")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        writers.len() <= 5,
        "the 20 runs of slot {slot:?} were ended by {} statements: {writers:?}",
        writers.len()
    );
}

/// A run's start and end in the history are its body's, by the database's clock, although
/// the rows are written later: the start row of a scheduled fire waits for its burst (half
/// the release linger, 125 ms for a job every second), the end row for the lock's release
/// (the linger, 250 ms). The bodies record this host's clock, which is the server's here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_times_are_the_bodys() {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use chrono::{DateTime, Utc};
    use lock_scheduler::{Job, Scheduler, Trigger};

    let table = common::unique_table("ops_times");
    let _drop = common::drop_table(&table);
    let Some(provider) = common::provider(&table).await else {
        return;
    };
    let provider = Arc::new(provider);
    // (slot, start, end) of each run, by this host's clock.
    type Seen = (DateTime<Utc>, DateTime<Utc>, DateTime<Utc>);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let job = Job::new("times", Trigger::cron("* * * * * *").expect("cron"), {
        let seen = seen.clone();
        move || {
            let seen = seen.clone();
            async move {
                let start = Utc::now();
                let slot = lock_core::JobContext::current()
                    .and_then(|ctx| ctx.scheduled_at())
                    .expect("a slot");
                tokio::time::sleep(Duration::from_millis(30)).await;
                seen.lock().unwrap().push((slot, start, Utc::now()));
            }
        }
    });
    let scheduler = Scheduler::builder()
        .lock_provider(provider.clone())
        .history(Duration::from_secs(3600))
        .jobs([job])
        .start()
        .await
        .expect("started");
    let store = provider.cluster().expect("operations tables");
    test_support::process::eventually(Duration::from_secs(20), "three ended runs", || async {
        let runs = store.history("times", 10).await.expect("history");
        (runs.iter().filter(|r| r.ended_at.is_some()).count() >= 3).then_some(())
    })
    .await;
    scheduler.shutdown().await.expect("shut down");
    let seen = seen.lock().unwrap().clone();
    let runs = store.history("times", 10).await.expect("history");
    let mut checked = 0;
    for run in runs.iter().filter(|r| r.ended_at.is_some()) {
        let Some(&(_, start, end)) = seen.iter().find(|(slot, ..)| Some(*slot) == run.slot) else {
            continue;
        };
        // Written when the rows are written, the start would trail the body's by the 125 ms
        // its row waited, and the end by the 250 ms the release lingered; the times given
        // differ from the body's own reading by the scheduler's estimate of the server's
        // clock (the same clock here), which 60 ms bounds on a loaded machine.
        let off = |recorded: DateTime<Utc>, seen: DateTime<Utc>| {
            (recorded - seen).num_milliseconds().abs()
        };
        assert!(
            off(run.started_at, start) < 60,
            "started_at {} is not the body's start {start}: {run:?}",
            run.started_at
        );
        let ended_at = run.ended_at.expect("ended");
        assert!(
            off(ended_at, end) < 60,
            "ended_at {ended_at} is not the body's end {end}: {run:?}"
        );
        checked += 1;
    }
    assert!(checked >= 3, "three runs checked: {runs:?} {seen:?}");
}
