//! The runs table: what every job run did, written by the service, read by the tests.
//!
//! Each run inserts a row when its body starts and completes it when the body ends, with
//! times read from the database's clock, so the tests compare runs with lock rows on one clock
//! and a killed run still leaves its start behind. The table sits in the database the locks
//! are in, but the service writes it over its own direct connection: it is the test's
//! instrument, and must keep working while the lock provider's link is cut. For Redis it sits
//! in the PostgreSQL test database (`LOCK_TEST_POSTGRES_URL`), which must outlive a Redis
//! restart; on the test machine both servers read the same host clock.

mod mysql;
mod postgres;
mod row;
mod sqlite;

use async_trait::async_trait;
use lock_core::BoxError;
use lock_sql::validate_identifier;

use crate::Backend;
pub use row::Run;
use row::{COLUMNS, Column, RunRow};

/// The runs table (`<name>`) and the fenced table beside it (`<name>_guarded`, one row, id 1),
/// over a connection of their own.
///
/// ```no_run
/// use fault_tests::{Backend, RunsTable};
/// # async fn run() -> Result<(), lock_core::BoxError> {
/// let backend = Backend::Postgres("postgres://postgres@127.0.0.1:5432/test".into());
/// let runs = RunsTable::open(&backend, "ft_runs_demo").await?;
/// runs.create().await?;
/// let id = runs.start("tick", "instance-a", Some(1_700_000_000_000), 1).await?;
/// runs.finish(id, false, None, None).await?;
/// assert_eq!(runs.runs().await?.len(), 1);
/// runs.drop_tables(&[]).await?;
/// # Ok(()) }
/// ```
pub struct RunsTable {
    table: String,
    guarded: String,
    conn: Box<dyn RunsConnection>,
}

/// One database's statements on the runs table (`t`) and the fenced table (`g`), over the
/// connection of its own. Each backend the fault tests drive implements it in its module.
#[async_trait]
trait RunsConnection: Send + Sync {
    /// The column types that differ between databases.
    fn types(&self) -> SqlTypes;
    /// Runs statements that return nothing.
    async fn execute(&self, sql: String) -> Result<(), BoxError>;
    /// The database's clock, in Unix milliseconds.
    async fn now_ms(&self) -> Result<i64, BoxError>;
    /// Inserts a started run; returns its id.
    async fn start(&self, t: &str, run: &NewRun<'_>) -> Result<i64, BoxError>;
    /// Completes run `id`.
    async fn finish(&self, t: &str, end: &RunEnd) -> Result<(), BoxError>;
    /// Inserts a whole run, started and ended now.
    async fn record(&self, t: &str, run: &NewRun<'_>) -> Result<(), BoxError>;
    /// The fenced write; returns the rows changed.
    async fn guarded_write(&self, g: &str, fence: i64, writer: &str) -> Result<u64, BoxError>;
    /// Reads the fenced row with `sql`.
    async fn guarded(&self, sql: String) -> Result<(i64, Option<String>), BoxError>;
    /// Reads the runs with `sql` (selecting [`COLUMNS`]).
    async fn runs(&self, sql: String) -> Result<Vec<Run>, BoxError>;
    /// Ends the connection.
    async fn close(self: Box<Self>) -> Result<(), BoxError> {
        Ok(())
    }
}

/// A run as it starts: what `start` and `record` insert.
#[derive(Clone, Copy)]
struct NewRun<'a> {
    job: &'a str,
    instance: &'a str,
    slot: Option<i64>,
    fence: i64,
    /// The fire kind and attempt, for jobs that record them.
    kind: Option<&'a str>,
    attempt: Option<i64>,
}

/// A run as it ends: what `finish` sets on row `id`.
#[derive(Clone, Copy)]
struct RunEnd {
    id: i64,
    cancelled: bool,
    first: Option<i64>,
    late: Option<i64>,
}

/// Column types that differ between databases.
struct SqlTypes {
    /// An auto-incremented primary key.
    id: &'static str,
    /// A boolean.
    flag: &'static str,
}

impl RunsTable {
    /// Connects to `backend` for the runs table `table` (a plain identifier).
    ///
    /// ```no_run
    /// # async fn run() -> Result<(), lock_core::BoxError> {
    /// let backend = fault_tests::Backend::Sqlite("/tmp/locks.db".into());
    /// let runs = fault_tests::RunsTable::open(&backend, "runs").await?;
    /// println!("{}", runs.now_ms().await?);
    /// # Ok(()) }
    /// ```
    pub async fn open(backend: &Backend, table: &str) -> Result<Self, BoxError> {
        validate_identifier(table).map_err(|reason| format!("runs table {table:?}: {reason}"))?;
        // The fault tests' one match on the backend: a new one adds its module here.
        let conn = match backend {
            // The sqlx backends lock in the same databases: their runs tables are the same.
            Backend::Postgres(url) | Backend::SqlxPostgres(url) => postgres::connect(url).await?,
            Backend::MySql(url) | Backend::SqlxMySql(url) => mysql::connect(url).await?,
            Backend::Sqlite(path) | Backend::SqlxSqlite(path) => sqlite::open(path)?,
            // Redis's runs go to the PostgreSQL test database: the runs are the evidence of
            // what ran, and must survive what the Redis scenarios do to Redis (a restart
            // without persistence forgets everything); and the runs' SQL stays one.
            Backend::Redis(_) => postgres::connect(&test_support::db::postgres_url()).await?,
        };
        Ok(RunsTable {
            table: table.to_owned(),
            guarded: format!("{table}_guarded"),
            conn,
        })
    }

    /// The runs table's name.
    ///
    /// ```no_run
    /// # fn run(runs: fault_tests::RunsTable) {
    /// assert!(runs.table().starts_with("ft_"));
    /// # }
    /// ```
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Creates the runs table and the fenced table (its one row at fence 0).
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// runs.create().await?;
    /// assert_eq!(runs.guarded().await?, (0, None));
    /// # Ok(()) }
    /// ```
    pub async fn create(&self) -> Result<(), BoxError> {
        let (t, g) = (&self.table, &self.guarded);
        let SqlTypes { id, flag } = self.conn.types();
        let statements = [
            format!(
                "CREATE TABLE {t} (id {id}, job VARCHAR(64) NOT NULL, \
                 instance VARCHAR(255) NOT NULL, slot BIGINT NULL, fence BIGINT NOT NULL, \
                 started BIGINT NOT NULL, ended BIGINT NULL, \
                 cancelled {flag} NOT NULL DEFAULT FALSE, \
                 first_write BIGINT NULL, late_write BIGINT NULL, \
                 kind VARCHAR(16) NULL, attempt BIGINT NULL)"
            ),
            format!(
                "CREATE TABLE {g} (id INT PRIMARY KEY, fence BIGINT NOT NULL, \
                 writer VARCHAR(255) NULL, writes BIGINT NOT NULL DEFAULT 0)"
            ),
            format!("INSERT INTO {g} (id, fence) VALUES (1, 0)"),
        ];
        for statement in statements {
            self.conn.execute(statement).await?;
        }
        Ok(())
    }

    /// Drops the runs table, the fenced table and the `extra` tables (the test's lock tables).
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// runs.drop_tables(&["ft_locks_demo"]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn drop_tables(&self, extra: &[&str]) -> Result<(), BoxError> {
        let tables = [self.table.as_str(), self.guarded.as_str()]
            .into_iter()
            .chain(extra.iter().copied());
        for table in tables {
            validate_identifier(table).map_err(|reason| format!("table {table:?}: {reason}"))?;
            self.conn
                .execute(format!("DROP TABLE IF EXISTS {table}"))
                .await?;
        }
        Ok(())
    }

    /// The database's clock, in Unix milliseconds.
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// assert!(runs.now_ms().await? > 1_700_000_000_000);
    /// # Ok(()) }
    /// ```
    pub async fn now_ms(&self) -> Result<i64, BoxError> {
        self.conn.now_ms().await
    }

    /// Records that a run started; returns its id for [`finish`](Self::finish).
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// let id = runs.start("tick", "instance-a", None, 7).await?;
    /// # Ok(()) }
    /// ```
    pub async fn start(
        &self,
        job: &str,
        instance: &str,
        slot: Option<i64>,
        fence: u64,
    ) -> Result<i64, BoxError> {
        let run = NewRun {
            job,
            instance,
            slot,
            fence: i64::try_from(fence)?,
            kind: None,
            attempt: None,
        };
        self.conn.start(&self.table, &run).await
    }

    /// [`start`](Self::start) with the fire's kind and attempt recorded too.
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// let id = runs.start_fire("tick", "instance-a", None, 7, "CatchUp", 1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn start_fire(
        &self,
        job: &str,
        instance: &str,
        slot: Option<i64>,
        fence: u64,
        kind: &str,
        attempt: u32,
    ) -> Result<i64, BoxError> {
        let run = NewRun {
            job,
            instance,
            slot,
            fence: i64::try_from(fence)?,
            kind: Some(kind),
            attempt: Some(i64::from(attempt)),
        };
        self.conn.start(&self.table, &run).await
    }

    /// Records that run `id` ended, whether it had been cancelled, and what its fenced writes
    /// changed.
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable, id: i64) -> Result<(), lock_core::BoxError> {
    /// runs.finish(id, true, Some(1), Some(0)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn finish(
        &self,
        id: i64,
        cancelled: bool,
        first_write: Option<u64>,
        late_write: Option<u64>,
    ) -> Result<(), BoxError> {
        let end = RunEnd {
            id,
            cancelled,
            first: first_write.map(i64::try_from).transpose()?,
            late: late_write.map(i64::try_from).transpose()?,
        };
        self.conn.finish(&self.table, &end).await
    }

    /// Records a whole run in one statement (start and end at the same instant), for short
    /// jobs fired at high rates.
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// runs.record("load_001", "instance-a", Some(1_700_000_000_000), 3).await?;
    /// # Ok(()) }
    /// ```
    pub async fn record(
        &self,
        job: &str,
        instance: &str,
        slot: Option<i64>,
        fence: u64,
    ) -> Result<(), BoxError> {
        let run = NewRun {
            job,
            instance,
            slot,
            fence: i64::try_from(fence)?,
            kind: None,
            attempt: None,
        };
        self.conn.record(&self.table, &run).await
    }

    /// [`record`](Self::record) with the fire's kind and attempt recorded too.
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// runs.record_fire("misfire_once", "instance-a", Some(1_700_000_000_000), 3, "CatchUp", 1).await?;
    /// # Ok(()) }
    /// ```
    pub async fn record_fire(
        &self,
        job: &str,
        instance: &str,
        slot: Option<i64>,
        fence: u64,
        kind: &str,
        attempt: u32,
    ) -> Result<(), BoxError> {
        let run = NewRun {
            job,
            instance,
            slot,
            fence: i64::try_from(fence)?,
            kind: Some(kind),
            attempt: Some(i64::from(attempt)),
        };
        self.conn.record(&self.table, &run).await
    }

    /// The fenced write a job makes with its lease's token: it changes the row only if no
    /// higher token wrote it before (`WHERE fence <= $mine`). Returns the rows changed (0 or 1).
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// assert_eq!(runs.guarded_write(5, "instance-a").await?, 1);
    /// assert_eq!(runs.guarded_write(4, "instance-b").await?, 0); // a stale holder
    /// # Ok(()) }
    /// ```
    pub async fn guarded_write(&self, fence: u64, writer: &str) -> Result<u64, BoxError> {
        let fence = i64::try_from(fence)?;
        self.conn.guarded_write(&self.guarded, fence, writer).await
    }

    /// The fenced row: the highest token written and who wrote it.
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// let (fence, writer) = runs.guarded().await?;
    /// # Ok(()) }
    /// ```
    pub async fn guarded(&self) -> Result<(i64, Option<String>), BoxError> {
        let sql = format!("SELECT fence, writer FROM {} WHERE id = 1", self.guarded);
        self.conn.guarded(sql).await
    }

    /// Every run, in insertion order.
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// for run in runs.runs().await? {
    ///     println!("{} ran slot {:?} with fence {}", run.instance, run.slot, run.fence);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn runs(&self) -> Result<Vec<Run>, BoxError> {
        let sql = format!("SELECT {COLUMNS} FROM {} ORDER BY id", self.table);
        self.conn.runs(sql).await
    }

    /// Closes the connection (the MySQL pool needs an explicit disconnect to end quietly).
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// runs.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn close(self) -> Result<(), BoxError> {
        self.conn.close().await
    }
}
