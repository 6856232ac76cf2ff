//! Test plumbing: where the databases are (and what to do when they are not there), a fixture
//! per test with its own lock and runs tables, service processes, and waiting.

#![allow(dead_code, unused_imports, unreachable_pub)] // each test binary uses a different part

/// One `#[tokio::test]` per provider for a scenario function:
/// `scenario!(holder_killed: postgres => Postgres, mysql => MySql);` makes
/// `holder_killed::postgres` and `holder_killed::mysql`, each calling
/// `holder_killed(Provider::..)` of the file (`#[macro_use] mod common;`).
#[allow(unused_macros)] // the files without providers to repeat do not use it
macro_rules! scenario {
    ($scenario:ident: $($test:ident => $provider:ident),+ $(,)?) => {
        mod $scenario {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    super::$scenario(super::Provider::$provider).await;
                }
            )+
        }
    };
}

pub mod instance;
pub mod proxy;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use fault_tests::{Backend, Run, RunsTable, SchemaAction};
use lock_cluster::{Cluster, ClusterProvider};
use lock_core::{LockProvider, LockRecord};

pub use instance::{Instance, Service};

/// The database servers and the embedded file the scenarios run against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    Postgres,
    MySql,
    Sqlite,
    Redis,
    /// PostgreSQL through `lock-provider-sqlx`.
    SqlxPostgres,
    /// MariaDB through `lock-provider-sqlx`.
    SqlxMySql,
    /// A shared SQLite file through `lock-provider-sqlx`.
    SqlxSqlite,
}

impl Provider {
    pub fn short(self) -> &'static str {
        match self {
            Provider::Postgres => "pg",
            Provider::MySql => "my",
            Provider::Sqlite => "lite",
            Provider::Redis => "rd",
            Provider::SqlxPostgres => "sqlxpg",
            Provider::SqlxMySql => "sqlxmy",
            Provider::SqlxSqlite => "sqlxlite",
        }
    }

    /// A SQLite file of the test's own (never unreachable).
    pub fn is_sqlite(self) -> bool {
        matches!(self, Provider::Sqlite | Provider::SqlxSqlite)
    }
}

pub use test_support::db::{mysql_url, postgres_url, redis_url};
pub use test_support::process::eventually;
pub use test_support::skip::{chain, unreachable};

/// `faketime` is needed by the clock-skew scenario: under `CI` its absence fails the test.
pub fn faketime_available() -> bool {
    test_support::skip::command_available("faketime")
}

/// One test's world: a database, a lock table and a runs table of its own (dropped at the
/// end, also when the test fails), and a provider to read the lock rows with.
pub struct Fixture {
    pub provider: Provider,
    /// `<scenario>-<provider>`: prefix of instance names.
    pub tag: String,
    pub backend: Backend,
    /// Where the runs table is: `backend`, or a server the test does not break.
    pub runs_backend: Backend,
    pub lock_table: String,
    pub runs: RunsTable,
    /// The lock provider, with the cluster's tables (history, control, action log).
    pub locks: Arc<dyn ClusterProvider>,
    dir: Option<tempfile::TempDir>,
}

impl Fixture {
    /// `None` when the database is unreachable and `CI` is not set (after a SKIPPED line).
    pub async fn new(provider: Provider, scenario: &str) -> Option<Fixture> {
        let (backend, dir) = match provider {
            Provider::Postgres => (Backend::Postgres(postgres_url()), None),
            Provider::MySql => (Backend::MySql(mysql_url()), None),
            Provider::SqlxPostgres => (Backend::SqlxPostgres(postgres_url()), None),
            Provider::SqlxMySql => (Backend::SqlxMySql(mysql_url()), None),
            Provider::Sqlite => {
                let dir = tempfile::tempdir().expect("a temp dir for the SQLite file");
                (Backend::Sqlite(dir.path().join("locks.db")), Some(dir))
            }
            Provider::Redis => (Backend::Redis(redis_url()), None),
            Provider::SqlxSqlite => {
                let dir = tempfile::tempdir().expect("a temp dir for the SQLite file");
                (Backend::SqlxSqlite(dir.path().join("locks.db")), Some(dir))
            }
        };
        Fixture::on(provider, scenario, backend, dir).await
    }

    /// [`new`](Self::new) on a backend of the test's own (a private Redis server, say).
    pub async fn on(
        provider: Provider,
        scenario: &str,
        backend: Backend,
        dir: Option<tempfile::TempDir>,
    ) -> Option<Fixture> {
        Fixture::with_runs_in(provider, scenario, backend.clone(), backend, dir).await
    }

    /// [`on`](Self::on) with the runs table on `runs_backend` (the services get `--runs-url`),
    /// so the runs are recorded while the lock server is broken.
    pub async fn with_runs_in(
        provider: Provider,
        scenario: &str,
        backend: Backend,
        runs_backend: Backend,
        dir: Option<tempfile::TempDir>,
    ) -> Option<Fixture> {
        let base =
            test_support::table::unique_table(&format!("ft_{scenario}_{}", provider.short()));
        let lock_table = format!("{base}_l");
        let locks = match backend
            .lock_provider(&lock_table, SchemaAction::Create)
            .await
        {
            Ok(locks) => locks,
            Err(e) if !provider.is_sqlite() => {
                unreachable(backend.kind(), &backend.location(), &chain(&e));
                return None;
            }
            Err(e) => panic!("open the SQLite lock file: {}", chain(&e)),
        };
        let runs = RunsTable::open(&runs_backend, &format!("{base}_r"))
            .await
            .unwrap_or_else(|e| panic!("open the runs table: {e}"));
        runs.create().await.expect("create the runs table");
        Some(Fixture {
            provider,
            tag: format!("{scenario}-{}", provider.short()),
            backend,
            runs_backend,
            lock_table,
            runs,
            locks,
            dir,
        })
    }

    /// A service process for instance `<tag>-<letter>`, on this fixture's tables.
    pub fn service(&self, letter: &str) -> Service {
        let service = Service::new(
            format!("{}-{letter}", self.tag),
            &self.backend,
            &self.lock_table,
            self.runs.table(),
        );
        match self.runs_backend == self.backend {
            true => service,
            false => service.arg("--runs-url").arg(&self.runs_backend.location()),
        }
    }

    /// The database's clock, Unix ms.
    pub async fn now(&self) -> i64 {
        self.runs.now_ms().await.expect("read the database clock")
    }

    /// Every run so far.
    pub async fn all_runs(&self) -> Vec<Run> {
        self.runs.runs().await.expect("read the runs table")
    }

    /// The runs of `job`, in fence order.
    pub async fn runs_of(&self, job: &str) -> Vec<Run> {
        let mut runs: Vec<Run> = self
            .all_runs()
            .await
            .into_iter()
            .filter(|r| r.job == job)
            .collect();
        runs.sort_by_key(|r| r.fence);
        runs
    }

    /// The lock row of `name`.
    pub async fn lock_row(&self, name: &str) -> Option<LockRecord> {
        self.locks
            .list_locks()
            .await
            .expect("list the lock rows")
            .into_iter()
            .find(|r| r.name == name)
    }

    /// Kills `victim` with `SIGKILL` and waits for its exit; returns the database's time then
    /// and when the last of its leases among `locks` ends (that time, if it held none): a body
    /// it was running keeps its lease until `lock_at_most_for`.
    pub async fn kill(
        &self,
        victim: &mut Instance,
        locks: impl IntoIterator<Item = String>,
    ) -> (i64, i64) {
        victim.signal("KILL");
        victim
            .wait_exit(Duration::from_secs(5))
            .await
            .expect("the killed instance is gone");
        let killed_at = self.now().await;
        let rows = self.locks.list_locks().await.expect("list the lock rows");
        let locks: Vec<String> = locks.into_iter().collect();
        let leases_end = rows
            .iter()
            .filter(|row| locks.contains(&row.name) && row.locked_by == victim.name)
            .map(|row| row.lock_until.timestamp_millis())
            .fold(killed_at, i64::max);
        (killed_at, leases_end)
    }

    /// The cluster's tables next to the lock table: history, control rows, action log.
    pub fn cluster(&self) -> &dyn Cluster {
        self.locks
            .cluster()
            .expect("the fault tests' providers keep the cluster's tables")
    }

    /// Creates the free row of lock `name` (no slot run yet), as the first fire would.
    pub async fn create_lock_row(&self, name: &str) {
        let request = lock_core::LockRequest {
            name: name.into(),
            locked_by: "fixture".into(),
            lock_at_most_for: Duration::from_secs(1),
            slot: None,
            max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
            give_up_at: None,
        };
        match self
            .locks
            .acquire(&request)
            .await
            .expect("create the lock row")
        {
            lock_core::AcquireOutcome::Acquired(lease) => {
                assert!(
                    self.locks
                        .release(&lease, Duration::ZERO)
                        .await
                        .expect("release")
                );
            }
            refused => panic!("a fresh lock {name:?} was refused: {refused:?}"),
        }
    }

    /// Polls the runs table every 100 ms until `pick` finds something; panics after `timeout`.
    pub async fn wait_for_run(
        &self,
        timeout: Duration,
        what: &str,
        pick: impl Fn(&[Run]) -> Option<Run>,
    ) -> Run {
        eventually(timeout, what, || async { pick(&self.all_runs().await) }).await
    }

    /// Drops the tables now (also done on drop).
    pub async fn cleanup(mut self) {
        let lock_table = self.lock_table.clone();
        let tables = with_operations_tables(&lock_table);
        let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
        self.runs
            .drop_tables(&tables)
            .await
            .expect("drop the test tables");
        if let Backend::Redis(url) = &self.backend {
            remove_redis_keys(url, &lock_table).await;
        }
        self.lock_table.clear();
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if self.lock_table.is_empty() {
            return;
        }
        // A failed test: drop the tables on a thread with its own runtime (Drop cannot await).
        let (backend, runs_backend, runs, lock) = (
            self.backend.clone(),
            self.runs_backend.clone(),
            self.runs.table().to_owned(),
            self.lock_table.clone(),
        );
        test_support::table::block_on_own_thread(move || async move {
            if let Ok(runs) = RunsTable::open(&runs_backend, &runs).await {
                let tables = with_operations_tables(&lock);
                let tables: Vec<&str> = tables.iter().map(String::as_str).collect();
                let _ = runs.drop_tables(&tables).await;
                let _ = runs.close().await;
            }
            if let Backend::Redis(url) = &backend {
                remove_redis_keys(url, &lock).await;
            }
        });
        let _ = &self.dir;
    }
}

/// The lock table and the operations tables its `ensure_schema()` creates next to it
/// (registry, history, control, action log), which the schedulers write.
fn with_operations_tables(lock_table: &str) -> Vec<String> {
    [
        "",
        "_instances",
        "_runs",
        "_control",
        "_actions",
        "_incidents",
    ]
    .iter()
    .map(|suffix| format!("{lock_table}{suffix}"))
    .collect()
}

/// Deletes the lock keys under `prefix` (a Redis fixture's "lock table") and the operations
/// keys under `{prefix:ops}` (the schedulers' registry): `KEYS` is fine for a test server's
/// handful of keys.
pub async fn remove_redis_keys(url: &str, prefix: &str) {
    use lock_provider_redis::redis;
    let Ok(client) = redis::Client::open(url) else {
        return;
    };
    let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
        return;
    };
    for pattern in [format!("{prefix}:*"), format!("{{{prefix}:ops}}:*")] {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(pattern)
            .query_async(&mut conn)
            .await
            .unwrap_or_default();
        if !keys.is_empty() {
            let _: Result<i64, _> = redis::cmd("DEL").arg(&keys).query_async(&mut conn).await;
        }
    }
}

/// Sleeps until the database clock reads at least `at_ms` (polling; the test host and the
/// database may disagree slightly).
pub async fn sleep_until_db(fx: &Fixture, at_ms: i64) {
    loop {
        let now = fx.now().await;
        if now >= at_ms {
            return;
        }
        let wait = (at_ms - now).clamp(10, 500);
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}

/// `(job, slot)` pairs that ran more than once, with their runs' instances.
pub fn duplicate_slots(runs: &[Run]) -> Vec<String> {
    let mut by_slot: BTreeMap<(&str, i64), Vec<&str>> = BTreeMap::new();
    for run in runs {
        if let Some(slot) = run.slot {
            by_slot
                .entry((&run.job, slot))
                .or_default()
                .push(&run.instance);
        }
    }
    by_slot
        .into_iter()
        .filter(|(_, who)| who.len() > 1)
        .map(|((job, slot), who)| format!("{job} slot {slot} ran {} times: {who:?}", who.len()))
        .collect()
}

/// Whole seconds (Unix ms) in `[from, to)`.
pub fn seconds_between(from: i64, to: i64) -> impl Iterator<Item = i64> {
    let first = (from + 999).div_euclid(1000) * 1000;
    (first..to).step_by(1000)
}
