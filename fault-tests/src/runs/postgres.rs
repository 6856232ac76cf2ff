//! The runs table in PostgreSQL.

use async_trait::async_trait;
use lock_core::BoxError;

use super::{NewRun, Run, RunEnd, RunRow, RunsConnection, SqlTypes};

/// Unix milliseconds now, by the database's clock.
const NOW: &str = "floor(extract(epoch from clock_timestamp()) * 1000)::int8";

pub(super) struct Postgres {
    client: tokio_postgres::Client,
}

pub(super) async fn connect(url: &str) -> Result<Box<dyn RunsConnection>, BoxError> {
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
    Ok(Box::new(Postgres { client }))
}

impl RunRow for tokio_postgres::Row {
    type Error = tokio_postgres::Error;

    fn column<T: super::Column>(&self, index: usize) -> Result<T, Self::Error> {
        self.try_get(index)
    }
}

#[async_trait]
impl RunsConnection for Postgres {
    fn types(&self) -> SqlTypes {
        SqlTypes {
            id: "BIGSERIAL PRIMARY KEY",
            flag: "BOOLEAN",
        }
    }

    async fn execute(&self, sql: String) -> Result<(), BoxError> {
        Ok(self.client.batch_execute(&sql).await?)
    }

    async fn now_ms(&self) -> Result<i64, BoxError> {
        let row = self.client.query_one(&format!("SELECT {NOW}"), &[]).await?;
        Ok(row.try_get(0)?)
    }

    async fn start(&self, t: &str, run: &NewRun<'_>) -> Result<i64, BoxError> {
        let sql = format!(
            "INSERT INTO {t} (job, instance, slot, fence, kind, attempt, started) \
             VALUES ($1, $2, $3, $4, $5, $6, {NOW}) RETURNING id"
        );
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
            &run.job,
            &run.instance,
            &run.slot,
            &run.fence,
            &run.kind,
            &run.attempt,
        ];
        let row = self.client.query_one(&sql, &params).await?;
        Ok(row.try_get(0)?)
    }

    async fn finish(&self, t: &str, end: &RunEnd) -> Result<(), BoxError> {
        let sql = format!(
            "UPDATE {t} SET ended = {NOW}, cancelled = $2, first_write = $3, \
             late_write = $4 WHERE id = $1"
        );
        self.client
            .execute(&sql, &[&end.id, &end.cancelled, &end.first, &end.late])
            .await?;
        Ok(())
    }

    async fn record(&self, t: &str, run: &NewRun<'_>) -> Result<(), BoxError> {
        let sql = format!(
            "INSERT INTO {t} (job, instance, slot, fence, kind, attempt, started, ended) \
             SELECT $1::text, $2::text, $3::int8, $4::int8, $5::text, $6::int8, n, n \
             FROM (SELECT {NOW} AS n) t"
        );
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 6] = [
            &run.job,
            &run.instance,
            &run.slot,
            &run.fence,
            &run.kind,
            &run.attempt,
        ];
        self.client.execute(&sql, &params).await?;
        Ok(())
    }

    async fn guarded_write(&self, g: &str, fence: i64, writer: &str) -> Result<u64, BoxError> {
        let sql = format!(
            "UPDATE {g} SET fence = $1, writer = $2, writes = writes + 1 \
             WHERE id = 1 AND fence <= $1"
        );
        Ok(self.client.execute(&sql, &[&fence, &writer]).await?)
    }

    async fn guarded(&self, sql: String) -> Result<(i64, Option<String>), BoxError> {
        let row = self.client.query_one(&sql, &[]).await?;
        Ok((row.try_get(0)?, row.try_get(1)?))
    }

    async fn runs(&self, sql: String) -> Result<Vec<Run>, BoxError> {
        let rows = self.client.query(&sql, &[]).await?;
        Ok(rows.iter().map(Run::decode).collect::<Result<_, _>>()?)
    }
}
