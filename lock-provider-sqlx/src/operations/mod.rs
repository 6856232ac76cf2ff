//! The operations tables (job registry, run history, control, action log, incidents) on the
//! sqlx pool: the kit's statements ([`lock_sql::operations_sql`], the very text
//! `lock-provider-postgres`, `-mysql` and `-sqlite` run) with the same parameters and the same
//! reading of the rows.
//!
//! [`SqlxOperations`] is the store, written once; a backend ([`Tables`]) only says how to run
//! a statement on its pool, how to bind a value and read a column, and how its heartbeat and
//! DDL run: PostgreSQL's heartbeat is one statement over arrays, MySQL's the upsert (several
//! statements in one transaction for a thousand jobs or more) and a read on one connection,
//! SQLite's one `BEGIN IMMEDIATE` transaction, as in the driver-specific providers.

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

#[cfg(feature = "mysql")]
pub(crate) use mysql::MySqlTables;
#[cfg(feature = "postgres")]
pub(crate) use postgres::PgTables;
#[cfg(feature = "sqlite")]
pub(crate) use sqlite::SqliteTables;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_cluster::{
    Action, ActionRecord, ClusterStore, ControlKind, ControlRequest, Expired, Heartbeat, Incident,
    InstanceInfo, JobRegistration, MAX_DETAIL_LEN, OperatorStore, RegistryRow, RunEnd, RunLog,
    RunRecord, RunStart, RunState, truncate,
};
use lock_core::{FireKind, FireSlot, LockError, Params};
use lock_sql::operations_sql::{HEARTBEAT_PARAMS, HeartbeatUpsert, stored_params};
use lock_sql::{OperationsSql, ResolvedTable, SqlDialect};

/// One value bound to a statement; each backend binds it with its own types (times as UTC
/// `NaiveDateTime` in PostgreSQL and MySQL, as fixed-width text in SQLite).
pub(crate) enum Param {
    Text(Option<String>),
    Int(i64),
    Bool(bool),
    Time(Option<DateTime<Utc>>),
}

fn text(value: impl Into<String>) -> Param {
    Param::Text(Some(value.into()))
}

/// A slot as the tables keep it: to the millisecond (`TIMESTAMP(3)`, `DATETIME(3)` and
/// SQLite's text would round or cut the rest).
fn slot(at: DateTime<Utc>) -> Param {
    Param::Time(Some(FireSlot::new(at).instant()))
}

/// A `params` column that does not decode, as the column's decoding error (its message names
/// the row).
fn params_error(index: usize, e: lock_sql::operations_sql::StoredParamsError) -> sqlx::Error {
    sqlx::Error::ColumnDecode {
        index: index.to_string(),
        source: Box::new(e),
    }
}

/// What a changing statement answered.
pub(crate) struct Changed {
    pub(crate) rows: u64,
    /// MySQL's `last_insert_id` (0 elsewhere: PostgreSQL and SQLite return ids with `RETURNING`).
    pub(crate) insert_id: u64,
}

/// How a backend reads the operations tables' columns.
pub(crate) trait Columns {
    fn text(&self, index: usize) -> Result<String, sqlx::Error>;
    fn opt_text(&self, index: usize) -> Result<Option<String>, sqlx::Error>;
    fn int(&self, index: usize) -> Result<i64, sqlx::Error>;
    /// An `INTEGER` column (4 bytes where the database says so).
    /// An `INTEGER` column as `i32`: [`int`](Self::int) narrowed, where the driver reads
    /// every integer as `i64` (MySQL, SQLite).
    fn int4(&self, index: usize) -> Result<i32, sqlx::Error> {
        i32::try_from(self.int(index)?).map_err(|e| sqlx::Error::ColumnDecode {
            index: index.to_string(),
            source: Box::new(e),
        })
    }
    fn flag(&self, index: usize) -> Result<bool, sqlx::Error>;
    fn opt_time(&self, index: usize) -> Result<Option<DateTime<Utc>>, sqlx::Error>;

    fn time(&self, index: usize) -> Result<DateTime<Utc>, sqlx::Error> {
        self.opt_time(index)?.ok_or(sqlx::Error::ColumnDecode {
            index: index.to_string(),
            source: "NULL in a NOT NULL time column".into(),
        })
    }
}

/// One backend's way to run the kit's operations statements on its pool.
#[async_trait]
pub(crate) trait Tables: Clone + Send + Sync + 'static {
    type Row: Columns + Send + Sync;

    /// `postgres`, `mysql`, `sqlite`: the dialect of [`OperationsSql`] it runs.
    const DIALECT: SqlDialect;

    /// What follows the table names in messages (the SQLite file).
    fn place(&self) -> String {
        String::new()
    }

    /// Keep each statement prepared on its connection, or not (see
    /// `SqlxLockProvider::with_statement_cache`).
    fn set_statement_cache(&mut self, cache: bool);

    /// Whether `e` says one of the tables, or one of their columns, does not exist (tables
    /// from before a column: `ensure_schema()` adds it).
    fn table_missing(e: &sqlx::Error) -> bool;

    /// Runs a statement that returns rows.
    async fn rows(&self, sql: &str, params: Vec<Param>) -> Result<Vec<Self::Row>, sqlx::Error>;

    /// Runs a statement that changes rows.
    async fn change(&self, sql: &str, params: Vec<Param>) -> Result<Changed, sqlx::Error>;

    /// The heartbeat: the registry upsert of `beat`'s rows (whatever their number: cut by
    /// [`OperationsSql::heartbeat_upserts`], or over arrays), then the pauses and pending
    /// trigger requests ([`OperationsSql::poll`]).
    async fn heartbeat(
        &self,
        sql: &OperationsSql,
        beat: &Heartbeat,
    ) -> Result<Vec<Self::Row>, sqlx::Error>;

    /// Creates the tables and indexes (each statement a no-op when its object exists).
    async fn create(&self, sql: &OperationsSql) -> Result<(), sqlx::Error>;
}

/// The operations tables next to one lock table, on a sqlx pool.
#[derive(Clone)]
pub(crate) struct SqlxOperations<T> {
    tables: T,
    sql: OperationsSql,
}

/// The operations tables next to `table` on `tables`' pool; None (logged at `ensure_schema`)
/// when a derived name would be too long, as in the driver-specific providers.
pub(crate) fn next_to<T: Tables>(
    tables: T,
    table: &ResolvedTable,
) -> Option<Arc<SqlxOperations<T>>> {
    let sql = OperationsSql::new(T::DIALECT, table).ok()?;
    Some(Arc::new(SqlxOperations { tables, sql }))
}

/// The same tables with the statement cache on or off.
pub(crate) fn with_statement_cache<T: Tables>(
    operations: Option<Arc<SqlxOperations<T>>>,
    cache: bool,
) -> Option<Arc<SqlxOperations<T>>> {
    operations.map(|operations| {
        let mut operations = SqlxOperations::clone(&operations);
        operations.tables.set_statement_cache(cache);
        Arc::new(operations)
    })
}

/// `ensure_schema`'s step for the operations tables; a lock table whose name leaves no room
/// for theirs is logged and skipped (the locks work without them).
pub(crate) async fn ensure<T: Tables>(
    operations: Option<&SqlxOperations<T>>,
    config: &crate::LockTableConfig,
) -> Result<(), LockError> {
    match operations {
        Some(operations) => operations
            .tables
            .create(&operations.sql)
            .await
            .map_err(|e| operations.error("schema", "", e)),
        None => {
            tracing::warn!(table = %config.table, "no operations tables (registry, history, pause, trigger) next to this lock table: its name is too long to derive theirs");
            Ok(())
        }
    }
}

impl<T: Tables> SqlxOperations<T> {
    fn describe(&self) -> String {
        let kind = match T::DIALECT {
            SqlDialect::Postgres => "postgres",
            SqlDialect::MySql => "mysql",
            _ => "sqlite",
        };
        format!(
            "{kind} tables {}{} (sqlx)",
            self.sql.tables.listing(),
            self.tables.place()
        )
    }

    fn error(&self, operation: &'static str, job: &str, e: sqlx::Error) -> LockError {
        if T::table_missing(&e) {
            // SQLite's columns added later (and their index) follow its DDL, each to run
            // where missing; the other dialects' DDL adds them itself.
            let mut ddl = self.sql.create.clone();
            ddl.extend(self.sql.added_later.iter().map(|a| a.ddl.clone()));
            return LockError::TableMissing {
                table: self.sql.tables.listing(),
                ddl: ddl.join(";\n") + ";",
                source: Some(Box::new(e)),
            };
        }
        LockError::provider(operation, job, self.describe(), e)
    }

    async fn rows(
        &self,
        operation: &'static str,
        job: &str,
        sql: &str,
        params: Vec<Param>,
    ) -> Result<Vec<T::Row>, LockError> {
        self.tables
            .rows(sql, params)
            .await
            .map_err(|e| self.error(operation, job, e))
    }

    async fn change(
        &self,
        operation: &'static str,
        job: &str,
        sql: &str,
        params: Vec<Param>,
    ) -> Result<Changed, LockError> {
        self.tables
            .change(sql, params)
            .await
            .map_err(|e| self.error(operation, job, e))
    }

    fn decode<R>(
        &self,
        operation: &'static str,
        rows: &[T::Row],
        read: impl Fn(&T::Row) -> Result<R, sqlx::Error>,
    ) -> Result<Vec<R>, LockError> {
        rows.iter()
            .map(read)
            .collect::<Result<_, _>>()
            .map_err(|e| LockError::provider(operation, "", self.describe(), e))
    }

    /// An id: `RETURNING id` in PostgreSQL and SQLite, the insert id in MySQL.
    async fn insert(
        &self,
        operation: &'static str,
        job: &str,
        sql: &str,
        params: Vec<Param>,
    ) -> Result<i64, LockError> {
        if T::DIALECT == SqlDialect::MySql {
            let changed = self.change(operation, job, sql, params).await?;
            return Ok(i64::try_from(changed.insert_id).unwrap_or(0));
        }
        let rows = self.rows(operation, job, sql, params).await?;
        let ids = self.decode(operation, &rows, |row| row.int(0))?;
        Ok(ids.first().copied().unwrap_or(0))
    }
}

fn control_row<R: Columns>(sql: &OperationsSql, row: &R) -> Result<ControlRequest, sqlx::Error> {
    let id = row.int(0)?;
    Ok(ControlRequest {
        id,
        job: row.text(1)?,
        // An unknown kind written by hand reads as a trigger request nobody runs.
        kind: row.text(2)?.parse().unwrap_or(ControlKind::Trigger),
        requested_at: row.time(3)?,
        requested_by: row.text(4)?,
        claimed_by: row.opt_text(5)?,
        claimed_at: row.opt_time(6)?,
        slot: row.opt_time(7)?,
        params: sql
            .control_params(id, row.opt_text(8)?.as_deref())
            .map_err(|e| params_error(8, e))?,
    })
}

fn run_row<R: Columns>(sql: &OperationsSql, row: &R) -> Result<RunRecord, sqlx::Error> {
    let id = row.int(0)?;
    Ok(RunRecord {
        id,
        job: row.text(1)?,
        slot: row.opt_time(2)?,
        fire_kind: row.text(3)?.parse().unwrap_or(FireKind::Scheduled),
        instance_id: row.text(4)?,
        fence: lock_core::encoding::fence_from_sql(row.int(5)?),
        started_at: row.time(6)?,
        ended_at: row.opt_time(7)?,
        outcome: row.text(8)?.parse().unwrap_or(RunState::Running),
        error: row.opt_text(9)?,
        attempt: u32::try_from(row.int4(10)?).unwrap_or(1),
        cancel_requested: row.flag(11)?,
        params: sql
            .run_params(id, row.opt_text(12)?.as_deref())
            .map_err(|e| params_error(12, e))?,
    })
}

fn run_log_row<R: Columns>(
    sql: &OperationsSql,
    row: &R,
) -> Result<Option<(i64, RunLog)>, sqlx::Error> {
    let id = row.int(0)?;
    let log = sql
        .run_log(id, row.opt_text(1)?)
        .map_err(|e| params_error(1, e))?;
    Ok(log.map(|log| (id, log)))
}

fn action_row<R: Columns>(row: &R) -> Result<ActionRecord, sqlx::Error> {
    Ok(ActionRecord::read(
        row.int(0)?,
        row.time(1)?,
        row.text(2)?,
        // An unknown action written by hand reads as an unlock, the one without a job's state.
        row.text(3)?.parse().unwrap_or(Action::Unlock),
        row.text(4)?,
        row.opt_text(5)?,
    ))
}

fn incident_row<R: Columns>(row: &R) -> Result<Incident, sqlx::Error> {
    Ok(Incident {
        key: row.text(0)?,
        summary: row.text(1)?,
        opened_at: row.time(2)?,
    })
}

fn registry_row<R: Columns>(row: &R) -> Result<RegistryRow, sqlx::Error> {
    let job = row.text(1)?;
    Ok(RegistryRow {
        instance: InstanceInfo {
            instance_id: row.text(0)?,
            host: row.text(6)?,
            pid: u32::try_from(row.int(7)?).unwrap_or(0),
            version: row.text(8)?,
            started_at: row.time(9)?,
            clock_offset_ms: row.int(11)?,
            heartbeat_ms: row.int(12)?,
        },
        heartbeat_at: row.time(10)?,
        job: if job.is_empty() {
            None
        } else {
            Some(JobRegistration {
                name: job,
                lock_name: row.text(2)?,
                trigger: row.text(3)?,
                zone: row.opt_text(4)?,
                next_fire: row.opt_time(5)?,
                following_fire: row.opt_time(13)?,
            })
        },
    })
}

/// The parameters of one heartbeat statement (MySQL, SQLite): 13 per registry row it writes,
/// in the order of [`OperationsSql::heartbeat`].
fn upsert_params(upsert: &HeartbeatUpsert, beat: &Heartbeat) -> Vec<Param> {
    let i = &beat.instance;
    let mut params = Vec::with_capacity(upsert.rows.len() * HEARTBEAT_PARAMS);
    for job in upsert.registrations(beat) {
        params.extend([
            text(&i.instance_id),
            text(job.map_or("", |j| j.name.as_str())),
            text(job.map_or("", |j| j.lock_name.as_str())),
            text(job.map_or("", |j| j.trigger.as_str())),
            Param::Text(job.and_then(|j| j.zone.clone())),
            Param::Time(job.and_then(|j| j.next_fire)),
            text(&i.host),
            Param::Int(i64::from(i.pid)),
            text(&i.version),
            Param::Time(Some(i.started_at)),
            Param::Int(i.clock_offset_ms),
            Param::Int(i.heartbeat_ms),
            Param::Time(job.and_then(|j| j.following_fire)),
        ]);
    }
    params
}

#[async_trait]
impl<T: Tables> ClusterStore for SqlxOperations<T> {
    fn tables(&self) -> String {
        self.sql.tables.listing()
    }

    async fn check(&self) -> Result<(), LockError> {
        for probe in &self.sql.check {
            self.rows("check", "", probe, vec![]).await?;
        }
        Ok(())
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        let control = self.heartbeat_changes(beat).await?;
        let id = text(&beat.instance.instance_id);
        self.change("heartbeat", "", &self.sql.prune_jobs(), vec![id])
            .await?;
        Ok(control)
    }

    async fn heartbeat_changes(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        let rows = self
            .tables
            .heartbeat(&self.sql, beat)
            .await
            .map_err(|e| self.error("heartbeat", "", e))?;
        self.decode("heartbeat", &rows, |row| control_row(&self.sql, row))
    }

    async fn claim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let params = vec![text(instance_id), Param::Int(id)];
        let changed = self.change("claim", "", &self.sql.claim, params).await?;
        Ok(changed.rows == 1)
    }

    async fn unclaim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let params = vec![text(instance_id), Param::Int(id)];
        let changed = self
            .change("unclaim", "", &self.sql.unclaim, params)
            .await?;
        Ok(changed.rows == 1)
    }

    async fn run_started(&self, run: &RunStart) -> Result<i64, LockError> {
        let params = vec![
            text(&run.job),
            Param::Time(run.slot),
            text(run.fire_kind.as_str()),
            text(&run.instance_id),
            Param::Int(i64::try_from(run.fence).unwrap_or(-1)),
            Param::Int(i64::from(run.attempt)),
            Param::Text(stored_params(&run.params)),
        ];
        self.insert("history", &run.job, &self.sql.run_start, params)
            .await
    }

    async fn run_ended(&self, end: &RunEnd) -> Result<(), LockError> {
        let params = vec![
            text(end.outcome.as_str()),
            Param::Text(end.error.clone()),
            Param::Bool(end.cancel_requested),
            Param::Text(end.logs.as_ref().map(|l| l.as_stored().to_owned())),
            Param::Int(end.id),
        ];
        self.change("history", "", &self.sql.run_end, params)
            .await
            .map(drop)
    }

    async fn instances(&self) -> Result<Vec<RegistryRow>, LockError> {
        let rows = self
            .rows("registry", "", &self.sql.instances, vec![])
            .await?;
        self.decode("registry", &rows, registry_row)
    }

    async fn request_after(
        &self,
        child: &str,
        slot_at: DateTime<Utc>,
        parent: &str,
    ) -> Result<i64, LockError> {
        let params = vec![text(child), text(parent), slot(slot_at)];
        self.insert("after", child, &self.sql.request_after, params)
            .await
    }

    async fn after_requests(
        &self,
        child: &str,
        slot_at: DateTime<Utc>,
    ) -> Result<Vec<String>, LockError> {
        let params = vec![text(child), slot(slot_at)];
        let rows = self
            .rows("after", child, &self.sql.after_requests, params)
            .await?;
        self.decode("after", &rows, |row| row.text(0))
    }

    async fn delete_after(&self, child: &str, through: DateTime<Utc>) -> Result<u64, LockError> {
        let params = vec![text(child), slot(through)];
        let changed = self
            .change("after", child, &self.sql.delete_after, params)
            .await?;
        Ok(changed.rows)
    }

    async fn open_incidents(&self) -> Result<Vec<Incident>, LockError> {
        let rows = self
            .rows("incidents", "", &self.sql.open_incidents, vec![])
            .await?;
        self.decode("incidents", &rows, incident_row)
    }

    async fn open_incident(&self, key: &str, summary: &str) -> Result<bool, LockError> {
        let summary = truncate(summary, MAX_DETAIL_LEN);
        let params = vec![text(key), text(summary)];
        let inserted = self
            .change("incidents", key, &self.sql.open_incident, params)
            .await?;
        if inserted.rows == 1 {
            return Ok(true);
        }
        // A row of that key exists: reopened if it is resolved, left alone while it is open.
        let params = vec![text(summary), text(key)];
        let reopened = self
            .change("incidents", key, &self.sql.reopen_incident, params)
            .await?;
        Ok(reopened.rows == 1)
    }

    async fn resolve_incident(&self, key: &str) -> Result<bool, LockError> {
        let changed = self
            .change(
                "incidents",
                key,
                &self.sql.resolve_incident,
                vec![text(key)],
            )
            .await?;
        Ok(changed.rows == 1)
    }

    async fn delete_expired(
        &self,
        what: Expired,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, LockError> {
        let params = vec![Param::Time(Some(before)), Param::Int(i64::from(limit))];
        let changed = self
            .change("housekeeping", "", self.sql.delete_expired(what), params)
            .await?;
        Ok(changed.rows)
    }
}

#[async_trait]
impl<T: Tables> OperatorStore for SqlxOperations<T> {
    async fn pause(&self, job: &str, requested_by: &str) -> Result<bool, LockError> {
        let params = vec![text(job), text(requested_by)];
        let changed = self.change("pause", job, &self.sql.pause, params).await?;
        Ok(changed.rows > 0)
    }

    async fn resume(&self, job: &str) -> Result<bool, LockError> {
        let changed = self
            .change("resume", job, &self.sql.resume, vec![text(job)])
            .await?;
        Ok(changed.rows > 0)
    }

    async fn request_trigger(&self, job: &str, requested_by: &str) -> Result<i64, LockError> {
        self.request_trigger_with_params(job, requested_by, &Params::new())
            .await
    }

    async fn request_trigger_with_params(
        &self,
        job: &str,
        requested_by: &str,
        params: &Params,
    ) -> Result<i64, LockError> {
        let params = vec![
            text(job),
            text(requested_by),
            Param::Text(stored_params(params)),
        ];
        self.insert("trigger", job, &self.sql.request_trigger, params)
            .await
    }

    async fn withdraw_trigger(&self, id: i64) -> Result<bool, LockError> {
        let changed = self
            .change(
                "trigger",
                "",
                &self.sql.withdraw_trigger,
                vec![Param::Int(id)],
            )
            .await?;
        Ok(changed.rows > 0)
    }

    async fn control(&self) -> Result<Vec<ControlRequest>, LockError> {
        let rows = self.rows("control", "", &self.sql.control, vec![]).await?;
        self.decode("control", &rows, |row| control_row(&self.sql, row))
    }

    async fn registry(&self) -> Result<Vec<RegistryRow>, LockError> {
        let rows = self
            .rows("registry", "", &self.sql.registry, vec![])
            .await?;
        self.decode("registry", &rows, registry_row)
    }

    async fn history(&self, job: &str, limit: u32) -> Result<Vec<RunRecord>, LockError> {
        let params = vec![text(job), Param::Int(i64::from(limit))];
        let rows = self.rows("history", job, &self.sql.history, params).await?;
        self.decode("history", &rows, |row| run_row(&self.sql, row))
    }

    async fn history_page(
        &self,
        job: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<RunRecord>, LockError> {
        let Some(before) = before else {
            return self.history(job, limit).await;
        };
        let params = vec![text(job), Param::Int(before), Param::Int(i64::from(limit))];
        let rows = self
            .rows("history", job, &self.sql.history_page, params)
            .await?;
        self.decode("history", &rows, |row| run_row(&self.sql, row))
    }

    async fn run_logs(
        &self,
        job: &str,
        ids: std::ops::RangeInclusive<i64>,
    ) -> Result<Vec<(i64, RunLog)>, LockError> {
        let params = vec![text(job), Param::Int(*ids.start()), Param::Int(*ids.end())];
        let rows = self
            .rows("history", job, &self.sql.run_logs, params)
            .await?;
        let logs = self.decode("history", &rows, |row| run_log_row(&self.sql, row))?;
        Ok(logs.into_iter().flatten().collect())
    }

    async fn last_runs(&self) -> Result<Vec<RunRecord>, LockError> {
        let rows = self
            .rows("history", "", &self.sql.last_runs, vec![])
            .await?;
        self.decode("history", &rows, |row| run_row(&self.sql, row))
    }

    async fn last_successes(&self) -> Result<Vec<(String, DateTime<Utc>)>, LockError> {
        let rows = self
            .rows("history", "", &self.sql.last_successes, vec![])
            .await?;
        self.decode("history", &rows, |row| Ok((row.text(0)?, row.time(1)?)))
    }

    async fn record_action(&self, action: &ActionRecord) -> Result<(), LockError> {
        let (job, requested_by, detail) = action.truncated();
        let params = vec![
            text(job),
            text(action.action.as_str()),
            text(requested_by),
            Param::Text(detail.map(str::to_owned)),
        ];
        self.change("action log", job, &self.sql.record_action, params)
            .await
            .map(drop)
    }

    async fn actions(&self, job: &str, limit: u32) -> Result<Vec<ActionRecord>, LockError> {
        let params = vec![text(job), Param::Int(i64::from(limit))];
        let rows = self
            .rows("action log", job, &self.sql.actions, params)
            .await?;
        self.decode("action log", &rows, action_row)
    }
}
