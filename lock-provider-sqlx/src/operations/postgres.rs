//! The operations tables on PostgreSQL through sqlx. The heartbeat is one statement (the
//! registry upsert over arrays as a data-modifying CTE whose query reads the pauses and
//! pending trigger requests), whatever the number of jobs. Without the statement cache
//! (PgBouncer in transaction mode) each statement runs in a transaction of its own, as the
//! lock statements do (`crate::postgres`).

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use lock_cluster::{Heartbeat, JobRegistration};
use lock_sql::sql::postgres::ENSURE_SCHEMA_LOCK;
use lock_sql::{OperationsSql, SqlDialect};
use sqlx::postgres::{PgArguments, PgPool, PgRow};
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, Postgres, Row};

use super::{Changed, Columns, Param, Tables};

/// `undefined_table`.
const UNDEFINED_TABLE: &str = "42P01";
/// `undefined_column`: a table from before the column.
const UNDEFINED_COLUMN: &str = "42703";

/// The operations statements on a PostgreSQL pool.
#[derive(Clone)]
pub(crate) struct PgTables {
    pool: PgPool,
    persistent: bool,
}

impl PgTables {
    pub(crate) fn new(pool: PgPool) -> Self {
        PgTables {
            pool,
            persistent: true,
        }
    }

    fn query(&self, sql: &str, params: Vec<Param>) -> Query<'static, Postgres, PgArguments> {
        let mut query = sqlx::query(AssertSqlSafe(sql.to_owned())).persistent(self.persistent);
        for param in params {
            query = match param {
                Param::Text(text) => query.bind(text),
                Param::Int(int) => query.bind(int),
                Param::Bool(flag) => query.bind(flag),
                Param::Time(at) => query.bind(at.map(|at| at.naive_utc())),
            };
        }
        query
    }

    /// Runs `query` and reads its rows: without the statement cache in a transaction of its
    /// own.
    async fn fetch(
        &self,
        query: Query<'static, Postgres, PgArguments>,
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        if self.persistent {
            return query.fetch_all(&self.pool).await;
        }
        // sqlx sends an unprepared statement in two exchanges, which PgBouncer may route to
        // two server connections outside a transaction.
        let mut tx = self.pool.begin().await?;
        let rows = query.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(rows)
    }
}

impl Columns for PgRow {
    fn text(&self, index: usize) -> Result<String, sqlx::Error> {
        self.try_get(index)
    }

    fn opt_text(&self, index: usize) -> Result<Option<String>, sqlx::Error> {
        self.try_get(index)
    }

    fn int(&self, index: usize) -> Result<i64, sqlx::Error> {
        self.try_get(index)
    }

    fn int4(&self, index: usize) -> Result<i32, sqlx::Error> {
        self.try_get(index)
    }

    fn flag(&self, index: usize) -> Result<bool, sqlx::Error> {
        self.try_get(index)
    }

    fn opt_time(&self, index: usize) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        Ok(self
            .try_get::<Option<NaiveDateTime>, _>(index)?
            .map(|at| at.and_utc()))
    }
}

#[async_trait]
impl Tables for PgTables {
    type Row = PgRow;
    const DIALECT: SqlDialect = SqlDialect::Postgres;

    fn set_statement_cache(&mut self, cache: bool) {
        self.persistent = cache;
    }

    fn table_missing(e: &sqlx::Error) -> bool {
        matches!(e, sqlx::Error::Database(db)
            if matches!(db.code().as_deref(), Some(UNDEFINED_TABLE | UNDEFINED_COLUMN)))
    }

    async fn rows(&self, sql: &str, params: Vec<Param>) -> Result<Vec<PgRow>, sqlx::Error> {
        self.fetch(self.query(sql, params)).await
    }

    async fn change(&self, sql: &str, params: Vec<Param>) -> Result<Changed, sqlx::Error> {
        let query = self.query(sql, params);
        let done = if self.persistent {
            query.execute(&self.pool).await?
        } else {
            let mut tx = self.pool.begin().await?;
            let done = query.execute(&mut *tx).await?;
            tx.commit().await?;
            done
        };
        Ok(Changed {
            rows: done.rows_affected(),
            insert_id: 0,
        })
    }

    /// [`OperationsSql::heartbeat_arrays`], as `lock-provider-postgres` sends it: one
    /// statement and one text whatever the number of jobs (no 65,535-parameter limit, one
    /// plan), which reads the control table too.
    async fn heartbeat(
        &self,
        sql: &OperationsSql,
        beat: &Heartbeat,
    ) -> Result<Vec<PgRow>, sqlx::Error> {
        let i = &beat.instance;
        // The instance's own row first (`job_name` ''), then one element per job.
        let rows = || std::iter::once(None).chain(beat.jobs.iter().map(Some));
        let column = |field: fn(&JobRegistration) -> &str| -> Vec<String> {
            rows().map(|j| j.map_or("", field).to_owned()).collect()
        };
        let time = |field: fn(&JobRegistration) -> Option<DateTime<Utc>>| {
            rows()
                .map(|j| j.and_then(field).map(|at| at.naive_utc()))
                .collect::<Vec<Option<NaiveDateTime>>>()
        };
        let query = sqlx::query(AssertSqlSafe(sql.heartbeat_arrays()))
            .persistent(self.persistent)
            .bind(i.instance_id.clone())
            .bind(i.host.clone())
            .bind(i64::from(i.pid))
            .bind(i.version.clone())
            .bind(i.started_at.naive_utc())
            .bind(i.clock_offset_ms)
            .bind(i.heartbeat_ms)
            .bind(column(|j| &j.name))
            .bind(column(|j| &j.lock_name))
            .bind(column(|j| &j.trigger))
            .bind(
                rows()
                    .map(|j| j.and_then(|j| j.zone.clone()))
                    .collect::<Vec<Option<String>>>(),
            )
            .bind(time(|j| j.next_fire))
            .bind(time(|j| j.following_fire));
        self.fetch(query).await
    }

    /// As `lock-provider-postgres`: nothing when the tables are there (the usual start-up:
    /// `CREATE INDEX IF NOT EXISTS` locks its table before looking), else the DDL in one
    /// transaction under the same advisory lock, since a concurrent `CREATE TABLE IF NOT
    /// EXISTS` of one name can fail in PostgreSQL.
    async fn create(&self, sql: &OperationsSql) -> Result<(), sqlx::Error> {
        let mut present = true;
        for probe in &sql.probe {
            if self.rows(probe, vec![]).await.is_err() {
                present = false;
                break;
            }
        }
        if present {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        sqlx::query(ENSURE_SCHEMA_LOCK)
            .bind(sql.schema_lock_key())
            .persistent(false)
            .execute(&mut *tx)
            .await?;
        for statement in &sql.create {
            sqlx::raw_sql(AssertSqlSafe(statement.clone()))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    }
}
