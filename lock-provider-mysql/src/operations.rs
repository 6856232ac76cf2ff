//! The operations tables (job registry, run history, control) on MySQL and MariaDB: the kit's
//! statements ([`lock_sql::operations_sql`]) bound and read with mysql_async.
//!
//! Times are `DATETIME(3)` holding UTC (`UTC_TIMESTAMP(3)`), so the session time zone plays no
//! part. The heartbeat is the registry upsert (one statement, or several in one transaction
//! for a beat of a thousand jobs or more) followed by a read of the control table on the same
//! connection: MySQL has no `RETURNING` that could carry both. The run history's batches
//! (`runs_started`, `runs_ended`) are one text query each: `history.rs`.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use lock_cluster::{
    Action, ActionRecord, ClusterStore, ControlKind, ControlRequest, Expired, Heartbeat, Incident,
    InstanceInfo, JobRegistration, MAX_DETAIL_LEN, OperatorStore, RegistryRow, RunEnd, RunLog,
    RunRecord, RunStart, RunState,
};
use lock_core::{FireSlot, LockError, Params};
use lock_sql::operations_sql::{HEARTBEAT_PARAMS, HeartbeatUpsert, stored_params};
use lock_sql::sql::mysql::HistoryBatchStatements;
use lock_sql::{OperationsSql, ResolvedTable, SqlDialect};
use mysql_async::prelude::{FromValue, Queryable};
use mysql_async::{Conn, Pool, Row, TxOpts, Value};

mod history;

/// ER_NO_SUCH_TABLE.
const NO_SUCH_TABLE: u16 = 1146;
/// ER_BAD_FIELD_ERROR: a column missing, in a table from before it.
const BAD_FIELD: u16 = 1054;

/// How long taking a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The operations tables next to one lock table.
pub(crate) struct MySqlOperations {
    pool: Pool,
    sql: OperationsSql,
    history: HistoryBatchStatements,
}

/// `ensure_schema`'s step for the operations tables; a lock table whose name leaves no room
/// for theirs is logged and skipped (the locks work without them).
pub(crate) async fn ensure(
    operations: Option<&MySqlOperations>,
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

fn at(value: DateTime<Utc>) -> Value {
    value.naive_utc().into()
}

fn get<T: FromValue>(row: &Row, index: usize) -> Result<T, String> {
    row.get_opt(index)
        .ok_or_else(|| format!("column {index} missing"))?
        .map_err(|e| e.to_string())
}

fn utc(naive: NaiveDateTime) -> DateTime<Utc> {
    naive.and_utc()
}

/// A slot as the tables keep it: to the millisecond (`DATETIME(3)` would round the rest).
fn slot(value: DateTime<Utc>) -> Value {
    at(FireSlot::new(value).instant())
}

fn control_row(sql: &OperationsSql, row: &Row) -> Result<ControlRequest, String> {
    let kind: String = get(row, 2)?;
    let id = get(row, 0)?;
    Ok(ControlRequest {
        id,
        job: get(row, 1)?,
        // An unknown kind written by hand reads as a trigger request nobody runs.
        kind: kind.parse().unwrap_or(ControlKind::Trigger),
        requested_at: utc(get(row, 3)?),
        requested_by: get(row, 4)?,
        claimed_by: get(row, 5)?,
        claimed_at: get::<Option<NaiveDateTime>>(row, 6)?.map(utc),
        slot: get::<Option<NaiveDateTime>>(row, 7)?.map(utc),
        params: sql
            .control_params(id, get::<Option<String>>(row, 8)?.as_deref())
            .map_err(|e| e.to_string())?,
    })
}

fn run_row(sql: &OperationsSql, row: &Row) -> Result<RunRecord, String> {
    let kind: String = get(row, 3)?;
    let outcome: String = get(row, 8)?;
    let id = get(row, 0)?;
    Ok(RunRecord {
        id,
        job: get(row, 1)?,
        slot: get::<Option<NaiveDateTime>>(row, 2)?.map(utc),
        fire_kind: kind.parse().unwrap_or(lock_core::FireKind::Scheduled),
        instance_id: get(row, 4)?,
        fence: lock_core::encoding::fence_from_sql(get(row, 5)?),
        started_at: utc(get(row, 6)?),
        ended_at: get::<Option<NaiveDateTime>>(row, 7)?.map(utc),
        outcome: outcome.parse().unwrap_or(RunState::Running),
        error: get(row, 9)?,
        attempt: get(row, 10)?,
        cancel_requested: get(row, 11)?,
        params: sql
            .run_params(id, get::<Option<String>>(row, 12)?.as_deref())
            .map_err(|e| e.to_string())?,
    })
}

fn action_row(row: &Row) -> Result<ActionRecord, String> {
    let action: String = get(row, 3)?;
    Ok(ActionRecord::read(
        get(row, 0)?,
        utc(get(row, 1)?),
        get(row, 2)?,
        // An unknown action written by hand reads as an unlock, the one without a job's state.
        action.parse().unwrap_or(Action::Unlock),
        get(row, 4)?,
        get(row, 5)?,
    ))
}

fn incident_row(row: &Row) -> Result<Incident, String> {
    Ok(Incident {
        key: get(row, 0)?,
        summary: get(row, 1)?,
        opened_at: utc(get(row, 2)?),
    })
}

fn registry_row(row: &Row) -> Result<RegistryRow, String> {
    let job: String = get(row, 1)?;
    let pid: i64 = get(row, 7)?;
    Ok(RegistryRow {
        instance: InstanceInfo {
            instance_id: get(row, 0)?,
            host: get(row, 6)?,
            pid: u32::try_from(pid).unwrap_or(0),
            version: get(row, 8)?,
            started_at: utc(get(row, 9)?),
            clock_offset_ms: get(row, 11)?,
            heartbeat_ms: get(row, 12)?,
        },
        heartbeat_at: utc(get(row, 10)?),
        job: if job.is_empty() {
            None
        } else {
            Some(JobRegistration {
                name: job,
                lock_name: get(row, 2)?,
                trigger: get(row, 3)?,
                zone: get(row, 4)?,
                next_fire: get::<Option<NaiveDateTime>>(row, 5)?.map(utc),
                following_fire: get::<Option<NaiveDateTime>>(row, 13)?.map(utc),
            })
        },
    })
}

/// The parameters of one heartbeat statement: 13 per registry row it writes, in the order
/// of [`OperationsSql::heartbeat`].
fn upsert_params(upsert: &HeartbeatUpsert, beat: &Heartbeat) -> Vec<Value> {
    let i = &beat.instance;
    let mut params = Vec::with_capacity(upsert.rows.len() * HEARTBEAT_PARAMS);
    for job in upsert.registrations(beat) {
        params.extend([
            Value::from(&i.instance_id),
            Value::from(job.map_or("", |j| j.name.as_str())),
            Value::from(job.map_or("", |j| j.lock_name.as_str())),
            Value::from(job.map_or("", |j| j.trigger.as_str())),
            Value::from(job.and_then(|j| j.zone.clone())),
            job.and_then(|j| j.next_fire).map_or(Value::NULL, at),
            Value::from(&i.host),
            Value::from(i.pid),
            Value::from(&i.version),
            at(i.started_at),
            Value::from(i.clock_offset_ms),
            Value::from(i.heartbeat_ms),
            job.and_then(|j| j.following_fire).map_or(Value::NULL, at),
        ]);
    }
    params
}

impl MySqlOperations {
    /// The upsert of `beat`, then, when `complete`, the deletion of the instance's other job
    /// rows, then the poll of the control table, on one connection. A beat of more jobs than
    /// one statement takes is cut ([`OperationsSql::heartbeat_upserts`]) and its statements
    /// run in one transaction, so that it is written whole or not at all, as one statement is.
    async fn beat(
        &self,
        beat: &Heartbeat,
        complete: bool,
    ) -> Result<Vec<ControlRequest>, LockError> {
        let failed = |e| self.error("heartbeat", "", e);
        let upserts = self.sql.heartbeat_upserts(beat.jobs.len() + 1);
        let mut conn = self.conn("heartbeat").await?;
        if let [upsert] = upserts.as_slice() {
            conn.exec_drop(&upsert.sql, upsert_params(upsert, beat))
                .await
                .map_err(failed)?;
        } else {
            let mut tx = conn
                .start_transaction(TxOpts::default())
                .await
                .map_err(failed)?;
            for upsert in &upserts {
                tx.exec_drop(&upsert.sql, upsert_params(upsert, beat))
                    .await
                    .map_err(failed)?;
            }
            tx.commit().await.map_err(failed)?;
        }
        if complete {
            conn.exec_drop(self.sql.prune_jobs(), (beat.instance.instance_id.as_str(),))
                .await
                .map_err(failed)?;
        }
        let rows: Vec<Row> = conn
            .exec(self.sql.poll.as_str(), ())
            .await
            .map_err(failed)?;
        self.decode(
            "heartbeat",
            rows.iter().map(|row| control_row(&self.sql, row)).collect(),
        )
    }

    /// The tables next to `table`; None (logged at `ensure_schema`) when a derived name would
    /// be too long.
    pub(crate) fn new(pool: Pool, table: &ResolvedTable) -> Option<Self> {
        let sql = OperationsSql::new(SqlDialect::MySql, table).ok()?;
        let history = HistoryBatchStatements::new(&sql);
        Some(MySqlOperations { pool, sql, history })
    }

    /// Creates the tables if missing (`CREATE TABLE IF NOT EXISTS`, indexes inline: MySQL 8
    /// has no `CREATE INDEX IF NOT EXISTS`).
    pub(crate) async fn ensure(&self) -> Result<(), LockError> {
        let mut conn = self.conn("schema").await?;
        for statement in &self.sql.create {
            match conn.query_drop(statement.as_str()).await {
                Ok(()) => {}
                // An instance starting at the same time added it between the catalog check
                // and this statement (its named lock timed out): it is there, as wanted.
                Err(mysql_async::Error::Server(server))
                    if lock_sql::sql::mysql::ADDED_BY_ANOTHER.contains(&server.code) => {}
                Err(e) => {
                    // The DDL's named lock is the session's: not left to the pooled connection.
                    if let Some(release) = &self.sql.create_release {
                        let _ = conn.query_drop(release.as_str()).await;
                    }
                    return Err(self.error("schema", "", e));
                }
            }
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("mysql tables {}", self.sql.tables.listing())
    }

    async fn conn(&self, operation: &'static str) -> Result<Conn, LockError> {
        match tokio::time::timeout(CONNECT_TIMEOUT, self.pool.get_conn()).await {
            Ok(conn) => conn.map_err(|e| self.error(operation, "", e)),
            Err(_) => Err(LockError::provider(
                operation,
                "",
                self.describe(),
                format!("no connection within {CONNECT_TIMEOUT:?}"),
            )),
        }
    }

    fn error(&self, operation: &'static str, job: &str, e: mysql_async::Error) -> LockError {
        if let mysql_async::Error::Server(server) = &e
            && (server.code == NO_SUCH_TABLE || server.code == BAD_FIELD)
        {
            return LockError::TableMissing {
                table: self.sql.tables.listing(),
                ddl: self.sql.create.join(";\n") + ";",
                source: Some(Box::new(e)),
            };
        }
        LockError::provider(operation, job, self.describe(), e)
    }

    fn decode<T>(
        &self,
        operation: &'static str,
        parsed: Result<T, String>,
    ) -> Result<T, LockError> {
        parsed.map_err(|e| LockError::provider(operation, "", self.describe(), e))
    }

    async fn rows(
        &self,
        operation: &'static str,
        job: &str,
        sql: &str,
        params: Vec<Value>,
    ) -> Result<Vec<Row>, LockError> {
        let mut conn = self.conn(operation).await?;
        conn.exec(sql, params)
            .await
            .map_err(|e| self.error(operation, job, e))
    }

    /// Runs a change; returns (rows changed, last insert id).
    async fn change(
        &self,
        operation: &'static str,
        job: &str,
        sql: &str,
        params: Vec<Value>,
    ) -> Result<(u64, u64), LockError> {
        let mut conn = self.conn(operation).await?;
        conn.exec_drop(sql, params)
            .await
            .map_err(|e| self.error(operation, job, e))?;
        Ok((conn.affected_rows(), conn.last_insert_id().unwrap_or(0)))
    }
}

#[async_trait]
impl ClusterStore for MySqlOperations {
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
        self.beat(beat, true).await
    }

    async fn heartbeat_changes(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        self.beat(beat, false).await
    }

    async fn claim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let (n, _) = self
            .change(
                "claim",
                "",
                &self.sql.claim,
                vec![instance_id.into(), id.into()],
            )
            .await?;
        Ok(n == 1)
    }

    async fn unclaim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let (n, _) = self
            .change(
                "unclaim",
                "",
                &self.sql.unclaim,
                vec![instance_id.into(), id.into()],
            )
            .await?;
        Ok(n == 1)
    }

    async fn run_started(&self, run: &RunStart) -> Result<i64, LockError> {
        let params = vec![
            Value::from(&run.job),
            run.slot.map_or(Value::NULL, at),
            Value::from(run.fire_kind.as_str()),
            Value::from(&run.instance_id),
            Value::from(i64::try_from(run.fence).unwrap_or(-1)),
            Value::from(run.attempt),
            Value::from(stored_params(&run.params)),
        ];
        let (_, id) = self
            .change("history", &run.job, &self.sql.run_start, params)
            .await?;
        Ok(i64::try_from(id).unwrap_or(0))
    }

    async fn run_ended(&self, end: &RunEnd) -> Result<(), LockError> {
        let params = vec![
            Value::from(end.outcome.as_str()),
            Value::from(end.error.as_deref()),
            Value::from(end.cancel_requested),
            Value::from(end.logs.as_ref().map(RunLog::as_stored)),
            Value::from(end.id),
        ];
        self.change("history", "", &self.sql.run_end, params)
            .await
            .map(drop)
    }

    async fn runs_started(&self, runs: &[RunStart]) -> Result<Vec<i64>, LockError> {
        self.start_batch(&self.history, runs).await
    }

    async fn runs_ended(&self, ends: &[RunEnd]) -> Result<(), LockError> {
        self.end_batch(&self.history, ends).await
    }

    fn max_history_batch(&self) -> usize {
        history::MAX_HISTORY_BATCH
    }

    async fn instances(&self) -> Result<Vec<RegistryRow>, LockError> {
        let rows = self
            .rows("registry", "", &self.sql.instances, vec![])
            .await?;
        self.decode("registry", rows.iter().map(registry_row).collect())
    }

    async fn request_after(
        &self,
        child: &str,
        slot_at: DateTime<Utc>,
        parent: &str,
    ) -> Result<i64, LockError> {
        let params = vec![child.into(), parent.into(), slot(slot_at)];
        let (_, id) = self
            .change("after", child, &self.sql.request_after, params)
            .await?;
        Ok(i64::try_from(id).unwrap_or(0))
    }

    async fn after_requests(
        &self,
        child: &str,
        slot_at: DateTime<Utc>,
    ) -> Result<Vec<String>, LockError> {
        let rows = self
            .rows(
                "after",
                child,
                &self.sql.after_requests,
                vec![child.into(), slot(slot_at)],
            )
            .await?;
        self.decode("after", rows.iter().map(|row| get(row, 0)).collect())
    }

    async fn delete_after(&self, child: &str, through: DateTime<Utc>) -> Result<u64, LockError> {
        let (n, _) = self
            .change(
                "after",
                child,
                &self.sql.delete_after,
                vec![child.into(), slot(through)],
            )
            .await?;
        Ok(n)
    }

    async fn open_incidents(&self) -> Result<Vec<Incident>, LockError> {
        let rows = self
            .rows("incidents", "", &self.sql.open_incidents, vec![])
            .await?;
        self.decode("incidents", rows.iter().map(incident_row).collect())
    }

    async fn open_incident(&self, key: &str, summary: &str) -> Result<bool, LockError> {
        let summary = lock_cluster::truncate(summary, MAX_DETAIL_LEN);
        let (inserted, _) = self
            .change(
                "incidents",
                key,
                &self.sql.open_incident,
                vec![key.into(), summary.into()],
            )
            .await?;
        if inserted == 1 {
            return Ok(true);
        }
        // The row exists: open (nothing changes) or resolved (this call reopens it).
        let (n, _) = self
            .change(
                "incidents",
                key,
                &self.sql.reopen_incident,
                vec![summary.into(), key.into()],
            )
            .await?;
        Ok(n == 1)
    }

    async fn resolve_incident(&self, key: &str) -> Result<bool, LockError> {
        let (n, _) = self
            .change(
                "incidents",
                key,
                &self.sql.resolve_incident,
                vec![key.into()],
            )
            .await?;
        Ok(n == 1)
    }

    async fn delete_expired(
        &self,
        what: Expired,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, LockError> {
        let sql = self.sql.delete_expired(what);
        let (n, _) = self
            .change("housekeeping", "", sql, vec![at(before), limit.into()])
            .await?;
        Ok(n)
    }
}

#[async_trait]
impl OperatorStore for MySqlOperations {
    async fn pause(&self, job: &str, requested_by: &str) -> Result<bool, LockError> {
        let (n, _) = self
            .change(
                "pause",
                job,
                &self.sql.pause,
                vec![job.into(), requested_by.into()],
            )
            .await?;
        Ok(n > 0)
    }

    async fn resume(&self, job: &str) -> Result<bool, LockError> {
        let (n, _) = self
            .change("resume", job, &self.sql.resume, vec![job.into()])
            .await?;
        Ok(n > 0)
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
        let (_, id) = self
            .change(
                "trigger",
                job,
                &self.sql.request_trigger,
                vec![
                    job.into(),
                    requested_by.into(),
                    stored_params(params).into(),
                ],
            )
            .await?;
        Ok(i64::try_from(id).unwrap_or(0))
    }

    async fn withdraw_trigger(&self, id: i64) -> Result<bool, LockError> {
        let (n, _) = self
            .change("trigger", "", &self.sql.withdraw_trigger, vec![id.into()])
            .await?;
        Ok(n > 0)
    }

    async fn control(&self) -> Result<Vec<ControlRequest>, LockError> {
        let rows = self.rows("control", "", &self.sql.control, vec![]).await?;
        self.decode(
            "control",
            rows.iter().map(|row| control_row(&self.sql, row)).collect(),
        )
    }

    async fn registry(&self) -> Result<Vec<RegistryRow>, LockError> {
        let rows = self
            .rows("registry", "", &self.sql.registry, vec![])
            .await?;
        self.decode("registry", rows.iter().map(registry_row).collect())
    }

    async fn history(&self, job: &str, limit: u32) -> Result<Vec<RunRecord>, LockError> {
        let rows = self
            .rows(
                "history",
                job,
                &self.sql.history,
                vec![job.into(), limit.into()],
            )
            .await?;
        self.decode(
            "history",
            rows.iter().map(|row| run_row(&self.sql, row)).collect(),
        )
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
        let rows = self
            .rows(
                "history",
                job,
                &self.sql.history_page,
                vec![job.into(), before.into(), limit.into()],
            )
            .await?;
        self.decode(
            "history",
            rows.iter().map(|row| run_row(&self.sql, row)).collect(),
        )
    }

    async fn run_logs(
        &self,
        job: &str,
        ids: std::ops::RangeInclusive<i64>,
    ) -> Result<Vec<(i64, RunLog)>, LockError> {
        let rows = self
            .rows(
                "history",
                job,
                &self.sql.run_logs,
                vec![job.into(), (*ids.start()).into(), (*ids.end()).into()],
            )
            .await?;
        let logs = rows
            .iter()
            .filter_map(|row| {
                let read = || -> Result<Option<(i64, RunLog)>, String> {
                    let id = get(row, 0)?;
                    let log = self
                        .sql
                        .run_log(id, get(row, 1)?)
                        .map_err(|e| e.to_string())?;
                    Ok(log.map(|log| (id, log)))
                };
                read().transpose()
            })
            .collect();
        self.decode("history", logs)
    }

    async fn last_runs(&self) -> Result<Vec<RunRecord>, LockError> {
        let rows = self
            .rows("history", "", &self.sql.last_runs, vec![])
            .await?;
        self.decode(
            "history",
            rows.iter().map(|row| run_row(&self.sql, row)).collect(),
        )
    }

    async fn last_successes(&self) -> Result<Vec<(String, DateTime<Utc>)>, LockError> {
        let rows = self
            .rows("history", "", &self.sql.last_successes, vec![])
            .await?;
        self.decode(
            "history",
            rows.iter()
                .map(|row| Ok((get(row, 0)?, utc(get(row, 1)?))))
                .collect(),
        )
    }

    async fn record_action(&self, action: &ActionRecord) -> Result<(), LockError> {
        let (job, requested_by, detail) = action.truncated();
        let params = vec![
            job.into(),
            action.action.as_str().into(),
            requested_by.into(),
            detail.into(),
        ];
        self.change("action log", job, &self.sql.record_action, params)
            .await
            .map(drop)
    }

    async fn actions(&self, job: &str, limit: u32) -> Result<Vec<ActionRecord>, LockError> {
        let rows = self
            .rows(
                "action log",
                job,
                &self.sql.actions,
                vec![job.into(), limit.into()],
            )
            .await?;
        self.decode("action log", rows.iter().map(action_row).collect())
    }
}
