//! The operations tables on MySQL and MariaDB through sqlx. Times are `DATETIME(3)` holding
//! UTC (`UTC_TIMESTAMP(3)`), so the session time zone plays no part. The heartbeat is the
//! registry upsert (cut into statements under MySQL's parameter limit for a beat of a thousand
//! jobs or more) followed by a read of the control table on the same connection: MySQL has no
//! `RETURNING` that could carry both.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use lock_cluster::Heartbeat;
use lock_sql::{OperationsSql, SqlDialect};
use sqlx::mysql::{MySqlArguments, MySqlPool, MySqlRow};
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, Connection, MySql, Row};

use super::{Changed, Columns, Param, Tables, upsert_params};

/// `ER_NO_SUCH_TABLE`.
const NO_SUCH_TABLE: u16 = 1146;
/// `ER_BAD_FIELD_ERROR`: a table from before the column.
const BAD_FIELD: u16 = 1054;

/// The operations statements on a MySQL or MariaDB pool.
#[derive(Clone)]
pub(crate) struct MySqlTables {
    pool: MySqlPool,
    persistent: bool,
}

impl MySqlTables {
    pub(crate) fn new(pool: MySqlPool) -> Self {
        MySqlTables {
            pool,
            persistent: true,
        }
    }

    fn query(&self, sql: &str, params: Vec<Param>) -> Query<'static, MySql, MySqlArguments> {
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
}

/// Unchecked, as the lock rows are (`crate::mysql`): the columns are ours, and the types
/// MySQL and MariaDB report for them (and for `MAX(..)`) vary between versions.
impl Columns for MySqlRow {
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
        Ok(self
            .try_get_unchecked::<Option<NaiveDateTime>, _>(index)?
            .map(|at| at.and_utc()))
    }
}

#[async_trait]
impl Tables for MySqlTables {
    type Row = MySqlRow;
    const DIALECT: SqlDialect = SqlDialect::MySql;

    fn set_statement_cache(&mut self, cache: bool) {
        self.persistent = cache;
    }

    fn table_missing(e: &sqlx::Error) -> bool {
        matches!(e, sqlx::Error::Database(db)
            if db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .is_some_and(|db| matches!(db.number(), NO_SUCH_TABLE | BAD_FIELD)))
    }

    async fn rows(&self, sql: &str, params: Vec<Param>) -> Result<Vec<MySqlRow>, sqlx::Error> {
        self.query(sql, params).fetch_all(&self.pool).await
    }

    async fn change(&self, sql: &str, params: Vec<Param>) -> Result<Changed, sqlx::Error> {
        let done = self.query(sql, params).execute(&self.pool).await?;
        Ok(Changed {
            rows: done.rows_affected(),
            insert_id: done.last_insert_id(),
        })
    }

    /// A beat cut into several statements runs them in one transaction, so that it is
    /// written whole or not at all, as one statement is.
    async fn heartbeat(
        &self,
        sql: &OperationsSql,
        beat: &Heartbeat,
    ) -> Result<Vec<MySqlRow>, sqlx::Error> {
        let upserts = sql.heartbeat_upserts(beat.jobs.len() + 1);
        let mut conn = self.pool.acquire().await?;
        if let [upsert] = upserts.as_slice() {
            let params = upsert_params(upsert, beat);
            self.query(&upsert.sql, params).execute(&mut *conn).await?;
        } else {
            let mut tx = conn.begin().await?;
            for upsert in &upserts {
                let params = upsert_params(upsert, beat);
                self.query(&upsert.sql, params).execute(&mut *tx).await?;
            }
            tx.commit().await?;
        }
        self.query(&sql.poll, vec![]).fetch_all(&mut *conn).await
    }

    /// `CREATE TABLE IF NOT EXISTS`, indexes inline (MySQL 8 has no `CREATE INDEX IF NOT
    /// EXISTS`), on one connection, as `lock-provider-mysql` does.
    async fn create(&self, sql: &OperationsSql) -> Result<(), sqlx::Error> {
        let mut conn = self.pool.acquire().await?;
        for statement in &sql.create {
            let done = sqlx::raw_sql(AssertSqlSafe(statement.clone()))
                .execute(&mut *conn)
                .await;
            match done {
                Ok(_) => {}
                // An instance starting at the same time added it between the catalog check
                // and this statement (its named lock timed out): it is there, as wanted.
                Err(sqlx::Error::Database(e))
                    if e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                        .is_some_and(|e| {
                            lock_sql::sql::mysql::ADDED_BY_ANOTHER.contains(&e.number())
                        }) => {}
                Err(e) => {
                    // The DDL's named lock is the session's: not left to the pooled connection.
                    if let Some(release) = &sql.create_release {
                        let _ = sqlx::raw_sql(AssertSqlSafe(release.clone()))
                            .execute(&mut *conn)
                            .await;
                    }
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}
