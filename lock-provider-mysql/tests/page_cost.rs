//! What the Jobs page reads per job (the newest run, the last success) costs the same whatever
//! the history's length: the index entries MySQL/MariaDB reads for `last_runs` and
//! `last_successes` (the session's `Handler_read_%` counters) are as many at 10,000 history
//! rows as at 110,000; and an existing schema gets the indexes from `ensure_schema()`.

mod common;

use lock_cluster::ClusterProvider;
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::Conn;
use lock_provider_mysql::mysql_async::prelude::Queryable;
use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};

/// Ten digits, crossed to number the rows of one `INSERT .. SELECT` (a recursive CTE would
/// stop at `cte_max_recursion_depth`).
const DIGITS: &str = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
     UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
     UNION ALL SELECT 8 UNION ALL SELECT 9)";

/// `count` (a power of ten) history rows of three jobs, one in two a success, fences from
/// `from`.
async fn append_runs(conn: &mut Conn, table: &str, from: u64, count: u64) {
    let places = count.ilog10();
    let crossed: Vec<String> = (0..places).map(|i| format!("{DIGITS} d{i}")).collect();
    let number: Vec<String> = (0..places)
        .map(|i| format!("d{i}.d * {}", 10u64.pow(i)))
        .collect();
    conn.query_drop(format!(
        "INSERT INTO {table}_runs (job_name, fire_kind, instance_id, fence, started_at, \
         ended_at, outcome) \
         SELECT CONCAT('job-', n % 3), 'scheduled', 'i', n, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), \
         IF(n % 2 = 0, 'succeeded', 'failed') \
         FROM (SELECT {from} + {} AS n FROM {}) numbered",
        number.join(" + "),
        crossed.join(", ")
    ))
    .await
    .expect("fill the history");
    conn.query_drop(format!("ANALYZE TABLE {table}_runs"))
        .await
        .expect("analyze");
}

/// The session's `Handler_read_%` counters, summed.
async fn handler_reads(conn: &mut Conn) -> u64 {
    let counters: Vec<(String, u64)> = conn
        .query("SHOW SESSION STATUS LIKE 'Handler_read%'")
        .await
        .expect("status");
    counters.iter().map(|(_, n)| n).sum()
}

/// The index and table rows the session read to answer `sql`.
async fn rows_read(conn: &mut Conn, sql: &str) -> u64 {
    let before = handler_reads(conn).await;
    conn.query_drop(sql).await.expect("read");
    handler_reads(conn).await - before
}

#[tokio::test]
async fn the_jobs_pages_reads_touch_as_many_rows_at_110k_history_rows_as_at_10k() {
    let table = common::unique_table("lockmy_page_cost");
    let _drop = common::drop_table(&table);
    let provider = match MySqlLockProvider::connect(&common::url()).await {
        Ok(provider) => provider.with_table(&table).expect("table name"),
        Err(e) => return common::unreachable(&e).unwrap_or(()),
    };
    provider.ensure_schema().await.expect("ensure_schema");
    let mut conn = common::admin().await.expect("a connection");
    let resolved = LockTableConfig::default()
        .with_table(&table)
        .resolve(IdentifierStyle::MYSQL)
        .expect("table");
    let sql = OperationsSql::new(SqlDialect::MySql, &resolved).expect("statements");

    append_runs(&mut conn, &table, 1, 10_000).await;
    let small = [
        rows_read(&mut conn, &sql.last_runs).await,
        rows_read(&mut conn, &sql.last_successes).await,
    ];
    append_runs(&mut conn, &table, 10_001, 100_000).await;
    let large = [
        rows_read(&mut conn, &sql.last_runs).await,
        rows_read(&mut conn, &sql.last_successes).await,
    ];
    for ((small, large), read) in small
        .iter()
        .zip(&large)
        .zip(["last_runs", "last_successes"])
    {
        assert!(
            *large < 100,
            "{read} read {small} rows at 10,000 history rows and {large} at 110,000"
        );
    }

    let store = provider.cluster().expect("mysql keeps them");
    assert_eq!(store.last_runs().await.expect("last runs").len(), 3);
    assert_eq!(store.last_successes().await.expect("successes").len(), 3);
    let _ = provider.pool().clone().disconnect().await;
}

#[tokio::test]
async fn ensure_schema_adds_the_new_indexes_to_existing_tables_and_keeps_one_pause_row() {
    let table = common::unique_table("lockmy_page_upgrade");
    let _drop = common::drop_table(&table);
    let provider = match MySqlLockProvider::connect(&common::url()).await {
        Ok(provider) => provider.with_table(&table).expect("table name"),
        Err(e) => return common::unreachable(&e).unwrap_or(()),
    };
    provider.ensure_schema().await.expect("ensure_schema");
    let mut conn = common::admin().await.expect("a connection");
    // The tables as an older version left them: no added index or column, and a pause race's
    // two rows.
    conn.query_drop(format!(
        "ALTER TABLE {table}_runs DROP INDEX {table}_runs_ok"
    ))
    .await
    .expect("drop the index");
    conn.query_drop(format!(
        "ALTER TABLE {table}_control DROP INDEX {table}_paused, DROP COLUMN pause_job"
    ))
    .await
    .expect("drop the column");
    conn.query_drop(format!(
        "INSERT INTO {table}_control (job_name, request_kind, requested_at, requested_by) \
         VALUES ('report', 'pause', UTC_TIMESTAMP(3), 'a'), \
         ('report', 'pause', UTC_TIMESTAMP(3), 'b')"
    ))
    .await
    .expect("two pause rows");
    provider.ensure_schema().await.expect("ensure_schema");
    let indexes: Vec<String> = conn
        .query(format!(
            "SELECT DISTINCT index_name FROM information_schema.statistics \
             WHERE table_schema = DATABASE() AND table_name IN ('{table}_runs', '{table}_control')"
        ))
        .await
        .expect("indexes");
    for index in [format!("{table}_runs_ok"), format!("{table}_paused")] {
        assert!(indexes.contains(&index), "{index} in {indexes:?}");
    }
    let store = provider.cluster().expect("mysql keeps them");
    let pauses = store.control().await.expect("control");
    assert_eq!(pauses.len(), 1, "the older duplicate is gone: {pauses:?}");
    assert_eq!(pauses[0].requested_by, "a", "the first pause is kept");
    assert!(!store.pause("report", "c").await.expect("pause"));
    provider.ensure_schema().await.expect("ensure_schema again");
    let _ = provider.pool().clone().disconnect().await;
}
