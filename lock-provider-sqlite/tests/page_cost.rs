//! What the Jobs page reads per job (the newest run, the last success) costs the same whatever
//! the history's length: the virtual machine steps SQLite takes for `last_runs` and
//! `last_successes` are as many at 10,000 history rows as at 100,000.

mod common;

use lock_cluster::ClusterProvider;
use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
use rusqlite::{Connection, StatementStatus};

/// History rows `from..=to` of three jobs, one in two a success, in one statement.
fn append_runs(conn: &Connection, from: i64, to: i64) {
    conn.execute_batch(&format!(
        "WITH RECURSIVE g(n) AS (SELECT {from} UNION ALL SELECT n + 1 FROM g WHERE n < {to}) \
         INSERT INTO shedlock_runs (job_name, fire_kind, instance_id, fence, started_at, \
         ended_at, outcome) \
         SELECT 'job-' || (n % 3), 'scheduled', 'i', n, '2026-01-01 00:00:00.000', \
         '2026-01-01 00:00:01.000', CASE WHEN n % 2 = 0 THEN 'succeeded' ELSE 'failed' END \
         FROM g; ANALYZE"
    ))
    .expect("fill the history");
}

/// How many virtual machine steps answering `sql` took, and how many rows it answered.
fn steps(conn: &Connection, sql: &str) -> (i32, usize) {
    let mut statement = conn.prepare(sql).expect("prepare");
    let rows = statement.query_map([], |_| Ok(())).expect("query").count();
    (statement.get_status(StatementStatus::VmStep), rows)
}

#[tokio::test]
async fn the_jobs_pages_reads_take_as_many_steps_at_100k_history_rows_as_at_10k() {
    let (dir, provider) = common::fresh_provider().await;
    let conn = Connection::open(dir.path().join("locks.db")).expect("open");
    let resolved = LockTableConfig::default()
        .resolve(IdentifierStyle::ANSI)
        .expect("table");
    let sql = OperationsSql::new(SqlDialect::Sqlite, &resolved).expect("statements");

    append_runs(&conn, 1, 10_000);
    let small = [
        steps(&conn, &sql.last_runs),
        steps(&conn, &sql.last_successes),
    ];
    append_runs(&conn, 10_001, 100_000);
    let large = [
        steps(&conn, &sql.last_runs),
        steps(&conn, &sql.last_successes),
    ];
    for ((small, large), read) in small
        .iter()
        .zip(&large)
        .zip(["last_runs", "last_successes"])
    {
        assert_eq!(large.1, 3, "{read}: one row per job");
        assert_eq!(
            small.0, large.0,
            "{read} took {} steps at 10,000 history rows and {} at 100,000",
            small.0, large.0
        );
    }
    let store = provider.cluster().expect("sqlite keeps them");
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
}
