//! The runs table in MySQL or MariaDB.

use async_trait::async_trait;
use lock_core::BoxError;
use mysql_async::prelude::Queryable;

use super::{NewRun, Run, RunEnd, RunRow, RunsConnection, SqlTypes};

/// Unix milliseconds now, by the database's clock.
const NOW: &str =
    "CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000 AS SIGNED)";

pub(super) struct MySql {
    pool: mysql_async::Pool,
}

pub(super) async fn connect(url: &str) -> Result<Box<dyn RunsConnection>, BoxError> {
    let pool = mysql_async::Pool::new(mysql_async::Opts::from_url(url)?);
    // Fail here, not at the first run, if the server cannot be reached.
    drop(pool.get_conn().await?);
    Ok(Box::new(MySql { pool }))
}

impl RunRow for mysql_async::Row {
    type Error = BoxError;

    fn column<T: super::Column>(&self, index: usize) -> Result<T, Self::Error> {
        match self.get_opt(index) {
            Some(value) => Ok(value?),
            None => Err(format!("the runs table row has no column {index}").into()),
        }
    }
}

#[async_trait]
impl RunsConnection for MySql {
    fn types(&self) -> SqlTypes {
        SqlTypes {
            id: "BIGINT AUTO_INCREMENT PRIMARY KEY",
            flag: "BOOLEAN",
        }
    }

    async fn execute(&self, sql: String) -> Result<(), BoxError> {
        Ok(self.pool.get_conn().await?.query_drop(sql).await?)
    }

    async fn now_ms(&self) -> Result<i64, BoxError> {
        let mut conn = self.pool.get_conn().await?;
        let now: Option<i64> = conn.query_first(format!("SELECT {NOW}")).await?;
        now.ok_or_else(|| "SELECT returned no row".into())
    }

    async fn start(&self, t: &str, run: &NewRun<'_>) -> Result<i64, BoxError> {
        let mut conn = self.pool.get_conn().await?;
        conn.exec_drop(
            format!(
                "INSERT INTO {t} (job, instance, slot, fence, kind, attempt, started) \
                 VALUES (?, ?, ?, ?, ?, ?, {NOW})"
            ),
            (
                run.job,
                run.instance,
                run.slot,
                run.fence,
                run.kind,
                run.attempt,
            ),
        )
        .await?;
        let id = conn.last_insert_id().ok_or("no insert id")?;
        Ok(i64::try_from(id)?)
    }

    async fn finish(&self, t: &str, end: &RunEnd) -> Result<(), BoxError> {
        self.pool
            .get_conn()
            .await?
            .exec_drop(
                format!(
                    "UPDATE {t} SET ended = {NOW}, cancelled = ?, first_write = ?, \
                     late_write = ? WHERE id = ?"
                ),
                (end.cancelled, end.first, end.late, end.id),
            )
            .await?;
        Ok(())
    }

    async fn record(&self, t: &str, run: &NewRun<'_>) -> Result<(), BoxError> {
        self.pool
            .get_conn()
            .await?
            .exec_drop(
                format!(
                    "INSERT INTO {t} (job, instance, slot, fence, kind, attempt, started, ended) \
                     SELECT ?, ?, ?, ?, ?, ?, n, n FROM (SELECT {NOW} AS n) t"
                ),
                (
                    run.job,
                    run.instance,
                    run.slot,
                    run.fence,
                    run.kind,
                    run.attempt,
                ),
            )
            .await?;
        Ok(())
    }

    async fn guarded_write(&self, g: &str, fence: i64, writer: &str) -> Result<u64, BoxError> {
        let mut conn = self.pool.get_conn().await?;
        // `writes` changes on every matching write, so MySQL's "changed rows" count equals
        // the matched rows.
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

    async fn guarded(&self, sql: String) -> Result<(i64, Option<String>), BoxError> {
        let row: Option<(i64, Option<String>)> =
            self.pool.get_conn().await?.query_first(sql).await?;
        row.ok_or_else(|| "the fenced row is missing".into())
    }

    async fn runs(&self, sql: String) -> Result<Vec<Run>, BoxError> {
        let rows: Vec<mysql_async::Row> = self.pool.get_conn().await?.query(sql).await?;
        rows.iter().map(Run::decode).collect()
    }

    async fn close(self: Box<Self>) -> Result<(), BoxError> {
        // The pool needs an explicit disconnect to end quietly.
        Ok(self.pool.disconnect().await?)
    }
}
