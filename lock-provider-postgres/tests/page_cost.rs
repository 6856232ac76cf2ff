//! What the Jobs page reads per job (the newest run, the last success) costs the same whatever
//! the history's length: the rows PostgreSQL touches for `last_runs` and `last_successes`, as
//! `EXPLAIN ANALYZE` counts them, are the same at 10,000 history rows and at 100,000; and an
//! existing schema gets the indexes this takes (and the one-pause-row index) from
//! `ensure_schema()`.

mod common;

use lock_cluster::ClusterProvider;
use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};

/// The history rows of three jobs, one in two a success, appended with one statement.
async fn append_runs(client: &tokio_postgres::Client, table: &str, from: i64, to: i64) {
    client
        .batch_execute(&format!(
            "INSERT INTO {table}_runs (job_name, fire_kind, instance_id, fence, started_at, \
             ended_at, outcome) \
             SELECT 'job-' || (g % 3), 'scheduled', 'i', g, now(), now(), \
             CASE WHEN g % 2 = 0 THEN 'succeeded' ELSE 'failed' END \
             FROM generate_series({from}, {to}) g; ANALYZE {table}_runs"
        ))
        .await
        .expect("fill the history");
}

/// The plan of `sql` as run: the rows every node produced (rows times loops, summed), and the
/// plan's text.
async fn rows_touched(client: &tokio_postgres::Client, sql: &str) -> (u64, String) {
    let rows = client
        .query(
            &format!("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) {sql}"),
            &[],
        )
        .await
        .expect("explain");
    let plan: Vec<String> = rows.iter().map(|row| row.get(0)).collect();
    let mut touched = 0;
    for line in &plan {
        // `(actual rows=R loops=L)`
        let Some(actual) = line.split("(actual ").nth(1) else {
            continue;
        };
        let number = |key: &str| -> u64 {
            actual
                .split(key)
                .nth(1)
                .and_then(|rest| rest.split([' ', ')']).next())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no {key} in {line}"))
        };
        touched += number("rows=") * number("loops=");
    }
    (touched, plan.join("\n"))
}

#[tokio::test]
async fn the_jobs_pages_reads_touch_as_many_rows_at_100k_history_rows_as_at_10k() {
    let table = common::unique_table("page_cost");
    let _drop = common::drop_table(&table);
    let Some(provider) = common::provider(&table).await else {
        return;
    };
    let client = common::raw_client().await;
    let resolved = LockTableConfig::default()
        .with_table(&table)
        .resolve(IdentifierStyle::POSTGRES)
        .expect("table");
    let sql = OperationsSql::new(SqlDialect::Postgres, &resolved).expect("statements");

    append_runs(&client, &table, 1, 10_000).await;
    let small = [
        rows_touched(&client, &sql.last_runs).await,
        rows_touched(&client, &sql.last_successes).await,
    ];
    append_runs(&client, &table, 10_001, 100_000).await;
    let large = [
        rows_touched(&client, &sql.last_runs).await,
        rows_touched(&client, &sql.last_successes).await,
    ];
    for (((small, _), (large, plan)), read) in small
        .iter()
        .zip(&large)
        .zip(["last_runs", "last_successes"])
    {
        assert!(
            !plan.contains("Seq Scan"),
            "{read} scans the history:\n{plan}"
        );
        assert_eq!(
            small, large,
            "{read} touched {small} rows at 10,000 history rows and {large} at 100,000:\n{plan}"
        );
        // Three jobs: a few index seeks each, not a walk over their runs.
        assert!(*large < 100, "{read} touched {large} rows:\n{plan}");
    }

    // And they still answer what they did: each job's newest run, its latest success.
    let store = provider.cluster().expect("postgres keeps them");
    let mut last: Vec<(String, u64)> = store
        .last_runs()
        .await
        .expect("last runs")
        .into_iter()
        .map(|run| (run.job.to_string(), run.fence))
        .collect();
    last.sort();
    assert_eq!(
        last,
        [
            ("job-0".to_owned(), 99_999),
            ("job-1".to_owned(), 100_000),
            ("job-2".to_owned(), 99_998)
        ]
    );
    let successes = store.last_successes().await.expect("successes");
    assert_eq!(successes.len(), 3, "{successes:?}");
}

#[tokio::test]
async fn ensure_schema_adds_the_new_indexes_to_existing_tables_and_keeps_one_pause_row() {
    let table = common::unique_table("page_upgrade");
    let _drop = common::drop_table(&table);
    let Some(provider) = common::provider(&table).await else {
        return;
    };
    let client = common::raw_client().await;
    // The tables as an older version left them: no added index, and a pause race's two rows.
    client
        .batch_execute(&format!(
            "DROP INDEX IF EXISTS {table}_runs_ok; DROP INDEX IF EXISTS {table}_paused; \
             INSERT INTO {table}_control (job_name, request_kind, requested_at, requested_by) \
             VALUES ('report', 'pause', now(), 'a'), ('report', 'pause', now(), 'b')"
        ))
        .await
        .expect("an older schema");
    provider.ensure_schema().await.expect("ensure_schema");
    let indexes: Vec<String> = client
        .query(
            "SELECT indexname::text FROM pg_indexes WHERE tablename IN ($1, $2) ORDER BY 1",
            &[&format!("{table}_runs"), &format!("{table}_control")],
        )
        .await
        .expect("indexes")
        .iter()
        .map(|row| row.get(0))
        .collect();
    for index in [format!("{table}_runs_ok"), format!("{table}_paused")] {
        assert!(indexes.contains(&index), "{index} in {indexes:?}");
    }
    let store = provider.cluster().expect("postgres keeps them");
    let pauses = store.control().await.expect("control");
    assert_eq!(pauses.len(), 1, "the older duplicate is gone: {pauses:?}");
    assert_eq!(pauses[0].requested_by, "a", "the first pause is kept");
    assert!(!store.pause("report", "c").await.expect("pause"));
    provider.ensure_schema().await.expect("ensure_schema again");
}
