//! Batches (`acquire_many`, `acquire_many_each`, `release_many`) on each backend, beyond the
//! conformance suite's `batch_mixed_outcomes` and `batch_concurrent_fuzz` (which
//! `conformance_*.rs` run on each): the same batch size as the driver-specific providers, the
//! suite's batch functions with a sqlx and a driver-specific provider taking turns on one
//! table (their batches exclude each other and never deadlock), and on PostgreSQL the two
//! statements of a batch: the first skips a row another transaction holds and commits (and
//! tells) the others, the second waits for that row and decides it as the transaction left it;
//! and a single acquire that waited for such a row likewise told who won it.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use lock_core::{
    AcquireOutcome, FireSlot, Lease, LockError, LockProvider, LockRecord, LockRequest,
    RefusalReason, testkit,
};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_postgres::PostgresLockProvider;
use lock_provider_sqlite::SqliteLockProvider;
use lock_provider_sqlx::SqlxLockProvider;
use lock_provider_sqlx::sqlx::{self, AssertSqlSafe, PgPool};

/// Two providers on one table, taking turns: each call goes to the one whose turn it is, so
/// the suite's batch functions send the sqlx provider's batches and the driver-specific
/// provider's against the same rows, at the same time.
struct TakingTurns {
    providers: [Box<dyn LockProvider>; 2],
    turn: AtomicUsize,
}

impl TakingTurns {
    fn new(sqlx: SqlxLockProvider, native: impl LockProvider) -> Self {
        TakingTurns {
            providers: [Box::new(sqlx), Box::new(native)],
            turn: AtomicUsize::new(0),
        }
    }

    fn next(&self) -> &dyn LockProvider {
        &*self.providers[self.turn.fetch_add(1, Ordering::Relaxed) % 2]
    }
}

#[async_trait]
impl LockProvider for TakingTurns {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        self.next().acquire(request).await
    }
    async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        self.next().acquire_many(requests).await
    }
    async fn acquire_many_each(
        &self,
        requests: &[LockRequest],
        decided: &(dyn Fn(usize, AcquireOutcome) + Send + Sync),
    ) -> Result<(), LockError> {
        self.next().acquire_many_each(requests, decided).await
    }
    async fn release_many(&self, leases: &[(Lease, Duration)]) -> Result<Vec<bool>, LockError> {
        self.next().release_many(leases).await
    }
    fn max_batch(&self) -> usize {
        self.providers[0].max_batch()
    }
    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        self.next().extend(lease, lock_at_most_for).await
    }
    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        self.next().release(lease, lock_at_least_for).await
    }
    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.next().list_locks().await
    }
    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.next().read_lock(name).await
    }
    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.next().force_unlock(name).await
    }
    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        self.next().database_time().await
    }
    fn describe(&self) -> String {
        format!(
            "{} taking turns with {}",
            self.providers[0].describe(),
            self.providers[1].describe()
        )
    }
}

/// The suite's batch functions, with `both` taking turns on one table.
async fn batches_taking_turns(both: TakingTurns) {
    assert_eq!(
        both.providers[0].max_batch(),
        both.providers[1].max_batch(),
        "the sqlx provider batches as many requests as the driver-specific one"
    );
    testkit::batch_mixed_outcomes(&both).await;
    testkit::batch_concurrent_fuzz(&both).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_batches_of_sqlx_and_deadpool_on_one_table() {
    let Some(sqlx) = common::pg_provider(common::PG_CONFORMANCE_TABLE).await else {
        return;
    };
    let deadpool = PostgresLockProvider::connect(&common::postgres_url())
        .await
        .expect("connect")
        .with_table(common::PG_CONFORMANCE_TABLE)
        .expect("valid table");
    batches_taking_turns(TakingTurns::new(sqlx, deadpool)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_batches_of_sqlx_and_mysql_async_on_one_table() {
    let Some(sqlx) = common::mysql_provider(common::MYSQL_CONFORMANCE_TABLE).await else {
        return;
    };
    let mysql_async = MySqlLockProvider::connect(&common::mysql_url())
        .await
        .expect("connect")
        .with_table(common::MYSQL_CONFORMANCE_TABLE)
        .expect("valid table");
    batches_taking_turns(TakingTurns::new(sqlx, mysql_async)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_batches_of_sqlx_and_rusqlite_on_one_file() {
    let Some((dir, sqlx)) = common::sqlite_provider().await else {
        return;
    };
    let rusqlite = SqliteLockProvider::open(dir.path().join("locks.db")).expect("open");
    batches_taking_turns(TakingTurns::new(sqlx, rusqlite)).await;
}

/// The provider on the PostgreSQL conformance table and a pool of its own for the statements
/// a test writes by hand (a blocker's transaction, an observer).
async fn pg_provider_and_pool() -> Option<(SqlxLockProvider, PgPool)> {
    let provider = common::pg_provider(common::PG_CONFORMANCE_TABLE).await?;
    Some((provider, common::pg_pool().await?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_locked_row_is_waited_for_after_the_free_rows_are_told() {
    let Some((provider, pool)) = pg_provider_and_pool().await else {
        return;
    };
    let table = common::PG_CONFORMANCE_TABLE;
    let locked = testkit::unique_name("skip-locked");
    let free = testkit::unique_name("skip-free");
    let base = Utc::now();
    let slot = |s: i64| Some(FireSlot::new(base + TimeDelta::seconds(s)));
    let lease_for = Duration::from_secs(300);
    // Both rows exist and are free, their last slot run at `base`.
    for name in [&locked, &free] {
        let first = testkit::request(name, "setup", lease_for, slot(0));
        let AcquireOutcome::Acquired(lease) = provider.acquire(&first).await.unwrap() else {
            panic!("setup acquire refused");
        };
        assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    }

    // Another transaction (as a release or an operator's unlock in flight would) holds the
    // row lock of `locked`, without changing it.
    let mut blocker = pool.acquire().await.unwrap();
    let blocker_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *blocker)
        .await
        .unwrap();
    let mut tx = sqlx::Connection::begin(&mut *blocker).await.unwrap();
    sqlx::query(AssertSqlSafe(format!(
        "SELECT 1 FROM {table} WHERE name = $1 FOR UPDATE"
    )))
    .bind(locked.to_string())
    .execute(&mut *tx)
    .await
    .unwrap();

    let requests = vec![
        testkit::request(&locked, "batch", lease_for, slot(1)),
        testkit::request(&free, "batch", lease_for, slot(1)),
    ];
    let (told_tx, mut told) = tokio::sync::mpsc::unbounded_channel();
    let batch = {
        let provider = provider.clone();
        tokio::spawn(async move {
            provider
                .acquire_many_each(&requests, &move |at, outcome| {
                    let _ = told_tx.send((at, outcome));
                })
                .await
        })
    };

    // The batch's second statement waits for the blocker's lock.
    assert!(
        waits_for(&pool, blocker_pid).await,
        "the batch never waited for the locked row"
    );
    assert!(
        !batch.is_finished(),
        "the batch decided a locked row without waiting"
    );
    // While it waits, the free row is already granted and committed: the first statement did
    // not wait behind the lock.
    let owner: String = sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT locked_by FROM {table} WHERE name = $1 \
         AND lock_until > timezone('utc', CURRENT_TIMESTAMP)"
    )))
    .bind(free.to_string())
    .fetch_one(&pool)
    .await
    .expect("the free row is held, committed, while the batch waits");
    assert_eq!(owner, "batch");
    // ... and told to its caller already, the locked one not.
    let (at, outcome) = told
        .try_recv()
        .expect("the free row's grant was told before the wait");
    assert_eq!(at, 1, "{outcome:?}");
    let AcquireOutcome::Acquired(free_lease) = outcome else {
        panic!("the free row was refused: {outcome:?}");
    };
    assert!(
        told.try_recv().is_err(),
        "the locked row was told before its wait"
    );

    // The lock goes away: the skipped row is decided as it then is, free, so its slot runs.
    tx.commit().await.unwrap();
    batch.await.unwrap().unwrap();
    let (at, outcome) = told
        .try_recv()
        .expect("the locked row was told after the wait");
    assert_eq!(at, 0);
    let AcquireOutcome::Acquired(lease) = outcome else {
        panic!("{locked}: refused, its slot lost: {outcome:?}");
    };
    assert!(told.try_recv().is_err(), "each row told once");
    let released = provider
        .release_many(&[(lease, Duration::ZERO), (free_lease, Duration::ZERO)])
        .await
        .unwrap();
    assert_eq!(released, [true, true]);
}

/// A row taken by the transaction the second statement waited for is refused as that
/// transaction left it: held, by whom, and which slot it ran (a fire that asked ahead of its
/// slot reads from this that the slot was taken and does not ask again at the slot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_row_taken_during_the_wait_is_refused_with_its_new_holder_and_slot() {
    row_taken_during_the_wait(true).await;
}

/// The same race with a single acquire: its statement reads the row from a snapshot taken
/// before the rival committed, so the provider reads the row again to tell who won
/// (`lock_sql::sql::postgres::refusal_as_committed`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_single_acquire_that_lost_a_race_is_told_the_winners_slot() {
    row_taken_during_the_wait(false).await;
}

/// A rival takes a row in a transaction still open when the acquire (a batch, or one) comes;
/// the acquire waits for it and is refused with the rival's name and slot.
async fn row_taken_during_the_wait(batched: bool) {
    let Some((provider, pool)) = pg_provider_and_pool().await else {
        return;
    };
    let table = common::PG_CONFORMANCE_TABLE;
    let taken = testkit::unique_name("skip-taken");
    let base = Utc::now();
    let slot = |s: i64| FireSlot::new(base + TimeDelta::seconds(s));
    let lease_for = Duration::from_secs(300);
    let first = testkit::request(&taken, "setup", lease_for, Some(slot(0)));
    let AcquireOutcome::Acquired(lease) = provider.acquire(&first).await.unwrap() else {
        panic!("setup acquire refused");
    };
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());

    // A rival takes the row for slot 1 in a transaction still open when the batch comes.
    let mut rival = pool.acquire().await.unwrap();
    let rival_pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut *rival)
        .await
        .unwrap();
    let mut tx = sqlx::Connection::begin(&mut *rival).await.unwrap();
    sqlx::query(AssertSqlSafe(format!(
        "UPDATE {table} SET lock_until = timezone('utc', CURRENT_TIMESTAMP) + interval '5 minutes', \
         locked_by = 'rival', fence = fence + 1, \
         last_fire = timezone('utc', to_timestamp($2::int8 / 1000.0)) WHERE name = $1"
    )))
    .bind(taken.to_string())
    .bind(slot(1).unix_millis())
    .execute(&mut *tx)
    .await
    .unwrap();

    // Two requests make a batch of the provider's statements; the second a fresh name.
    let other = testkit::unique_name("skip-other");
    let requests = vec![
        testkit::request(&taken, "batch", lease_for, Some(slot(1))),
        testkit::request(&other, "batch", lease_for, Some(slot(1))),
    ];
    let batch = {
        let provider = provider.clone();
        tokio::spawn(async move {
            if batched {
                provider.acquire_many(&requests).await
            } else {
                Ok(vec![provider.acquire(&requests[0]).await?])
            }
        })
    };
    // The batch's second statement (or the single acquire) waits for the rival's row lock.
    assert!(
        waits_for(&pool, rival_pid).await,
        "the acquire never waited for the rival's row"
    );
    tx.commit().await.unwrap();
    let outcomes = batch.await.unwrap().unwrap();
    let AcquireOutcome::Refused(refusal) = &outcomes[0] else {
        panic!("{taken}: granted while the rival holds it: {outcomes:?}");
    };
    assert_eq!(refusal.reason, RefusalReason::Held, "{refusal:?}");
    assert_eq!(refusal.locked_by.as_deref(), Some("rival"), "{refusal:?}");
    assert_eq!(
        refusal.last_fire.map(|at| at.timestamp_millis()),
        Some(slot(1).unix_millis()),
        "{refusal:?}"
    );
    assert!(
        refusal.lock_until.is_some_and(|until| until > Utc::now()),
        "{refusal:?}"
    );
    if batched {
        let AcquireOutcome::Acquired(lease) = &outcomes[1] else {
            panic!("{other}: a missing row must be created and granted: {outcomes:?}");
        };
        assert!(provider.release(lease, Duration::ZERO).await.unwrap());
    }
}

/// Waits (bounded, 10 s) until a backend waits for a lock `pid` holds: the batch's second
/// statement. Not a retry of an assertion: the condition is the batch reaching its wait.
async fn waits_for(observer: &PgPool, pid: i32) -> bool {
    for _ in 0..200 {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
        )
        .bind(pid)
        .fetch_one(observer)
        .await
        .unwrap();
        if n > 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A MySQL batch stopped by an error (here a lock wait timeout at its second statement) is
/// rolled back whole, and leaves no transaction open on the pooled connection: the next
/// operation on it commits as usual. Without the rollback, the first statement's grant would
/// stay uncommitted, and every later statement on that connection would run inside it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_a_failed_batch_leaves_no_transaction_open() {
    use lock_provider_sqlx::sqlx::Executor;
    use lock_provider_sqlx::sqlx::mysql::MySqlPoolOptions;

    let Some(observer) = common::mysql_pool().await else {
        return;
    };
    let table = common::MYSQL_CONFORMANCE_TABLE;
    // One connection, so the operation after the batch runs on the batch's connection; a lock
    // wait of one second (the least MySQL takes) ends the batch's wait with an error.
    let pool = MySqlPoolOptions::new()
        .max_connections(1)
        .after_connect(|conn, _| {
            Box::pin(async move {
                conn.execute("SET SESSION innodb_lock_wait_timeout = 1")
                    .await
                    .map(drop)
            })
        })
        .connect(&common::mysql_url())
        .await
        .expect("connect");
    let provider = SqlxLockProvider::mysql(pool)
        .with_table(table)
        .expect("valid table");
    provider.ensure_schema().await.expect("ensure_schema");
    let lease_for = Duration::from_secs(300);
    // `first` sorts before `second`: the batch takes `first`, then waits for `second`.
    let first = testkit::unique_name("a-failed-batch");
    let second = testkit::unique_name("b-failed-batch");
    for name in [&first, &second] {
        let set_up = testkit::request(name, "setup", lease_for, None);
        let AcquireOutcome::Acquired(lease) = provider.acquire(&set_up).await.unwrap() else {
            panic!("setup acquire refused");
        };
        assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    }
    let mut blocker = observer.begin().await.unwrap();
    sqlx::query(AssertSqlSafe(format!(
        "SELECT 1 FROM `{table}` WHERE name = ? FOR UPDATE"
    )))
    .bind(second.to_string())
    .execute(&mut *blocker)
    .await
    .unwrap();

    let requests = [
        testkit::request(&first, "batch", lease_for, None),
        testkit::request(&second, "batch", lease_for, None),
    ];
    let failed = provider.acquire_many(&requests).await;
    assert!(
        failed.is_err(),
        "the batch waited past its lock wait timeout: {failed:?}"
    );
    blocker.rollback().await.unwrap();
    let held = |name: &str| {
        let observer = observer.clone();
        let name = name.to_owned();
        async move {
            let held: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
                "SELECT COUNT(*) FROM `{table}` WHERE name = ? AND lock_until > UTC_TIMESTAMP(3)"
            )))
            .bind(name)
            .fetch_one(&observer)
            .await
            .unwrap();
            held > 0
        }
    };
    assert!(
        !held(&first).await,
        "a failed batch must write nothing: its first grant was rolled back"
    );
    // The next acquire, on the same connection, commits: seen from another connection.
    let AcquireOutcome::Acquired(lease) = provider.acquire(&requests[0]).await.unwrap() else {
        panic!("{first} refused after the failed batch");
    };
    assert!(
        held(&first).await,
        "the acquire after a failed batch ran inside the batch's open transaction"
    );
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
}
