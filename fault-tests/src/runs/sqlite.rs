//! The runs table in the SQLite file the lock provider uses.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use lock_core::BoxError;

use super::{NewRun, Run, RunEnd, RunRow, RunsConnection, SqlTypes};

/// Unix milliseconds now, by the host's clock (SQLite's database clock).
const NOW: &str = "CAST(round(unixepoch('now', 'subsec') * 1000) AS INTEGER)";

pub(super) struct Sqlite {
    conn: Arc<Mutex<rusqlite::Connection>>,
}

pub(super) fn open(path: &Path) -> Result<Box<dyn RunsConnection>, BoxError> {
    let conn = rusqlite::Connection::open(path)
        .map_err(|e| format!("runs table: open {}: {e}", path.display()))?;
    // The lock provider holds the write lock only for single statements; wait for it.
    conn.busy_timeout(Duration::from_secs(10))?;
    Ok(Box::new(Sqlite {
        conn: Arc::new(Mutex::new(conn)),
    }))
}

impl RunRow for rusqlite::Row<'_> {
    type Error = rusqlite::Error;

    fn column<T: super::Column>(&self, index: usize) -> Result<T, Self::Error> {
        self.get(index)
    }
}

impl Sqlite {
    /// Runs `work` on the blocking pool with the connection.
    async fn with<T, F>(&self, work: F) -> Result<T, BoxError>
    where
        T: Send + 'static,
        F: FnOnce(&rusqlite::Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        let out = tokio::task::spawn_blocking(move || {
            let guard = conn.lock().unwrap_or_else(|p| p.into_inner());
            work(&guard)
        })
        .await??;
        Ok(out)
    }
}

#[async_trait]
impl RunsConnection for Sqlite {
    fn types(&self) -> SqlTypes {
        SqlTypes {
            id: "INTEGER PRIMARY KEY AUTOINCREMENT",
            flag: "INTEGER",
        }
    }

    async fn execute(&self, sql: String) -> Result<(), BoxError> {
        self.with(move |c| c.execute_batch(&sql)).await
    }

    async fn now_ms(&self) -> Result<i64, BoxError> {
        let sql = format!("SELECT {NOW}");
        self.with(move |c| c.query_row(&sql, [], |row| row.get(0)))
            .await
    }

    async fn start(&self, t: &str, run: &NewRun<'_>) -> Result<i64, BoxError> {
        let sql = format!(
            "INSERT INTO {t} (job, instance, slot, fence, kind, attempt, started) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, {NOW}) RETURNING id"
        );
        let (job, instance) = (run.job.to_owned(), run.instance.to_owned());
        let (slot, fence, kind, attempt) = (
            run.slot,
            run.fence,
            run.kind.map(str::to_owned),
            run.attempt,
        );
        self.with(move |c| {
            c.query_row(
                &sql,
                rusqlite::params![job, instance, slot, fence, kind, attempt],
                |row| row.get(0),
            )
        })
        .await
    }

    async fn finish(&self, t: &str, end: &RunEnd) -> Result<(), BoxError> {
        let end = *end;
        let sql = format!(
            "UPDATE {t} SET ended = {NOW}, cancelled = ?2, first_write = ?3, \
             late_write = ?4 WHERE id = ?1"
        );
        self.with(move |c| {
            c.execute(
                &sql,
                rusqlite::params![end.id, end.cancelled, end.first, end.late],
            )
        })
        .await?;
        Ok(())
    }

    async fn record(&self, t: &str, run: &NewRun<'_>) -> Result<(), BoxError> {
        let sql = format!(
            "INSERT INTO {t} (job, instance, slot, fence, kind, attempt, started, ended) \
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, n, n FROM (SELECT {NOW} AS n)"
        );
        let (job, instance) = (run.job.to_owned(), run.instance.to_owned());
        let (slot, fence, kind, attempt) = (
            run.slot,
            run.fence,
            run.kind.map(str::to_owned),
            run.attempt,
        );
        self.with(move |c| {
            c.execute(
                &sql,
                rusqlite::params![job, instance, slot, fence, kind, attempt],
            )
        })
        .await?;
        Ok(())
    }

    async fn guarded_write(&self, g: &str, fence: i64, writer: &str) -> Result<u64, BoxError> {
        let sql = format!(
            "UPDATE {g} SET fence = ?1, writer = ?2, writes = writes + 1 \
             WHERE id = 1 AND fence <= ?1"
        );
        let writer = writer.to_owned();
        let changed = self
            .with(move |c| c.execute(&sql, rusqlite::params![fence, writer]))
            .await?;
        Ok(u64::try_from(changed)?)
    }

    async fn guarded(&self, sql: String) -> Result<(i64, Option<String>), BoxError> {
        self.with(move |c| c.query_row(&sql, [], |row| Ok((row.get(0)?, row.get(1)?))))
            .await
    }

    async fn runs(&self, sql: String) -> Result<Vec<Run>, BoxError> {
        self.with(move |c| {
            let mut statement = c.prepare(&sql)?;
            let rows = statement.query_map([], |row| Run::decode(row))?;
            rows.collect()
        })
        .await
    }
}
