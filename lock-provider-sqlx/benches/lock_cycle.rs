//! What a fire costs through the sqlx provider, against the floor of the same statements sent
//! by hand through sqlx, on PostgreSQL and on MySQL/MariaDB.
//!
//! `cargo bench -p lock-provider-sqlx --bench lock_cycle` runs the full measurement; without
//! `--bench` in its arguments (as under `cargo test --all-targets`) it runs a short smoke pass.
//!
//! Each backend runs on a pool of one connection, one operation at a time, interleaved (one of
//! each per iteration, in random order) so that load from elsewhere on the machine hits every
//! operation alike:
//! - `provider cycle`: `acquire` + `release` through `SqlxLockProvider`;
//! - `by-hand cycle`: the provider kit's statements (the text the provider runs), sent with
//!   `sqlx::query` on the same pool, prepared and cached by sqlx as the provider's are: the
//!   floor, one round trip for acquire and one for release;
//! - `losing acquire` through the provider while another owner holds the lock, and the same
//!   statement by hand;
//! - `SELECT 1` on the same pool: the cost of a round trip that does nothing, for context.
//!
//! On SQLite (a file in a temporary directory, WAL) the by-hand cycle is what the provider
//! sends: the refusal read, then `BEGIN IMMEDIATE`, the acquire, `COMMIT`, and the release; a
//! losing acquire is the refusal read alone.

use std::time::{Duration, Instant};

use chrono::Utc;
use lock_core::{AcquireOutcome, Lease, LockProvider, LockRequest};
use lock_provider_sqlx::SqlxLockProvider;
use lock_provider_sqlx::sqlx::mysql::{MySqlArguments, MySqlPoolOptions};
use lock_provider_sqlx::sqlx::postgres::PgPoolOptions;
use lock_provider_sqlx::sqlx::query::Query;
use lock_provider_sqlx::sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
};
use lock_provider_sqlx::sqlx::{self, AssertSqlSafe, MySql, MySqlPool, PgPool, Row};
use lock_sql::sql::SqlValue;
use lock_sql::sql::mysql::{Shape, Statements, Table};
use lock_sql::sql::postgres::{LockStatements, TableShape};
use lock_sql::sql::sqlite;
use lock_sql::{IdentifierStyle, LockTableConfig};
use test_support::{Mode, Samples, Unit, stats};

/// Provider-cycle time over by-hand-cycle time must stay at or under this.
const CYCLE_TARGET: f64 = 1.15;
/// Losing acquire through the provider over the same statement sent by hand.
const LOSING_TARGET: f64 = 1.10;

fn main() {
    test_support::mode::run_on_current_thread(run);
}

async fn run(mode: Mode) {
    let (rounds, per_round) = mode.pick((10, 500), (2, 20));
    let (rounds, per_round) = match std::env::var("LOCK_BENCH_SAMPLES") {
        Ok(n) => (1, n.parse().expect("LOCK_BENCH_SAMPLES")),
        Err(_) => (rounds, per_round),
    };
    postgres(mode, rounds * per_round).await;
    mysql(mode, rounds * per_round).await;
    sqlite(mode, rounds * per_round).await;
}

fn request(name: &str, owner: &str, at_most: Duration) -> LockRequest {
    LockRequest {
        name: name.into(),
        locked_by: owner.into(),
        lock_at_most_for: at_most,
        slot: None,
        max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
        give_up_at: None,
    }
}

/// The four measured operations, each one call.
trait Bench {
    async fn provider_cycle(&self);
    async fn hand_cycle(&self);
    async fn losing(&self);
    async fn hand_losing(&self);
    async fn select_1(&self);
}

/// Runs `bench` `samples` times per operation, interleaved, and prints the ratios.
async fn measure(mode: Mode, what: &str, samples: usize, bench: &impl Bench) {
    for _ in 0..50.min(samples) {
        bench.provider_cycle().await;
        bench.hand_cycle().await;
        bench.losing().await;
        bench.hand_losing().await;
        bench.select_1().await;
    }
    let mut all = [
        Samples::new("provider cycle"),
        Samples::new("by-hand cycle (floor)"),
        Samples::new("losing acquire"),
        Samples::new("by-hand losing acquire"),
        Samples::new("SELECT 1"),
    ];
    let mut order = [0usize, 1, 2, 3, 4];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let started = Instant::now();
    for _ in 0..samples {
        shuffle(&mut order, &mut seed);
        for op in order {
            let t = Instant::now();
            match op {
                0 => bench.provider_cycle().await,
                1 => bench.hand_cycle().await,
                2 => bench.losing().await,
                3 => bench.hand_losing().await,
                _ => bench.select_1().await,
            }
            all[op].record(t);
        }
    }
    println!(
        "lock_cycle ({} run): {what} through sqlx, one connection, {samples} samples per \
         operation, {:.1} s, measured at {}",
        mode.name(),
        started.elapsed().as_secs_f64(),
        Utc::now().format("%Y-%m-%d %H:%M UTC")
    );
    for samples in &all {
        samples.print(Unit::Millis);
    }
    let [cycle, hand_cycle, losing, hand_losing, select] = &all;
    stats::ratio_line(
        &format!("{what}: provider cycle / by-hand cycle"),
        cycle,
        hand_cycle,
        CYCLE_TARGET,
        mode.judged(),
    );
    stats::ratio_line(
        &format!("{what}: losing acquire / the same statement by hand"),
        losing,
        hand_losing,
        LOSING_TARGET,
        mode.judged(),
    );
    stats::comparison_line(
        &format!("{what}: losing acquire / SELECT 1"),
        losing,
        select,
    );
}

struct PgBench {
    pool: PgPool,
    provider: SqlxLockProvider,
    sql: LockStatements,
    cycle: LockRequest,
    loser: LockRequest,
}

impl PgBench {
    fn query(
        &self,
        text: &str,
        values: &[SqlValue],
    ) -> Query<'static, sqlx::Postgres, sqlx::postgres::PgArguments> {
        let mut query = sqlx::query(AssertSqlSafe(text.to_owned()));
        for value in values {
            query = match value {
                SqlValue::Text(text) => query.bind(text.clone()),
                SqlValue::Int(int) => query.bind(*int),
                SqlValue::Timestamp(at) => query.bind(*at),
            };
        }
        query
    }

    /// `$1` name, `$2` at most (ms), `$3` owner, `$4` slot, `$5` lead (ms), `$6` give up at, as
    /// the provider binds.
    fn acquire_params(name: &str, owner: &str) -> [SqlValue; 6] {
        [
            SqlValue::Text(name.to_owned()),
            SqlValue::Int(60_000),
            SqlValue::Text(owner.to_owned()),
            SqlValue::Timestamp(None),
            SqlValue::Int(5_000),
            SqlValue::Timestamp(None),
        ]
    }
}

impl Bench for PgBench {
    async fn provider_cycle(&self) {
        let AcquireOutcome::Acquired(lease) = self.provider.acquire(&self.cycle).await.unwrap()
        else {
            panic!("cycle lock refused");
        };
        assert!(self.provider.release(&lease, Duration::ZERO).await.unwrap());
    }

    async fn hand_cycle(&self) {
        let params = Self::acquire_params("bench-hand", "bench-instance");
        let rows = self
            .query(&self.sql.acquire, &params)
            .fetch_all(&self.pool)
            .await
            .unwrap();
        let fence: i64 = match rows.first() {
            Some(row) => row.get::<Option<i64>, _>(0).expect("by-hand lock refused"),
            None => self
                .query(&self.sql.create, &params)
                .fetch_one(&self.pool)
                .await
                .unwrap()
                .get(0),
        };
        let release = [
            SqlValue::Text("bench-hand".into()),
            SqlValue::Text("bench-instance".into()),
            SqlValue::Int(fence),
            SqlValue::Int(0),
        ];
        let done = self
            .query(&self.sql.release, &release)
            .execute(&self.pool)
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 1);
    }

    async fn losing(&self) {
        let outcome = self.provider.acquire(&self.loser).await.unwrap();
        assert!(matches!(outcome, AcquireOutcome::Refused(_)));
    }

    async fn hand_losing(&self) {
        let params = Self::acquire_params("bench-held", "loser");
        let row = self
            .query(&self.sql.acquire, &params)
            .fetch_one(&self.pool)
            .await
            .unwrap();
        assert_eq!(row.get::<Option<i64>, _>(0), None);
    }

    async fn select_1(&self) {
        sqlx::query("SELECT 1").fetch_one(&self.pool).await.unwrap();
    }
}

async fn postgres(mode: Mode, samples: usize) {
    let url = test_support::db::postgres_url();
    let connected = PgPoolOptions::new().max_connections(1).connect(&url).await;
    let Some(pool) = test_support::skip::or_unreachable("postgres", &url, connected) else {
        return;
    };
    let table = test_support::table::unique_table("locksqlx_bench");
    let _drop_table = test_support::table::drop_postgres_table(&table);
    let provider = SqlxLockProvider::postgres(pool.clone())
        .with_table(&table)
        .expect("table name");
    provider.ensure_schema().await.expect("ensure_schema");
    let resolved = LockTableConfig::default()
        .with_table(&table)
        .resolve(IdentifierStyle::POSTGRES)
        .expect("table name");
    let held = request("bench-held", "holder", Duration::from_secs(3600));
    let AcquireOutcome::Acquired(held_lease) = provider.acquire(&held).await.unwrap() else {
        panic!("could not take the held lock");
    };
    let bench = PgBench {
        pool,
        sql: LockStatements::new(&resolved, TableShape::Full),
        cycle: request("bench-cycle", "bench-instance", Duration::from_secs(60)),
        loser: request("bench-held", "loser", Duration::from_secs(60)),
        provider,
    };
    measure(mode, "PostgreSQL", samples, &bench).await;
    bench
        .provider
        .release(&held_lease, Duration::ZERO)
        .await
        .expect("release");
}

struct MyBench {
    pool: MySqlPool,
    provider: SqlxLockProvider,
    sql: Statements,
    cycle: LockRequest,
    loser: LockRequest,
    hand: LockRequest,
}

fn my_query(text: &str, values: Vec<SqlValue>) -> Query<'static, MySql, MySqlArguments> {
    let mut query = sqlx::query(AssertSqlSafe(text.to_owned()));
    for value in values {
        query = match value {
            SqlValue::Text(text) => query.bind(text),
            SqlValue::Int(int) => query.bind(int),
            SqlValue::Timestamp(at) => query.bind(at),
        };
    }
    query
}

impl Bench for MyBench {
    async fn provider_cycle(&self) {
        let AcquireOutcome::Acquired(lease) = self.provider.acquire(&self.cycle).await.unwrap()
        else {
            panic!("cycle lock refused");
        };
        assert!(self.provider.release(&lease, Duration::ZERO).await.unwrap());
    }

    async fn hand_cycle(&self) {
        let (text, values) = self.sql.acquire(&self.hand);
        let done = my_query(text, values).execute(&self.pool).await.unwrap();
        let outcome =
            self.sql
                .acquire_outcome(&self.hand, done.last_insert_id(), done.rows_affected());
        let Some(AcquireOutcome::Acquired(lease)) = outcome else {
            panic!("by-hand lock refused: {outcome:?}");
        };
        let lease: Lease = lease;
        let (text, values) = self.sql.release(&lease, Duration::ZERO);
        let done = my_query(text, values).execute(&self.pool).await.unwrap();
        assert_eq!(done.last_insert_id(), 1);
    }

    async fn losing(&self) {
        let outcome = self.provider.acquire(&self.loser).await.unwrap();
        assert!(matches!(outcome, AcquireOutcome::Refused(_)));
    }

    async fn hand_losing(&self) {
        let (text, values) = self.sql.acquire(&self.loser);
        let done = my_query(text, values).execute(&self.pool).await.unwrap();
        let outcome =
            self.sql
                .acquire_outcome(&self.loser, done.last_insert_id(), done.rows_affected());
        assert!(matches!(outcome, Some(AcquireOutcome::Refused(_))));
    }

    async fn select_1(&self) {
        sqlx::query("SELECT 1").fetch_one(&self.pool).await.unwrap();
    }
}

async fn mysql(mode: Mode, samples: usize) {
    let url = test_support::db::mysql_url();
    let connected = MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await;
    let Some(pool) = test_support::skip::or_unreachable("mysql", &url, connected) else {
        return;
    };
    let table = test_support::table::unique_table("locksqlx_bench");
    let _drop_table = test_support::table::drop_mysql_table(&table);
    let provider = SqlxLockProvider::mysql(pool.clone())
        .with_table(&table)
        .expect("table name");
    provider.ensure_schema().await.expect("ensure_schema");
    let resolved = Table::new(&LockTableConfig::default().with_table(&table)).expect("table name");
    let held = request("bench-held", "holder", Duration::from_secs(3600));
    let AcquireOutcome::Acquired(held_lease) = provider.acquire(&held).await.unwrap() else {
        panic!("could not take the held lock");
    };
    let shape = Shape {
        extended: true,
        zone_sensitive: false,
    };
    let bench = MyBench {
        pool,
        sql: Statements::new(&resolved, shape),
        cycle: request("bench-cycle", "bench-instance", Duration::from_secs(60)),
        loser: request("bench-held", "loser", Duration::from_secs(60)),
        hand: request("bench-hand", "bench-instance", Duration::from_secs(60)),
        provider,
    };
    measure(mode, "MySQL/MariaDB", samples, &bench).await;
    bench
        .provider
        .release(&held_lease, Duration::ZERO)
        .await
        .expect("release");
}

struct LiteBench {
    pool: SqlitePool,
    provider: SqlxLockProvider,
    sql: sqlite::Statements,
    cycle: LockRequest,
    loser: LockRequest,
}

impl LiteBench {
    /// The refusal read (`?1` name, `?2` slot): the reason code, 0 when the lease is free.
    async fn refusal(&self, conn: &mut sqlx::SqliteConnection, name: &str) -> Option<i64> {
        sqlx::query(AssertSqlSafe(self.sql.refusal.clone()))
            .bind(name.to_owned())
            .bind(None::<String>)
            .fetch_optional(&mut *conn)
            .await
            .unwrap()
            .map(|row| row.get::<i64, _>(3))
    }
}

impl Bench for LiteBench {
    async fn provider_cycle(&self) {
        let AcquireOutcome::Acquired(lease) = self.provider.acquire(&self.cycle).await.unwrap()
        else {
            panic!("cycle lock refused");
        };
        assert!(self.provider.release(&lease, Duration::ZERO).await.unwrap());
    }

    async fn hand_cycle(&self) {
        let mut conn = self.pool.acquire().await.unwrap();
        assert_ne!(self.refusal(&mut conn, "bench-hand").await, Some(1));
        let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE")
            .await
            .unwrap();
        let fence: i64 = sqlx::query(AssertSqlSafe(self.sql.acquire.clone()))
            .bind("bench-hand".to_owned())
            .bind("bench-instance".to_owned())
            .bind(60_000_i64)
            .bind(None::<String>)
            .bind(5_000_i64)
            .bind(None::<String>)
            .fetch_one(&mut *tx)
            .await
            .unwrap()
            .get(0);
        tx.commit().await.unwrap();
        drop(conn);
        let done = sqlx::query(AssertSqlSafe(self.sql.release.clone()))
            .bind("bench-hand".to_owned())
            .bind("bench-instance".to_owned())
            .bind(fence)
            .bind(0_i64)
            .execute(&self.pool)
            .await
            .unwrap();
        assert_eq!(done.rows_affected(), 1);
    }

    async fn losing(&self) {
        let outcome = self.provider.acquire(&self.loser).await.unwrap();
        assert!(matches!(outcome, AcquireOutcome::Refused(_)));
    }

    async fn hand_losing(&self) {
        let mut conn = self.pool.acquire().await.unwrap();
        assert_eq!(self.refusal(&mut conn, "bench-held").await, Some(1));
    }

    async fn select_1(&self) {
        sqlx::query("SELECT 1").fetch_one(&self.pool).await.unwrap();
    }
}

async fn sqlite(mode: Mode, samples: usize) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let options = SqliteConnectOptions::new()
        .filename(dir.path().join("locks.db"))
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal);
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .expect("open the SQLite file");
    let provider = SqlxLockProvider::sqlite(pool.clone());
    provider.ensure_schema().await.expect("ensure_schema");
    let table = sqlite::Table::new(&LockTableConfig::default()).expect("table name");
    let held = request("bench-held", "holder", Duration::from_secs(3600));
    let AcquireOutcome::Acquired(_) = provider.acquire(&held).await.unwrap() else {
        panic!("could not take the held lock");
    };
    let bench = LiteBench {
        pool,
        sql: sqlite::Statements::new(table),
        cycle: request("bench-cycle", "bench-instance", Duration::from_secs(60)),
        loser: request("bench-held", "loser", Duration::from_secs(60)),
        provider,
    };
    measure(mode, "SQLite", samples, &bench).await;
}

/// Fisher-Yates with xorshift64: a fixed-seed, dependency-free shuffle.
fn shuffle(order: &mut [usize], seed: &mut u64) {
    for i in (1..order.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        order.swap(i, (*seed % (i as u64 + 1)) as usize);
    }
}
