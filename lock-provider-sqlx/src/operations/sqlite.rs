//! The operations tables in the SQLite file through sqlx. Times are SQLite's own clock as
//! the lock table stores them (`YYYY-MM-DD HH:MM:SS.SSS`, UTC): bound and read as that text,
//! as `lock-provider-sqlite` does (sqlx's own `DateTime` encoding is RFC 3339, which would not
//! compare with the database's). The heartbeat's upsert (cut into statements under SQLite's
//! parameter limit for a beat of a thousand jobs or more) and its read of the control table
//! run in one `BEGIN IMMEDIATE` transaction.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use lock_cluster::Heartbeat;
use lock_sql::{OperationsSql, SqlDialect};
use sqlx::query::Query;
use sqlx::sqlite::{SqliteArguments, SqlitePool, SqliteRow};
use sqlx::{AssertSqlSafe, Row, Sqlite};

use super::{Changed, Columns, Param, Tables, upsert_params};

/// The operations statements on a SQLite pool.
#[derive(Clone)]
pub(crate) struct SqliteTables {
    pool: SqlitePool,
    persistent: bool,
}

fn as_text(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S%.3f").to_string()
}

impl SqliteTables {
    pub(crate) fn new(pool: SqlitePool) -> Self {
        SqliteTables {
            pool,
            persistent: true,
        }
    }

    fn query(&self, sql: &str, params: Vec<Param>) -> Query<'static, Sqlite, SqliteArguments> {
        let mut query = sqlx::query(AssertSqlSafe(sql.to_owned())).persistent(self.persistent);
        for param in params {
            query = match param {
                Param::Text(text) => query.bind(text),
                Param::Int(int) => query.bind(int),
                Param::Bool(flag) => query.bind(flag),
                Param::Time(at) => query.bind(at.map(as_text)),
            };
        }
        query
    }
}

/// Unchecked, as the lock rows are (`crate::sqlite`): SQLite's columns have affinities, not
/// types, and an expression such as `MAX(ended_at)` has none.
impl Columns for SqliteRow {
    fn text(&self, index: usize) -> Result<String, sqlx::Error> {
        self.try_get_unchecked(index)
    }

    fn opt_text(&self, index: usize) -> Result<Option<String>, sqlx::Error> {
        self.try_get_unchecked(index)
    }

    fn int(&self, index: usize) -> Result<i64, sqlx::Error> {
        self.try_get_unchecked(index)
    }

    fn flag(&self, index: usize) -> Result<bool, sqlx::Error> {
        self.try_get_unchecked(index)
    }

    fn opt_time(&self, index: usize) -> Result<Option<DateTime<Utc>>, sqlx::Error> {
        let Some(text) = self.try_get_unchecked::<Option<String>, _>(index)? else {
            return Ok(None);
        };
        NaiveDateTime::parse_from_str(&text, "%Y-%m-%d %H:%M:%S%.f")
            .map(|at| Some(at.and_utc()))
            .map_err(|e| sqlx::Error::ColumnDecode {
                index: index.to_string(),
                source: format!("time {text:?}: {e}").into(),
            })
    }
}

#[async_trait]
impl Tables for SqliteTables {
    type Row = SqliteRow;
    const DIALECT: SqlDialect = SqlDialect::Sqlite;

    fn place(&self) -> String {
        format!(
            " in {}",
            self.pool.connect_options().get_filename().display()
        )
    }

    fn set_statement_cache(&mut self, cache: bool) {
        self.persistent = cache;
    }

    fn table_missing(e: &sqlx::Error) -> bool {
        matches!(e, sqlx::Error::Database(db)
            if db.message().starts_with("no such table") || db.message().starts_with("no such column"))
    }

    async fn rows(&self, sql: &str, params: Vec<Param>) -> Result<Vec<SqliteRow>, sqlx::Error> {
        self.query(sql, params).fetch_all(&self.pool).await
    }

    async fn change(&self, sql: &str, params: Vec<Param>) -> Result<Changed, sqlx::Error> {
        let done = self.query(sql, params).execute(&self.pool).await?;
        Ok(Changed {
            rows: done.rows_affected(),
            insert_id: 0,
        })
    }

    async fn heartbeat(
        &self,
        sql: &OperationsSql,
        beat: &Heartbeat,
    ) -> Result<Vec<SqliteRow>, sqlx::Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        for upsert in sql.heartbeat_upserts(beat.jobs.len() + 1) {
            let params = upsert_params(&upsert, beat);
            self.query(&upsert.sql, params).execute(&mut *tx).await?;
        }
        let rows = self.query(&sql.poll, vec![]).fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(rows)
    }

    /// In one transaction holding the write lock, as `lock-provider-sqlite` does.
    async fn create(&self, sql: &OperationsSql) -> Result<(), sqlx::Error> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        for statement in &sql.create {
            sqlx::raw_sql(AssertSqlSafe(statement.clone()))
                .execute(&mut *tx)
                .await?;
        }
        // Tables from before these columns: added, with their defaults, then the index on
        // them.
        for column in &sql.added_later {
            let missing: bool = sqlx::query_scalar(AssertSqlSafe(column.missing.clone()))
                .fetch_one(&mut *tx)
                .await?;
            if missing {
                sqlx::raw_sql(AssertSqlSafe(column.ddl.clone()))
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await
    }
}
