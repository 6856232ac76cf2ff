//! What the provider's benches share: a pool on `LOCK_TEST_MYSQL_URL` with the provider's own
//! options, and the timing of a text of several statements.

use std::time::{Duration, Instant};

use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::{self, Conn, Opts, Pool, Row, prelude::Queryable};

/// A pool of at most `max` connections to `LOCK_TEST_MYSQL_URL`, with one connection taken
/// from it; `None` (a `SKIPPED` line, or a panic under `CI`) when the server cannot be reached.
#[allow(dead_code)] // Not every bench takes a connection of its own.
pub async fn connect(max: usize) -> Option<(Pool, Conn)> {
    let pool = pool(max);
    let connected = pool.get_conn().await;
    let url = test_support::db::mysql_url();
    let conn = test_support::skip::or_unreachable("mysql", &url, connected)?;
    Some((pool, conn))
}

/// A pool of at most `max` connections to `LOCK_TEST_MYSQL_URL`, with the provider's options.
pub fn pool(max: usize) -> Pool {
    let url = test_support::db::mysql_url();
    let opts = Opts::from_url(&url).expect("LOCK_TEST_MYSQL_URL is a valid URL");
    let builder = MySqlLockProvider::pool_options(opts);
    let pool_opts = Opts::from(builder.clone())
        .pool_opts()
        .clone()
        .with_constraints(mysql_async::PoolConstraints::new(1, max).expect("1..max"));
    Pool::new(builder.pool_opts(pool_opts))
}

/// Sends a text of several statements and reads every result (a failed statement panics);
/// how long it took.
#[allow(dead_code)] // Not every bench sends texts of its own.
pub async fn send(conn: &mut Conn, text: String) -> Duration {
    let start = Instant::now();
    let mut result = conn.query_iter(text).await.expect("batch text");
    while !result.is_empty() {
        result.collect::<Row>().await.expect("batch result");
    }
    // A failed statement ends the text with its error still pending.
    result.drop_result().await.expect("batch text");
    start.elapsed()
}

/// The median of `samples`.
#[allow(dead_code)]
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// `d` in milliseconds.
#[allow(dead_code)]
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
