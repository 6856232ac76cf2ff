//! What a batch of acquires and releases costs on MySQL/MariaDB: `acquire_many` (all granted,
//! then all refused) and `release_many` of 600 and 1,000 rows among 9,000 others, beside the
//! batch form the set-based statements replaced (each request's single acquire statement in
//! one text, `START TRANSACTION` to `COMMIT`), sent in the same run on the same connection.
//!
//! `cargo bench -p lock-provider-mysql --bench batch` runs 15 rounds per size and prints the
//! medians and the ratio of the set-based text to the one it replaced; without `--bench` (as
//! `cargo test --all-targets` runs it) a smoke run of 2 rounds of 50 rows. BENCHMARKS.md,
//! "MariaDB set-based batch", has a run's numbers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use lock_core::{AcquireOutcome, FireSlot, LockProvider, LockRequest, testkit};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::prelude::Queryable;
use lock_sql::sql::SqlValue;
use lock_sql::sql::mysql::{Shape, Statements, Table};
use test_support::Mode;

use common::{median, ms, send};

mod common;

const TABLE: &str = "lock_provider_mysql_batch_bench";
const ME: &str = "bench-instance";

fn main() {
    test_support::mode::run_on_current_thread(run);
}

async fn run(mode: Mode) {
    let (sizes, rounds, others): (&[usize], i64, usize) =
        mode.pick((&[600, 1000], 15, 9000), (&[50], 2, 100));
    let Some((pool, mut conn)) = common::connect(2).await else {
        return;
    };
    conn.query_drop(format!("DROP TABLE IF EXISTS `{TABLE}`"))
        .await
        .expect("drop the bench table");
    let provider = MySqlLockProvider::new(pool.clone())
        .with_table(TABLE)
        .expect("valid table");
    provider.ensure_schema().await.expect("ensure_schema");
    // The rows of other jobs, which the batch's statements must not scan.
    let mut rows =
        format!("INSERT INTO `{TABLE}` (name, lock_until, locked_at, locked_by, fence) VALUES ");
    for i in 0..others {
        let sep = if i > 0 { "," } else { "" };
        rows.push_str(&format!(
            "{sep}('other-{i:05}', UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), 'x', 1)"
        ));
    }
    conn.query_drop(rows).await.expect("insert the other rows");
    let statements = Statements::new(
        &Table::new(&lock_sql::LockTableConfig::default().with_table(TABLE)).expect("table"),
        Shape {
            extended: true,
            zone_sensitive: false,
        },
    );

    println!(
        "MySQL/MariaDB batches ({} run), median of {rounds} rounds, among {others} other rows:",
        mode.name()
    );
    let base = Utc::now();
    for &n in sizes {
        let names: Vec<Arc<str>> = (0..n).map(|i| format!("job-{n}-{i:05}").into()).collect();
        let [
            mut granted,
            mut refused,
            mut released,
            mut set_based,
            mut replaced,
        ] = [(); 5].map(|_| Vec::new());
        for round in 0..rounds {
            // Each round a slot of its own, in the past: every request of the first batch is
            // granted, every one of the second refused (held).
            let slot = Some(FireSlot::new(base + TimeDelta::seconds(round - 60)));
            let requests: Vec<LockRequest> = names
                .iter()
                .map(|name| testkit::request(name, ME, Duration::from_secs(30), slot))
                .collect();
            let start = Instant::now();
            let outcomes = provider
                .acquire_many(&requests)
                .await
                .expect("acquire_many");
            granted.push(start.elapsed());
            let leases: Vec<_> = outcomes
                .into_iter()
                .map(|o| match o {
                    AcquireOutcome::Acquired(lease) => (lease, Duration::ZERO),
                    refused => panic!("a free row was refused: {refused:?}"),
                })
                .collect();
            let start = Instant::now();
            let again = provider
                .acquire_many(&requests)
                .await
                .expect("acquire_many");
            refused.push(start.elapsed());
            assert!(
                again
                    .iter()
                    .all(|o| matches!(o, AcquireOutcome::Refused(_)))
            );
            // The two texts alone, the same requests (refused), without the client's work.
            let sorted: Vec<&LockRequest> = requests.iter().collect();
            set_based.push(send(&mut conn, statements.acquire_batch(&sorted)).await);
            replaced.push(send(&mut conn, one_statement_per_request(&statements, &requests)).await);
            let start = Instant::now();
            let released_all = provider.release_many(&leases).await.expect("release_many");
            released.push(start.elapsed());
            assert!(released_all.iter().all(|r| *r), "a lease was not released");
        }
        let (set_based, replaced) = (median(set_based), median(replaced));
        println!(
            "  {n} rows: acquire_many granted {:.1} ms, refused {:.1} ms; release_many {:.1} ms; \
             the texts alone (refused): set-based {:.1} ms, one statement per request (before) \
             {:.1} ms, ratio {:.2}",
            ms(median(granted)),
            ms(median(refused)),
            ms(median(released)),
            ms(set_based),
            ms(replaced),
            set_based.as_secs_f64() / replaced.as_secs_f64()
        );
    }
    conn.query_drop(format!("DROP TABLE IF EXISTS `{TABLE}`"))
        .await
        .expect("drop the bench table");
    drop(conn);
    pool.disconnect().await.expect("disconnect");
}

/// The batch text as sent before the set-based form: the single acquire statement of each
/// request with its parameters as literals, between `START TRANSACTION` and `COMMIT`.
fn one_statement_per_request(statements: &Statements, requests: &[LockRequest]) -> String {
    use std::fmt::Write;

    let mut text = String::from("START TRANSACTION;");
    for request in requests {
        let (statement, params) = statements.acquire(request);
        let mut params = params.iter();
        for (i, part) in statement.split('?').enumerate() {
            match (i > 0).then(|| params.next()).flatten() {
                None if i == 0 => {}
                Some(SqlValue::Text(s)) => {
                    text.push_str("_utf8mb4 X'");
                    for byte in s.as_bytes() {
                        let _ = write!(text, "{byte:02X}");
                    }
                    text.push('\'');
                }
                Some(SqlValue::Int(n)) => {
                    let _ = write!(text, "{n}");
                }
                Some(SqlValue::Timestamp(Some(at))) => {
                    let _ = write!(text, "TIMESTAMP'{}'", at.format("%Y-%m-%d %H:%M:%S%.3f"));
                }
                Some(SqlValue::Timestamp(None)) | None => text.push_str("NULL"),
            }
            text.push_str(part);
        }
        text.push(';');
    }
    text.push_str("COMMIT");
    text
}
