//! The operations tables (job registry, run history, control, action log, incidents) in the
//! SQLite file: the kit's statements ([`lock_sql::operations_sql`]) on the provider's one
//! connection.
//!
//! Times are SQLite's own clock as the lock table stores them (`YYYY-MM-DD HH:MM:SS.SSS`,
//! UTC). The heartbeat's upsert and its read of the control table run in one immediate
//! transaction on the local file.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use lock_cluster::{
    Action, ActionRecord, ClusterStore, ControlKind, ControlRequest, Expired, Heartbeat, Incident,
    InstanceInfo, JobRegistration, MAX_DETAIL_LEN, OperatorStore, RegistryRow, RunEnd, RunLog,
    RunRecord, RunStart, RunState, truncate,
};
use lock_core::{FireSlot, LockError, Params};
use lock_sql::operations_sql::{HEARTBEAT_PARAMS, HeartbeatUpsert, stored_params};
use lock_sql::{OperationsSql, ResolvedTable, SqlDialect};
use rusqlite::types::Value;
use rusqlite::{Connection, Row, params_from_iter};

use crate::session::{Session, in_immediate_transaction};
use crate::statements::Statements;

/// The operations tables next to one lock table.
#[derive(Clone, Debug)]
pub(crate) struct SqliteOperations {
    session: Session,
    /// The lock table's statements: only what the session's runner takes along.
    lock_statements: Arc<Statements>,
    /// Shared with the reads that run off the async workers (their rows' `params` errors
    /// name the statements' tables).
    sql: Arc<OperationsSql>,
}

fn text(at: DateTime<Utc>) -> Value {
    Value::Text(at.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
}

fn opt_text(at: Option<DateTime<Utc>>) -> Value {
    at.map_or(Value::Null, text)
}

/// A slot as the tables keep it: to the millisecond (the text has three decimals).
fn slot(at: DateTime<Utc>) -> Value {
    text(FireSlot::new(at).instant())
}

fn params_text(params: &Params) -> Value {
    stored_params(params).map_or(Value::Null, Value::Text)
}

/// A `params` column that does not decode, as the row's conversion failure (its message
/// names the row).
fn params_failure(index: usize, e: lock_sql::operations_sql::StoredParamsError) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, rusqlite::types::Type::Text, Box::new(e))
}

fn parse_time(value: String) -> rusqlite::Result<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(&value, "%Y-%m-%d %H:%M:%S%.f")
        .map(|t| t.and_utc())
        .map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })
}

fn time(row: &Row<'_>, index: usize) -> rusqlite::Result<DateTime<Utc>> {
    parse_time(row.get(index)?)
}

fn opt_time(row: &Row<'_>, index: usize) -> rusqlite::Result<Option<DateTime<Utc>>> {
    row.get::<_, Option<String>>(index)?
        .map(parse_time)
        .transpose()
}

fn action_row(row: &Row<'_>) -> rusqlite::Result<ActionRecord> {
    let action: String = row.get(3)?;
    Ok(ActionRecord::read(
        row.get(0)?,
        time(row, 1)?,
        row.get(2)?,
        // An unknown action written by hand reads as an unlock, the one without a job's state.
        action.parse().unwrap_or(Action::Unlock),
        row.get(4)?,
        row.get(5)?,
    ))
}

fn incident_row(row: &Row<'_>) -> rusqlite::Result<Incident> {
    Ok(Incident {
        key: row.get(0)?,
        summary: row.get(1)?,
        opened_at: time(row, 2)?,
    })
}

fn control_row(sql: &OperationsSql, row: &Row<'_>) -> rusqlite::Result<ControlRequest> {
    let kind: String = row.get(2)?;
    let id = row.get(0)?;
    Ok(ControlRequest {
        id,
        job: row.get(1)?,
        // An unknown kind written by hand reads as a trigger request nobody runs.
        kind: kind.parse().unwrap_or(ControlKind::Trigger),
        requested_at: time(row, 3)?,
        requested_by: row.get(4)?,
        claimed_by: row.get(5)?,
        claimed_at: opt_time(row, 6)?,
        slot: opt_time(row, 7)?,
        params: sql
            .control_params(id, row.get::<_, Option<String>>(8)?.as_deref())
            .map_err(|e| params_failure(8, e))?,
    })
}

fn run_row(sql: &OperationsSql, row: &Row<'_>) -> rusqlite::Result<RunRecord> {
    let kind: String = row.get(3)?;
    let outcome: String = row.get(8)?;
    let id = row.get(0)?;
    Ok(RunRecord {
        id,
        job: row.get(1)?,
        slot: opt_time(row, 2)?,
        fire_kind: kind.parse().unwrap_or(lock_core::FireKind::Scheduled),
        instance_id: row.get(4)?,
        fence: lock_core::encoding::fence_from_sql(row.get(5)?),
        started_at: time(row, 6)?,
        ended_at: opt_time(row, 7)?,
        outcome: outcome.parse().unwrap_or(RunState::Running),
        error: row.get(9)?,
        attempt: u32::try_from(row.get::<_, i64>(10)?).unwrap_or(1),
        cancel_requested: row.get(11)?,
        params: sql
            .run_params(id, row.get::<_, Option<String>>(12)?.as_deref())
            .map_err(|e| params_failure(12, e))?,
    })
}

fn run_log_row(sql: &OperationsSql, row: &Row<'_>) -> rusqlite::Result<Option<(i64, RunLog)>> {
    let id = row.get(0)?;
    let log = sql
        .run_log(id, row.get(1)?)
        .map_err(|e| params_failure(1, e))?;
    Ok(log.map(|log| (id, log)))
}

fn registry_row(row: &Row<'_>) -> rusqlite::Result<RegistryRow> {
    let job: String = row.get(1)?;
    let pid: i64 = row.get(7)?;
    Ok(RegistryRow {
        instance: InstanceInfo {
            instance_id: row.get(0)?,
            host: row.get(6)?,
            pid: u32::try_from(pid).unwrap_or(0),
            version: row.get(8)?,
            started_at: time(row, 9)?,
            clock_offset_ms: row.get(11)?,
            heartbeat_ms: row.get(12)?,
        },
        heartbeat_at: time(row, 10)?,
        job: if job.is_empty() {
            None
        } else {
            Some(JobRegistration {
                name: job,
                lock_name: row.get(2)?,
                trigger: row.get(3)?,
                zone: row.get(4)?,
                next_fire: opt_time(row, 5)?,
                following_fire: opt_time(row, 13)?,
            })
        },
    })
}

fn query<T>(
    conn: &Connection,
    sql: &str,
    params: Vec<Value>,
    read: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params_from_iter(params), read)?;
    rows.collect()
}

/// `ensure_schema`'s step for the operations tables; a lock table whose name leaves no room
/// for theirs is logged and skipped (the locks work without them).
pub(crate) async fn ensure(
    operations: Option<&SqliteOperations>,
    config: &crate::LockTableConfig,
) -> Result<(), LockError> {
    match operations {
        Some(operations) => operations.ensure().await,
        None => {
            tracing::warn!(table = %config.table, "no operations tables (registry, history, pause, trigger) next to this lock table: its name is too long to derive theirs");
            Ok(())
        }
    }
}

/// The parameters of one heartbeat statement: 13 per registry row it writes, in the order
/// of [`OperationsSql::heartbeat`].
fn upsert_params(upsert: &HeartbeatUpsert, beat: &Heartbeat) -> Vec<Value> {
    let i = &beat.instance;
    let mut params = Vec::with_capacity(upsert.rows.len() * HEARTBEAT_PARAMS);
    for job in upsert.registrations(beat) {
        params.extend([
            Value::Text(i.instance_id.clone()),
            Value::Text(job.map_or("", |j| j.name.as_str()).to_owned()),
            Value::Text(job.map_or("", |j| j.lock_name.as_str()).to_owned()),
            Value::Text(job.map_or("", |j| j.trigger.as_str()).to_owned()),
            job.and_then(|j| j.zone.clone())
                .map_or(Value::Null, Value::Text),
            opt_text(job.and_then(|j| j.next_fire)),
            Value::Text(i.host.clone()),
            Value::Integer(i64::from(i.pid)),
            Value::Text(i.version.clone()),
            text(i.started_at),
            Value::Integer(i.clock_offset_ms),
            Value::Integer(i.heartbeat_ms),
            opt_text(job.and_then(|j| j.following_fire)),
        ]);
    }
    params
}

impl SqliteOperations {
    /// The upsert of `beat` (one statement per thousand rows: SQLite's parameter limit), then,
    /// when `complete`, the deletion of the instance's other job rows, then the poll of the
    /// control table, in one transaction.
    async fn beat(
        &self,
        beat: &Heartbeat,
        complete: bool,
    ) -> Result<Vec<ControlRequest>, LockError> {
        let upserts: Vec<(String, Vec<Value>)> = self
            .sql
            .heartbeat_upserts(beat.jobs.len() + 1)
            .into_iter()
            .map(|upsert| {
                let params = upsert_params(&upsert, beat);
                (upsert.sql, params)
            })
            .collect();
        let poll = self.sql.poll.clone();
        let sql = self.sql.clone();
        let prune = complete.then(|| (self.sql.prune_jobs(), beat.instance.instance_id.clone()));
        self.run("heartbeat", move |conn| {
            in_immediate_transaction(conn, |conn| {
                for (upsert, params) in upserts {
                    conn.prepare_cached(&upsert)?
                        .execute(params_from_iter(params))?;
                }
                if let Some((prune, id)) = &prune {
                    conn.prepare_cached(prune)?.execute([id])?;
                }
                query(conn, &poll, vec![], |row| control_row(&sql, row))
            })
        })
        .await
    }

    /// The tables next to `table`; None (logged at `ensure_schema`) when a derived name would
    /// be too long.
    pub(crate) fn new(
        session: Session,
        lock_statements: Arc<Statements>,
        table: &ResolvedTable,
    ) -> Option<Self> {
        let sql = OperationsSql::new(SqlDialect::Sqlite, table).ok()?;
        Some(SqliteOperations {
            session,
            lock_statements,
            sql: Arc::new(sql),
        })
    }

    /// Creates the tables and indexes if missing, in one transaction holding the write lock.
    pub(crate) async fn ensure(&self) -> Result<(), LockError> {
        let sql = self.sql.create.clone();
        let added = self.sql.added_later.clone();
        self.run("schema", move |conn| {
            in_immediate_transaction(conn, |conn| {
                for statement in &sql {
                    conn.execute_batch(statement)?;
                }
                // Tables from before these columns: added, with their defaults, then the
                // index on them.
                for column in &added {
                    if conn.query_row(&column.missing, [], |row| row.get::<_, bool>(0))? {
                        conn.execute_batch(&column.ddl)?;
                    }
                }
                Ok(())
            })
        })
        .await
    }

    fn describe(&self) -> String {
        format!(
            "sqlite tables {} in {}",
            self.sql.tables.listing(),
            self.session.path().display()
        )
    }

    /// Runs `work` on the connection off the async workers, mapping its errors here (a
    /// missing table is one of ours, not the lock table).
    async fn run<T, F>(&self, operation: &'static str, work: F) -> Result<T, LockError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let result = self
            .session
            .run(&self.lock_statements, operation, "", move |conn, _| {
                Ok(work(conn))
            })
            .await?;
        result.map_err(|e| {
            // A column missing is a table from before it: `ensure_schema()` adds it.
            let missing =
                |m: &str| m.starts_with("no such table") || m.starts_with("no such column");
            let missing = matches!(&e, rusqlite::Error::SqliteFailure(_, Some(m)) if missing(m))
                || matches!(&e, rusqlite::Error::SqlInputError { msg, .. } if missing(msg));
            if missing {
                LockError::TableMissing {
                    table: self.sql.tables.listing(),
                    ddl: self.ddl(),
                    source: Some(Box::new(e)),
                }
            } else {
                LockError::provider(operation, "", self.describe(), e)
            }
        })
    }

    /// What `ensure_schema()` runs, for a message: the DDL, then the columns added later
    /// (each `ALTER` to run where its column is missing) and their index.
    fn ddl(&self) -> String {
        let mut ddl = self.sql.create.clone();
        ddl.extend(self.sql.added_later.iter().map(|a| a.ddl.clone()));
        ddl.join(";\n") + ";"
    }

    async fn rows<T: Send + 'static>(
        &self,
        operation: &'static str,
        sql: &str,
        params: Vec<Value>,
        read: fn(&Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, LockError> {
        let sql = sql.to_owned();
        self.run(operation, move |conn| query(conn, &sql, params, read))
            .await
    }

    /// As [`rows`](Self::rows), for the rows read with the statements' own table names
    /// (control and history: their `params` errors name the row).
    async fn rows_of<T: Send + 'static>(
        &self,
        operation: &'static str,
        sql: &str,
        params: Vec<Value>,
        read: fn(&OperationsSql, &Row<'_>) -> rusqlite::Result<T>,
    ) -> Result<Vec<T>, LockError> {
        let text = sql.to_owned();
        let sql = self.sql.clone();
        self.run(operation, move |conn| {
            query(conn, &text, params, |row| read(&sql, row))
        })
        .await
    }

    async fn change(
        &self,
        operation: &'static str,
        sql: &str,
        params: Vec<Value>,
    ) -> Result<u64, LockError> {
        let sql = sql.to_owned();
        self.run(operation, move |conn| {
            let n = conn
                .prepare_cached(&sql)?
                .execute(params_from_iter(params))?;
            Ok(n as u64)
        })
        .await
    }
}

#[async_trait]
impl ClusterStore for SqliteOperations {
    fn tables(&self) -> String {
        self.sql.tables.listing()
    }

    async fn check(&self) -> Result<(), LockError> {
        for probe in &self.sql.check {
            self.rows("check", probe, vec![], |_| Ok(())).await?;
        }
        Ok(())
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        self.beat(beat, true).await
    }

    async fn heartbeat_changes(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        self.beat(beat, false).await
    }

    async fn claim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let n = self
            .change(
                "claim",
                &self.sql.claim,
                vec![Value::Text(instance_id.to_owned()), Value::Integer(id)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn unclaim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let n = self
            .change(
                "unclaim",
                &self.sql.unclaim,
                vec![Value::Text(instance_id.to_owned()), Value::Integer(id)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn run_started(&self, run: &RunStart) -> Result<i64, LockError> {
        let params = vec![
            Value::Text(run.job.clone()),
            opt_text(run.slot),
            Value::Text(run.fire_kind.as_str().to_owned()),
            Value::Text(run.instance_id.clone()),
            Value::Integer(i64::try_from(run.fence).unwrap_or(-1)),
            Value::Integer(i64::from(run.attempt)),
            params_text(&run.params),
        ];
        let ids = self
            .rows("history", &self.sql.run_start, params, |row| row.get(0))
            .await?;
        Ok(ids.first().copied().unwrap_or(0))
    }

    async fn run_ended(&self, end: &RunEnd) -> Result<(), LockError> {
        let params = vec![
            Value::Text(end.outcome.as_str().to_owned()),
            end.error
                .as_ref()
                .map_or(Value::Null, |e| Value::Text(e.clone())),
            Value::Integer(i64::from(end.cancel_requested)),
            end.logs
                .as_ref()
                .map_or(Value::Null, |l| Value::Text(l.as_stored().to_owned())),
            Value::Integer(end.id),
        ];
        self.change("history", &self.sql.run_end, params)
            .await
            .map(drop)
    }

    async fn instances(&self) -> Result<Vec<RegistryRow>, LockError> {
        self.rows("registry", &self.sql.instances, vec![], registry_row)
            .await
    }

    async fn request_after(
        &self,
        child: &str,
        slot_at: DateTime<Utc>,
        parent: &str,
    ) -> Result<i64, LockError> {
        let params = vec![
            Value::Text(child.to_owned()),
            Value::Text(parent.to_owned()),
            slot(slot_at),
        ];
        let ids = self
            .rows("after", &self.sql.request_after, params, |row| row.get(0))
            .await?;
        Ok(ids.first().copied().unwrap_or(0))
    }

    async fn after_requests(
        &self,
        child: &str,
        slot_at: DateTime<Utc>,
    ) -> Result<Vec<String>, LockError> {
        let params = vec![Value::Text(child.to_owned()), slot(slot_at)];
        self.rows("after", &self.sql.after_requests, params, |row| row.get(0))
            .await
    }

    async fn delete_after(&self, child: &str, through: DateTime<Utc>) -> Result<u64, LockError> {
        let params = vec![Value::Text(child.to_owned()), slot(through)];
        self.change("after", &self.sql.delete_after, params).await
    }

    async fn open_incidents(&self) -> Result<Vec<Incident>, LockError> {
        self.rows("incidents", &self.sql.open_incidents, vec![], incident_row)
            .await
    }

    async fn open_incident(&self, key: &str, summary: &str) -> Result<bool, LockError> {
        let summary = truncate(summary, MAX_DETAIL_LEN);
        let params = vec![Value::Text(key.to_owned()), Value::Text(summary.to_owned())];
        if self
            .change("incidents", &self.sql.open_incident, params)
            .await?
            == 1
        {
            return Ok(true);
        }
        // A row of that key exists: reopened if it is resolved, left alone while it is open.
        let params = vec![Value::Text(summary.to_owned()), Value::Text(key.to_owned())];
        Ok(self
            .change("incidents", &self.sql.reopen_incident, params)
            .await?
            == 1)
    }

    async fn resolve_incident(&self, key: &str) -> Result<bool, LockError> {
        let params = vec![Value::Text(key.to_owned())];
        Ok(self
            .change("incidents", &self.sql.resolve_incident, params)
            .await?
            == 1)
    }

    async fn delete_expired(
        &self,
        what: Expired,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, LockError> {
        let sql = self.sql.delete_expired(what);
        let params = vec![text(before), Value::Integer(i64::from(limit))];
        self.change("housekeeping", sql, params).await
    }
}

#[async_trait]
impl OperatorStore for SqliteOperations {
    async fn pause(&self, job: &str, requested_by: &str) -> Result<bool, LockError> {
        let params = vec![
            Value::Text(job.to_owned()),
            Value::Text(requested_by.to_owned()),
        ];
        Ok(self.change("pause", &self.sql.pause, params).await? > 0)
    }

    async fn resume(&self, job: &str) -> Result<bool, LockError> {
        let params = vec![Value::Text(job.to_owned())];
        Ok(self.change("resume", &self.sql.resume, params).await? > 0)
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
            Value::Text(job.to_owned()),
            Value::Text(requested_by.to_owned()),
            params_text(params),
        ];
        let ids = self
            .rows("trigger", &self.sql.request_trigger, params, |row| {
                row.get(0)
            })
            .await?;
        Ok(ids.first().copied().unwrap_or(0))
    }

    async fn withdraw_trigger(&self, id: i64) -> Result<bool, LockError> {
        let params = vec![Value::Integer(id)];
        Ok(self
            .change("trigger", &self.sql.withdraw_trigger, params)
            .await?
            > 0)
    }

    async fn control(&self) -> Result<Vec<ControlRequest>, LockError> {
        self.rows_of("control", &self.sql.control, vec![], control_row)
            .await
    }

    async fn registry(&self) -> Result<Vec<RegistryRow>, LockError> {
        self.rows("registry", &self.sql.registry, vec![], registry_row)
            .await
    }

    async fn history(&self, job: &str, limit: u32) -> Result<Vec<RunRecord>, LockError> {
        let params = vec![
            Value::Text(job.to_owned()),
            Value::Integer(i64::from(limit)),
        ];
        self.rows_of("history", &self.sql.history, params, run_row)
            .await
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
        let params = vec![
            Value::Text(job.to_owned()),
            Value::Integer(before),
            Value::Integer(i64::from(limit)),
        ];
        self.rows_of("history", &self.sql.history_page, params, run_row)
            .await
    }

    async fn run_logs(
        &self,
        job: &str,
        ids: std::ops::RangeInclusive<i64>,
    ) -> Result<Vec<(i64, RunLog)>, LockError> {
        let params = vec![
            Value::Text(job.to_owned()),
            Value::Integer(*ids.start()),
            Value::Integer(*ids.end()),
        ];
        let rows = self
            .rows_of("history", &self.sql.run_logs, params, run_log_row)
            .await?;
        Ok(rows.into_iter().flatten().collect())
    }

    async fn last_runs(&self) -> Result<Vec<RunRecord>, LockError> {
        self.rows_of("history", &self.sql.last_runs, vec![], run_row)
            .await
    }

    async fn last_successes(&self) -> Result<Vec<(String, DateTime<Utc>)>, LockError> {
        self.rows("history", &self.sql.last_successes, vec![], |row| {
            Ok((row.get(0)?, time(row, 1)?))
        })
        .await
    }

    async fn record_action(&self, action: &ActionRecord) -> Result<(), LockError> {
        let (job, requested_by, detail) = action.truncated();
        let params = vec![
            Value::Text(job.to_owned()),
            Value::Text(action.action.as_str().to_owned()),
            Value::Text(requested_by.to_owned()),
            detail.map_or(Value::Null, |d| Value::Text(d.to_owned())),
        ];
        self.change("action log", &self.sql.record_action, params)
            .await
            .map(drop)
    }

    async fn actions(&self, job: &str, limit: u32) -> Result<Vec<ActionRecord>, LockError> {
        let params = vec![
            Value::Text(job.to_owned()),
            Value::Integer(i64::from(limit)),
        ];
        self.rows("action log", &self.sql.actions, params, action_row)
            .await
    }
}
