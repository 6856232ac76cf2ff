//! The runs table: what every job run did, written by the service, read by the tests.
//!
//! Each run inserts a row when its body starts and completes it when the body ends, with
//! times read from the database's clock, so the tests compare runs with lock rows on one clock
//! and a killed run still leaves its start behind. The table sits in the database the locks
//! are in, but the service writes it over its own direct connection: it is the test's
//! instrument, and must keep working while the lock provider's link is cut.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lock_core::{BoxError, validate_identifier};
use mysql_async::prelude::Queryable;

use crate::Backend;

/// One row of the runs table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Insertion order.
    pub id: i64,
    /// The lock name of the job.
    pub job: String,
    /// The instance that ran it (`locked_by`).
    pub instance: String,
    /// The fire's scheduled instant in Unix milliseconds (`None` for fixed-delay jobs).
    pub slot: Option<i64>,
    /// The fencing token of the lease the run held.
    pub fence: i64,
    /// When the body started, Unix milliseconds by the database's clock.
    pub started: i64,
    /// When the body ended (`None`: still running, or its process died).
    pub ended: Option<i64>,
    /// Whether `JobContext::cancelled()` had resolved when the body ended.
    pub cancelled: bool,
    /// Rows changed by the body's fenced write at its start, if it made one.
    pub first_write: Option<i64>,
    /// Rows changed by the body's fenced write at its end, if it made one.
    pub late_write: Option<i64>,
}

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
    conn: Conn,
}

enum Conn {
    Postgres(tokio_postgres::Client),
    MySql(mysql_async::Pool),
    Sqlite(Arc<Mutex<rusqlite::Connection>>),
}

const COLUMNS: &str =
    "id, job, instance, slot, fence, started, ended, cancelled, first_write, late_write";

/// Unix milliseconds now, by each database's clock.
const PG_NOW: &str = "floor(extract(epoch from clock_timestamp()) * 1000)::int8";
const MY_NOW: &str =
    "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)";
const LITE_NOW: &str = "CAST(round(unixepoch('now', 'subsec') * 1000) AS INTEGER)";

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
        let conn = match backend {
            Backend::Postgres(url) => {
                let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| format!("runs table: connect to postgres: {e}"))?;
                tokio::spawn(async move {
                    if let Err(e) = connection.await {
                        tracing::error!(error = %e, "runs table connection failed");
                    }
                });
                // The runs are evidence, not data to keep: no fsync per run.
                client.batch_execute("SET synchronous_commit = off").await?;
                Conn::Postgres(client)
            }
            Backend::MySql(url) => {
                let pool = mysql_async::Pool::new(mysql_async::Opts::from_url(url)?);
                // Fail here, not at the first run, if the server cannot be reached.
                drop(pool.get_conn().await?);
                Conn::MySql(pool)
            }
            Backend::Sqlite(path) => Conn::Sqlite(Arc::new(Mutex::new(open_sqlite(path)?))),
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
        let (id, flag) = match self.conn {
            Conn::Postgres(_) => ("BIGSERIAL PRIMARY KEY", "BOOLEAN"),
            Conn::MySql(_) => ("BIGINT AUTO_INCREMENT PRIMARY KEY", "BOOLEAN"),
            Conn::Sqlite(_) => ("INTEGER PRIMARY KEY AUTOINCREMENT", "INTEGER"),
        };
        let statements = [
            format!(
                "CREATE TABLE {t} (id {id}, job VARCHAR(64) NOT NULL, \
                 instance VARCHAR(255) NOT NULL, slot BIGINT NULL, fence BIGINT NOT NULL, \
                 started BIGINT NOT NULL, ended BIGINT NULL, \
                 cancelled {flag} NOT NULL DEFAULT FALSE, \
                 first_write BIGINT NULL, late_write BIGINT NULL)"
            ),
            format!(
                "CREATE TABLE {g} (id INT PRIMARY KEY, fence BIGINT NOT NULL, \
                 writer VARCHAR(255) NULL, writes BIGINT NOT NULL DEFAULT 0)"
            ),
            format!("INSERT INTO {g} (id, fence) VALUES (1, 0)"),
        ];
        for statement in statements {
            self.execute(statement).await?;
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
            self.execute(format!("DROP TABLE IF EXISTS {table}"))
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
        match &self.conn {
            Conn::Postgres(client) => Ok(client
                .query_one(&format!("SELECT {PG_NOW}"), &[])
                .await?
                .try_get(0)?),
            Conn::MySql(pool) => {
                let mut conn = pool.get_conn().await?;
                let now: Option<i64> = conn.query_first(format!("SELECT {MY_NOW}")).await?;
                now.ok_or_else(|| "SELECT returned no row".into())
            }
            Conn::Sqlite(conn) => {
                let sql = format!("SELECT {LITE_NOW}");
                sqlite(conn, move |c| c.query_row(&sql, [], |row| row.get(0))).await
            }
        }
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
        let fence = i64::try_from(fence)?;
        let t = &self.table;
        match &self.conn {
            Conn::Postgres(client) => Ok(client
                .query_one(
                    &format!(
                        "INSERT INTO {t} (job, instance, slot, fence, started) \
                         VALUES ($1, $2, $3, $4, {PG_NOW}) RETURNING id"
                    ),
                    &[&job, &instance, &slot, &fence],
                )
                .await?
                .try_get(0)?),
            Conn::MySql(pool) => {
                let mut conn = pool.get_conn().await?;
                conn.exec_drop(
                    format!(
                        "INSERT INTO {t} (job, instance, slot, fence, started) \
                         VALUES (?, ?, ?, ?, {MY_NOW})"
                    ),
                    (job, instance, slot, fence),
                )
                .await?;
                let id = conn.last_insert_id().ok_or("no insert id")?;
                Ok(i64::try_from(id)?)
            }
            Conn::Sqlite(conn) => {
                let sql = format!(
                    "INSERT INTO {t} (job, instance, slot, fence, started) \
                     VALUES (?1, ?2, ?3, ?4, {LITE_NOW}) RETURNING id"
                );
                let (job, instance) = (job.to_owned(), instance.to_owned());
                sqlite(conn, move |c| {
                    c.query_row(&sql, rusqlite::params![job, instance, slot, fence], |row| {
                        row.get(0)
                    })
                })
                .await
            }
        }
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
        let first = first_write.map(i64::try_from).transpose()?;
        let late = late_write.map(i64::try_from).transpose()?;
        let t = &self.table;
        match &self.conn {
            Conn::Postgres(client) => {
                client
                    .execute(
                        &format!(
                            "UPDATE {t} SET ended = {PG_NOW}, cancelled = $2, first_write = $3, \
                             late_write = $4 WHERE id = $1"
                        ),
                        &[&id, &cancelled, &first, &late],
                    )
                    .await?;
            }
            Conn::MySql(pool) => {
                pool.get_conn()
                    .await?
                    .exec_drop(
                        format!(
                            "UPDATE {t} SET ended = {MY_NOW}, cancelled = ?, first_write = ?, \
                             late_write = ? WHERE id = ?"
                        ),
                        (cancelled, first, late, id),
                    )
                    .await?;
            }
            Conn::Sqlite(conn) => {
                let sql = format!(
                    "UPDATE {t} SET ended = {LITE_NOW}, cancelled = ?2, first_write = ?3, \
                     late_write = ?4 WHERE id = ?1"
                );
                sqlite(conn, move |c| {
                    c.execute(&sql, rusqlite::params![id, cancelled, first, late])
                })
                .await?;
            }
        }
        Ok(())
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
        let fence = i64::try_from(fence)?;
        let t = &self.table;
        match &self.conn {
            Conn::Postgres(client) => {
                client
                    .execute(
                        &format!(
                            "INSERT INTO {t} (job, instance, slot, fence, started, ended) \
                             SELECT $1::text, $2::text, $3::int8, $4::int8, n, n \
                             FROM (SELECT {PG_NOW} AS n) t"
                        ),
                        &[&job, &instance, &slot, &fence],
                    )
                    .await?;
            }
            Conn::MySql(pool) => {
                pool.get_conn()
                    .await?
                    .exec_drop(
                        format!(
                            "INSERT INTO {t} (job, instance, slot, fence, started, ended) \
                             SELECT ?, ?, ?, ?, n, n FROM (SELECT {MY_NOW} AS n) t"
                        ),
                        (job, instance, slot, fence),
                    )
                    .await?;
            }
            Conn::Sqlite(conn) => {
                let sql = format!(
                    "INSERT INTO {t} (job, instance, slot, fence, started, ended) \
                     SELECT ?1, ?2, ?3, ?4, n, n FROM (SELECT {LITE_NOW} AS n)"
                );
                let (job, instance) = (job.to_owned(), instance.to_owned());
                sqlite(conn, move |c| {
                    c.execute(&sql, rusqlite::params![job, instance, slot, fence])
                })
                .await?;
            }
        }
        Ok(())
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
        let g = &self.guarded;
        match &self.conn {
            Conn::Postgres(client) => Ok(client
                .execute(
                    &format!(
                        "UPDATE {g} SET fence = $1, writer = $2, writes = writes + 1 \
                         WHERE id = 1 AND fence <= $1"
                    ),
                    &[&fence, &writer],
                )
                .await?),
            Conn::MySql(pool) => {
                let mut conn = pool.get_conn().await?;
                // `writes` changes on every matching write, so MySQL's "changed rows" count
                // equals the matched rows.
                conn.exec_drop(
                    format!(
                        "UPDATE {g} SET fence = ?, writer = ?, writes = writes + 1 \
                         WHERE id = 1 AND fence <= ?"
                    ),
                    (fence, writer, fence),
                )
                .await?;
                Ok(conn.affected_rows())
            }
            Conn::Sqlite(conn) => {
                let sql = format!(
                    "UPDATE {g} SET fence = ?1, writer = ?2, writes = writes + 1 \
                     WHERE id = 1 AND fence <= ?1"
                );
                let writer = writer.to_owned();
                let changed = sqlite(conn, move |c| {
                    c.execute(&sql, rusqlite::params![fence, writer])
                })
                .await?;
                Ok(u64::try_from(changed)?)
            }
        }
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
        match &self.conn {
            Conn::Postgres(client) => {
                let row = client.query_one(&sql, &[]).await?;
                Ok((row.try_get(0)?, row.try_get(1)?))
            }
            Conn::MySql(pool) => {
                let row: Option<(i64, Option<String>)> =
                    pool.get_conn().await?.query_first(sql).await?;
                row.ok_or_else(|| "the fenced row is missing".into())
            }
            Conn::Sqlite(conn) => {
                sqlite(conn, move |c| {
                    c.query_row(&sql, [], |row| Ok((row.get(0)?, row.get(1)?)))
                })
                .await
            }
        }
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
        match &self.conn {
            Conn::Postgres(client) => client
                .query(&sql, &[])
                .await?
                .iter()
                .map(|row| {
                    Ok(Run {
                        id: row.try_get(0)?,
                        job: row.try_get(1)?,
                        instance: row.try_get(2)?,
                        slot: row.try_get(3)?,
                        fence: row.try_get(4)?,
                        started: row.try_get(5)?,
                        ended: row.try_get(6)?,
                        cancelled: row.try_get(7)?,
                        first_write: row.try_get(8)?,
                        late_write: row.try_get(9)?,
                    })
                })
                .collect(),
            Conn::MySql(pool) => {
                type Row = (
                    i64,
                    String,
                    String,
                    Option<i64>,
                    i64,
                    i64,
                    Option<i64>,
                    bool,
                    Option<i64>,
                    Option<i64>,
                );
                let rows: Vec<Row> = pool.get_conn().await?.query(sql).await?;
                Ok(rows
                    .into_iter()
                    .map(
                        |(
                            id,
                            job,
                            instance,
                            slot,
                            fence,
                            started,
                            ended,
                            cancelled,
                            first_write,
                            late_write,
                        )| Run {
                            id,
                            job,
                            instance,
                            slot,
                            fence,
                            started,
                            ended,
                            cancelled,
                            first_write,
                            late_write,
                        },
                    )
                    .collect())
            }
            Conn::Sqlite(conn) => {
                sqlite(conn, move |c| {
                    let mut statement = c.prepare(&sql)?;
                    let rows = statement.query_map([], |row| {
                        Ok(Run {
                            id: row.get(0)?,
                            job: row.get(1)?,
                            instance: row.get(2)?,
                            slot: row.get(3)?,
                            fence: row.get(4)?,
                            started: row.get(5)?,
                            ended: row.get(6)?,
                            cancelled: row.get(7)?,
                            first_write: row.get(8)?,
                            late_write: row.get(9)?,
                        })
                    })?;
                    rows.collect()
                })
                .await
            }
        }
    }

    /// Closes the connection (the MySQL pool needs an explicit disconnect to end quietly).
    ///
    /// ```no_run
    /// # async fn run(runs: fault_tests::RunsTable) -> Result<(), lock_core::BoxError> {
    /// runs.close().await?;
    /// # Ok(()) }
    /// ```
    pub async fn close(self) -> Result<(), BoxError> {
        if let Conn::MySql(pool) = self.conn {
            pool.disconnect().await?;
        }
        Ok(())
    }

    async fn execute(&self, sql: String) -> Result<(), BoxError> {
        match &self.conn {
            Conn::Postgres(client) => client.batch_execute(&sql).await?,
            Conn::MySql(pool) => pool.get_conn().await?.query_drop(sql).await?,
            Conn::Sqlite(conn) => sqlite(conn, move |c| c.execute_batch(&sql)).await?,
        }
        Ok(())
    }
}

fn open_sqlite(path: &Path) -> Result<rusqlite::Connection, BoxError> {
    let conn = rusqlite::Connection::open(path)
        .map_err(|e| format!("runs table: open {}: {e}", path.display()))?;
    // The lock provider holds the write lock only for single statements; wait for it.
    conn.busy_timeout(Duration::from_secs(10))?;
    Ok(conn)
}

/// Runs `work` on the blocking pool with the connection.
async fn sqlite<T, F>(conn: &Arc<Mutex<rusqlite::Connection>>, work: F) -> Result<T, BoxError>
where
    T: Send + 'static,
    F: FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
{
    let conn = Arc::clone(conn);
    let out = tokio::task::spawn_blocking(move || {
        let guard = conn.lock().unwrap_or_else(|p| p.into_inner());
        work(&guard)
    })
    .await??;
    Ok(out)
}
