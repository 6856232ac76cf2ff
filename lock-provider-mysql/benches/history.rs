//! What a batch of run-history writes costs on MySQL/MariaDB: `runs_started` and `runs_ended`
//! of 600 runs (one text of single-row statements, one transaction) beside the one-by-one
//! writes they replace (`run_started`, `run_ended`: a statement and a commit each), and the
//! texts alone beside the set-based forms they could have been (one multi-row `INSERT`, whose
//! ids are not safe to read under `innodb_autoinc_lock_mode = 2`; one `UPDATE` joined on the
//! ids), sent in the same run on the same connection.
//!
//! `cargo bench -p lock-provider-mysql --bench history` runs 15 rounds and prints the medians;
//! without `--bench` (as `cargo test --all-targets` runs it) a smoke run of 2 rounds of 50 runs.

use std::fmt::Write;
use std::time::Instant;

use lock_cluster::{ClusterProvider, RunEnd, RunStart, RunState};
use lock_core::FireKind;
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::prelude::Queryable;
use lock_sql::sql::mysql::HistoryBatchStatements;
use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
use test_support::Mode;

use common::{median, ms, send};

mod common;

const TABLE: &str = "lock_provider_mysql_history_bench";

fn main() {
    test_support::mode::run_on_current_thread(run);
}

async fn run(mode: Mode) {
    let (n, rounds): (usize, usize) = mode.pick((600, 15), (50, 2));
    let Some((pool, mut conn)) = common::connect(2).await else {
        return;
    };
    let runs_table = format!("{TABLE}_runs");
    let provider = MySqlLockProvider::new(pool.clone())
        .with_table(TABLE)
        .expect("valid table");
    provider.ensure_schema().await.expect("ensure_schema");
    let store = provider.cluster().expect("operations tables");
    let table = LockTableConfig::default()
        .with_table(TABLE)
        .resolve(IdentifierStyle::MYSQL)
        .expect("table");
    let history = HistoryBatchStatements::new(
        &OperationsSql::new(SqlDialect::MySql, &table).expect("operations sql"),
    );
    let runs: Vec<RunStart> = (0..n)
        .map(|i| RunStart {
            job: format!("bench-job-{i:05}"),
            slot: Some(chrono::Utc::now()),
            fire_kind: FireKind::Scheduled,
            instance_id: "bench-instance".into(),
            fence: 1 + i as u64,
            attempt: 1,
            params: Default::default(),
        })
        .collect();
    let [
        mut started_singly,
        mut started,
        mut ended_singly,
        mut ended,
        mut insert_text,
        mut multi_row_text,
        mut update_text,
        mut set_based_text,
    ] = [(); 8].map(|_| Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        let mut single_ids = Vec::with_capacity(n);
        for run in &runs {
            single_ids.push(store.run_started(run).await.expect("run_started"));
        }
        started_singly.push(start.elapsed());
        let start = Instant::now();
        let ids = store.runs_started(&runs).await.expect("runs_started");
        started.push(start.elapsed());

        let ends = |ids: &[i64]| -> Vec<RunEnd> {
            ids.iter()
                .map(|&id| RunEnd::new(id, RunState::Succeeded, None))
                .collect()
        };
        let start = Instant::now();
        for end in ends(&single_ids) {
            store.run_ended(&end).await.expect("run_ended");
        }
        ended_singly.push(start.elapsed());
        let start = Instant::now();
        store.runs_ended(&ends(&ids)).await.expect("runs_ended");
        ended.push(start.elapsed());

        // The texts alone, on the rows just written (ended again: the same work).
        let [text] = <[String; 1]>::try_from(history.runs_started(&runs)).expect("one text");
        insert_text.push(send(&mut conn, text).await);
        multi_row_text.push(send(&mut conn, multi_row_insert(&runs_table, &runs)).await);
        let [text] = <[String; 1]>::try_from(history.runs_ended(&ends(&ids))).expect("one text");
        update_text.push(send(&mut conn, text).await);
        set_based_text.push(send(&mut conn, set_based_update(&runs_table, &ids)).await);
    }
    println!(
        "MySQL/MariaDB run history ({} run), {n} runs, median of {rounds} rounds:",
        mode.name()
    );
    println!(
        "  starts: runs_started {:.1} ms, one by one (before) {:.1} ms; the texts alone: one \
         INSERT per run {:.1} ms, one multi-row INSERT {:.1} ms",
        ms(median(started)),
        ms(median(started_singly)),
        ms(median(insert_text)),
        ms(median(multi_row_text)),
    );
    println!(
        "  ends: runs_ended {:.1} ms, one by one (before) {:.1} ms; the texts alone: one \
         UPDATE per run {:.1} ms, one UPDATE joined on the ids {:.1} ms",
        ms(median(ended)),
        ms(median(ended_singly)),
        ms(median(update_text)),
        ms(median(set_based_text)),
    );
    conn.query_drop(format!(
        "DROP TABLE IF EXISTS `{TABLE}`, `{TABLE}_instances`, `{runs_table}`, \
         `{TABLE}_control`, `{TABLE}_actions`, `{TABLE}_incidents`"
    ))
    .await
    .expect("drop the bench tables");
    drop(conn);
    pool.disconnect().await.expect("disconnect");
}

/// The starts as one multi-row `INSERT` (ASCII values only, quoted plainly).
fn multi_row_insert(table: &str, runs: &[RunStart]) -> String {
    let mut text = format!(
        "START TRANSACTION;INSERT INTO `{table}` (job_name, slot_at, fire_kind, instance_id, \
         fence, attempt, params, started_at, outcome) VALUES "
    );
    for (i, run) in runs.iter().enumerate() {
        let sep = if i > 0 { "," } else { "" };
        let slot = run.slot.expect("a slot").naive_utc();
        let _ = write!(
            text,
            "{sep}('{}', TIMESTAMP'{}', '{}', '{}', {}, {}, NULL, UTC_TIMESTAMP(3), 'running')",
            run.job,
            slot.format("%Y-%m-%d %H:%M:%S%.6f"),
            run.fire_kind.as_str(),
            run.instance_id,
            run.fence,
            run.attempt
        );
    }
    text.push_str(";COMMIT");
    text
}

/// The ends (all succeeded, no error, no lines) as one `UPDATE` joined on the ids, each value
/// picked by the id's ordinal as the lock batch picks its names.
fn set_based_update(table: &str, ids: &[i64]) -> String {
    let json: Vec<String> = ids.iter().map(i64::to_string).collect();
    let pick = |value: &str| {
        let mut elt = String::from("ELT(r.i");
        for _ in ids {
            elt.push_str(", ");
            elt.push_str(value);
        }
        elt.push(')');
        elt
    };
    format!(
        "START TRANSACTION;UPDATE JSON_TABLE('[{}]', '$[*]' COLUMNS (i FOR ORDINALITY, \
         id BIGINT PATH '$')) AS r STRAIGHT_JOIN `{table}` AS t ON t.id = r.id \
         SET t.ended_at = UTC_TIMESTAMP(3), t.outcome = {}, t.error_text = {}, \
         t.cancel_requested = {}, t.logs = {};COMMIT",
        json.join(","),
        pick("'succeeded'"),
        pick("NULL"),
        pick("0"),
        pick("NULL"),
    )
}
