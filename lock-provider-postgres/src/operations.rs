//! The operations tables (job registry, run history, control) on PostgreSQL: the kit's
//! statements ([`lock_sql::operations_sql`]) bound and read with tokio-postgres.
//!
//! Every statement is sent unnamed with its parameter types (one round trip, nothing left on
//! the server connection, so it works behind PgBouncer in transaction mode too). The
//! heartbeat is one statement: the registry upsert as a data-modifying CTE whose query reads
//! the pauses and unclaimed trigger requests.

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Utc};
use deadpool_postgres::Pool;
use futures_util::TryStreamExt;
use lock_cluster::{
    ActionRecord, ClusterStore, ControlRequest, Expired, Heartbeat, Incident, InstanceInfo,
    JobRegistration, MAX_DETAIL_LEN, OperatorStore, RegistryRow, RunEnd, RunLog, RunRecord,
    RunStart, RunState,
};
use lock_core::{BoxError, FireSlot, LockError, Params};
use lock_sql::operations_sql::stored_params;
use lock_sql::sql::postgres::{ENSURE_SCHEMA_LOCK, HistoryBatchStatements};
use lock_sql::{OperationsSql, ResolvedTable, SqlDialect};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};

mod history;

/// The operations tables next to one lock table.
pub(crate) struct PgOperations {
    pool: Pool,
    sql: OperationsSql,
    /// The batched start and end of runs (`operations/history.rs`).
    history: HistoryBatchStatements,
    /// The heartbeat over arrays ([`OperationsSql::heartbeat_arrays`]): one text for every
    /// beat.
    heartbeat: String,
}

type Param<'a> = (&'a (dyn ToSql + Sync), Type);

/// `ensure_schema`'s step for the operations tables; a lock table whose name leaves no room
/// for theirs is logged and skipped (the locks work without them).
pub(crate) async fn ensure(
    operations: Option<&PgOperations>,
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

impl PgOperations {
    /// The tables next to `table`; None (logged at `ensure_schema`) when a derived name would
    /// be too long.
    pub(crate) fn new(pool: Pool, table: &ResolvedTable) -> Option<Self> {
        let sql = OperationsSql::new(SqlDialect::Postgres, table).ok()?;
        let history = HistoryBatchStatements::new(table);
        let heartbeat = sql.heartbeat_arrays();
        Some(PgOperations {
            pool,
            sql,
            history,
            heartbeat,
        })
    }

    /// Creates the tables and indexes if missing, in one transaction serialized by an
    /// advisory lock (concurrent `CREATE TABLE IF NOT EXISTS` of one name can fail in
    /// PostgreSQL).
    pub(crate) async fn ensure(&self) -> Result<(), LockError> {
        // Present already (the usual start-up): no DDL at all, so no lock is taken on the
        // history table (`CREATE INDEX IF NOT EXISTS` locks its table before looking). All
        // five tables: a deployment from before the action log or the incidents gets them here.
        let mut present = true;
        for probe in &self.sql.probe {
            if self.query("schema", "", probe, &[]).await.is_err() {
                present = false;
                break;
            }
        }
        if present {
            return Ok(());
        }
        let mut client = self.client("schema").await?;
        let run = async {
            let tx = client.transaction().await?;
            let key = self.sql.schema_lock_key();
            tx.query_typed(ENSURE_SCHEMA_LOCK, &[(&key, Type::TEXT)])
                .await?;
            for statement in &self.sql.create {
                tx.batch_execute(statement).await?;
            }
            tx.commit().await
        };
        run.await.map_err(|e| self.error("schema", "", e))
    }

    fn describe(&self) -> String {
        format!("postgres tables {}", self.sql.tables.listing())
    }

    async fn client(
        &self,
        operation: &'static str,
    ) -> Result<deadpool_postgres::Object, LockError> {
        self.pool
            .get()
            .await
            .map_err(|e| LockError::provider(operation, "", self.describe(), e))
    }

    fn error(&self, operation: &'static str, job: &str, e: tokio_postgres::Error) -> LockError {
        // A column missing is a table from before it: `ensure_schema()` adds it.
        if e.code() == Some(&SqlState::UNDEFINED_TABLE)
            || e.code() == Some(&SqlState::UNDEFINED_COLUMN)
        {
            return LockError::TableMissing {
                table: self.sql.tables.listing(),
                ddl: self.sql.create.join(";\n") + ";",
                source: Some(Box::new(e)),
            };
        }
        LockError::provider(operation, job, self.describe(), e)
    }

    async fn query(
        &self,
        operation: &'static str,
        job: &str,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<Vec<Row>, LockError> {
        let client = self.client(operation).await?;
        client
            .query_typed(sql, params)
            .await
            .map_err(|e| self.error(operation, job, e))
    }

    async fn execute(
        &self,
        operation: &'static str,
        job: &str,
        sql: &str,
        params: &[Param<'_>],
    ) -> Result<u64, LockError> {
        // Unnamed, in one round trip; the count arrives with CommandComplete, once the
        // (empty) row stream is drained.
        let client = self.client(operation).await?;
        let count = async {
            let rows = client
                .query_typed_raw(sql, params.iter().map(|(v, t)| (*v, t.clone())))
                .await?;
            let mut rows = std::pin::pin!(rows);
            while rows.try_next().await?.is_some() {}
            Ok(rows.rows_affected().unwrap_or(0))
        };
        count.await.map_err(|e| self.error(operation, job, e))
    }

    fn decode<T>(
        &self,
        operation: &'static str,
        parse: impl FnOnce() -> Result<T, BoxError>,
    ) -> Result<T, LockError> {
        parse().map_err(|e| LockError::provider(operation, "", self.describe(), e))
    }
}

fn utc(naive: NaiveDateTime) -> DateTime<Utc> {
    naive.and_utc()
}

/// One time per row, or the call is refused before anything is written.
fn check_times(operation: &str, rows: usize, times: usize) -> Result<(), LockError> {
    if rows == times {
        return Ok(());
    }
    Err(LockError::InvalidConfiguration(format!(
        "{operation}: {rows} rows but {times} times; give one time per row"
    )))
}

fn naive(at: DateTime<Utc>) -> NaiveDateTime {
    at.naive_utc()
}

/// A slot as the tables keep it: to the millisecond (`TIMESTAMP(3)` would round the rest).
fn slot(at: DateTime<Utc>) -> NaiveDateTime {
    naive(FireSlot::new(at).instant())
}

fn control_row(sql: &OperationsSql, row: &Row) -> Result<ControlRequest, BoxError> {
    let kind: String = row.try_get(2)?;
    let id = row.try_get(0)?;
    Ok(ControlRequest {
        id,
        job: row.try_get(1)?,
        // An unknown kind written by hand reads as a trigger request nobody runs.
        kind: kind.parse().unwrap_or(lock_cluster::ControlKind::Trigger),
        requested_at: utc(row.try_get(3)?),
        requested_by: row.try_get(4)?,
        claimed_by: row.try_get(5)?,
        claimed_at: row.try_get::<_, Option<NaiveDateTime>>(6)?.map(utc),
        slot: row.try_get::<_, Option<NaiveDateTime>>(7)?.map(utc),
        params: sql.control_params(id, row.try_get(8)?)?,
    })
}

fn run_row(sql: &OperationsSql, row: &Row) -> Result<RunRecord, BoxError> {
    let kind: String = row.try_get(3)?;
    let outcome: String = row.try_get(8)?;
    let id = row.try_get(0)?;
    Ok(RunRecord {
        id,
        job: row.try_get(1)?,
        slot: row.try_get::<_, Option<NaiveDateTime>>(2)?.map(utc),
        fire_kind: kind.parse().unwrap_or(lock_core::FireKind::Scheduled),
        instance_id: row.try_get(4)?,
        fence: lock_core::encoding::fence_from_sql(row.try_get(5)?),
        started_at: utc(row.try_get(6)?),
        ended_at: row.try_get::<_, Option<NaiveDateTime>>(7)?.map(utc),
        outcome: outcome.parse().unwrap_or(RunState::Running),
        error: row.try_get(9)?,
        attempt: u32::try_from(row.try_get::<_, i32>(10)?).unwrap_or(1),
        cancel_requested: row.try_get(11)?,
        params: sql.run_params(id, row.try_get(12)?)?,
    })
}

fn action_row(row: &Row) -> Result<ActionRecord, BoxError> {
    let action: String = row.try_get(3)?;
    Ok(ActionRecord::read(
        row.try_get(0)?,
        utc(row.try_get(1)?),
        row.try_get(2)?,
        // An unknown action written by hand reads as an unlock, the one without a job's state.
        action.parse().unwrap_or(lock_cluster::Action::Unlock),
        row.try_get(4)?,
        row.try_get(5)?,
    ))
}

fn incident_row(row: &Row) -> Result<Incident, BoxError> {
    Ok(Incident {
        key: row.try_get(0)?,
        summary: row.try_get(1)?,
        opened_at: utc(row.try_get(2)?),
    })
}

fn registry_row(row: &Row) -> Result<RegistryRow, BoxError> {
    let job: String = row.try_get(1)?;
    let pid: i64 = row.try_get(7)?;
    Ok(RegistryRow {
        instance: InstanceInfo {
            instance_id: row.try_get(0)?,
            host: row.try_get(6)?,
            pid: u32::try_from(pid).unwrap_or(0),
            version: row.try_get(8)?,
            started_at: utc(row.try_get(9)?),
            clock_offset_ms: row.try_get(11)?,
            heartbeat_ms: row.try_get(12)?,
        },
        heartbeat_at: utc(row.try_get(10)?),
        job: if job.is_empty() {
            None
        } else {
            Some(JobRegistration {
                name: job,
                lock_name: row.try_get(2)?,
                trigger: row.try_get(3)?,
                zone: row.try_get(4)?,
                next_fire: row.try_get::<_, Option<NaiveDateTime>>(5)?.map(utc),
                following_fire: row.try_get::<_, Option<NaiveDateTime>>(13)?.map(utc),
            })
        },
    })
}

/// A heartbeat's values as [`OperationsSql::heartbeat_arrays`] binds them: the instance's
/// fields once, each job field as one array (the instance's own row first, `job_name` `''`).
struct BeatColumns<'a> {
    instance: &'a InstanceInfo,
    pid: i64,
    started_at: NaiveDateTime,
    jobs: Vec<&'a str>,
    locks: Vec<&'a str>,
    triggers: Vec<&'a str>,
    zones: Vec<Option<&'a str>>,
    next_fires: Vec<Option<NaiveDateTime>>,
    following: Vec<Option<NaiveDateTime>>,
}

impl<'a> BeatColumns<'a> {
    fn of(beat: &'a Heartbeat) -> Self {
        let rows = beat.jobs.len() + 1;
        let mut columns = BeatColumns {
            instance: &beat.instance,
            pid: i64::from(beat.instance.pid),
            started_at: naive(beat.instance.started_at),
            jobs: Vec::with_capacity(rows),
            locks: Vec::with_capacity(rows),
            triggers: Vec::with_capacity(rows),
            zones: Vec::with_capacity(rows),
            next_fires: Vec::with_capacity(rows),
            following: Vec::with_capacity(rows),
        };
        columns.push("", "", "", None, None, None);
        for job in &beat.jobs {
            columns.push(
                &job.name,
                &job.lock_name,
                &job.trigger,
                job.zone.as_deref(),
                job.next_fire.map(naive),
                job.following_fire.map(naive),
            );
        }
        columns
    }

    fn push(
        &mut self,
        job: &'a str,
        lock: &'a str,
        trigger: &'a str,
        zone: Option<&'a str>,
        next_fire: Option<NaiveDateTime>,
        following: Option<NaiveDateTime>,
    ) {
        self.jobs.push(job);
        self.locks.push(lock);
        self.triggers.push(trigger);
        self.zones.push(zone);
        self.next_fires.push(next_fire);
        self.following.push(following);
    }

    fn params(&self) -> [Param<'_>; 13] {
        let i = self.instance;
        [
            (&i.instance_id, Type::TEXT),
            (&i.host, Type::TEXT),
            (&self.pid, Type::INT8),
            (&i.version, Type::TEXT),
            (&self.started_at, Type::TIMESTAMP),
            (&i.clock_offset_ms, Type::INT8),
            (&i.heartbeat_ms, Type::INT8),
            (&self.jobs, Type::TEXT_ARRAY),
            (&self.locks, Type::TEXT_ARRAY),
            (&self.triggers, Type::TEXT_ARRAY),
            (&self.zones, Type::TEXT_ARRAY),
            (&self.next_fires, Type::TIMESTAMP_ARRAY),
            (&self.following, Type::TIMESTAMP_ARRAY),
        ]
    }
}

#[async_trait]
impl ClusterStore for PgOperations {
    fn tables(&self) -> String {
        self.sql.tables.listing()
    }

    async fn check(&self) -> Result<(), LockError> {
        for probe in &self.sql.check {
            self.query("check", "", probe, &[]).await?;
        }
        Ok(())
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        let control = self.heartbeat_changes(beat).await?;
        let id = &beat.instance.instance_id;
        self.execute("heartbeat", "", &self.sql.prune_jobs(), &[(id, Type::TEXT)])
            .await?;
        Ok(control)
    }

    async fn heartbeat_changes(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        let columns = BeatColumns::of(beat);
        let rows = self
            .query("heartbeat", "", &self.heartbeat, &columns.params())
            .await?;
        self.decode("heartbeat", || {
            rows.iter().map(|row| control_row(&self.sql, row)).collect()
        })
    }

    /// The beat and the read in one transaction: `BEGIN`, the beat, the read and `COMMIT`
    /// pipelined on one connection, one round trip and one commit (two without it, for every
    /// instance every second). The read sees the beat's own row, as after a separate beat.
    async fn heartbeat_changes_and_instances(
        &self,
        beat: &Heartbeat,
    ) -> Result<(Vec<ControlRequest>, Vec<RegistryRow>), LockError> {
        let columns = BeatColumns::of(beat);
        let params = columns.params();
        let client = self.client("heartbeat").await?;
        // Each request is sent at its future's first poll, in this order; a failed beat
        // aborts the transaction, whose `COMMIT` then rolls it back, so the connection goes
        // back to the pool outside any transaction whatever failed.
        let (_, control, instances, _) = tokio::try_join!(
            client.query_typed("BEGIN", &[]),
            client.query_typed(&self.heartbeat, &params),
            client.query_typed(&self.sql.instances, &[]),
            client.query_typed("COMMIT", &[]),
        )
        .map_err(|e| self.error("heartbeat", "", e))?;
        let control = self.decode("heartbeat", || {
            control
                .iter()
                .map(|row| control_row(&self.sql, row))
                .collect()
        })?;
        let instances = self.decode("registry", || instances.iter().map(registry_row).collect())?;
        Ok((control, instances))
    }

    async fn claim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let n = self
            .execute(
                "claim",
                "",
                &self.sql.claim,
                &[(&instance_id, Type::TEXT), (&id, Type::INT8)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn unclaim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let n = self
            .execute(
                "unclaim",
                "",
                &self.sql.unclaim,
                &[(&instance_id, Type::TEXT), (&id, Type::INT8)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn run_started(&self, run: &RunStart) -> Result<i64, LockError> {
        let slot = run.slot.map(naive);
        let fence = i64::try_from(run.fence).unwrap_or(-1);
        let kind = run.fire_kind.as_str();
        let attempt = i32::try_from(run.attempt).unwrap_or(i32::MAX);
        let params = stored_params(&run.params);
        let rows = self
            .query(
                "history",
                &run.job,
                &self.sql.run_start,
                &[
                    (&run.job, Type::TEXT),
                    (&slot, Type::TIMESTAMP),
                    (&kind, Type::TEXT),
                    (&run.instance_id, Type::TEXT),
                    (&fence, Type::INT8),
                    (&attempt, Type::INT4),
                    (&params, Type::TEXT),
                ],
            )
            .await?;
        self.decode("history", || {
            rows.first().map_or(Ok(0), |row| Ok(row.try_get(0)?))
        })
    }

    async fn run_ended(&self, end: &RunEnd) -> Result<(), LockError> {
        let outcome = end.outcome.as_str();
        self.execute(
            "history",
            "",
            &self.sql.run_end,
            &[
                (&outcome, Type::TEXT),
                (&end.error, Type::TEXT),
                (&end.cancel_requested, Type::BOOL),
                (&end.logs.as_ref().map(RunLog::as_stored), Type::TEXT),
                (&end.id, Type::INT8),
            ],
        )
        .await
        .map(drop)
    }

    async fn runs_started(&self, runs: &[RunStart]) -> Result<Vec<i64>, LockError> {
        self.start_batch(&self.history, runs, None).await
    }

    async fn runs_ended(&self, ends: &[RunEnd]) -> Result<(), LockError> {
        self.end_batch(&self.history, ends, None).await
    }

    async fn runs_started_at(
        &self,
        runs: &[RunStart],
        at: &[DateTime<Utc>],
    ) -> Result<Vec<i64>, LockError> {
        check_times("runs_started_at", runs.len(), at.len())?;
        self.start_batch(&self.history, runs, Some(at)).await
    }

    async fn runs_ended_at(&self, ends: &[RunEnd], at: &[DateTime<Utc>]) -> Result<(), LockError> {
        check_times("runs_ended_at", ends.len(), at.len())?;
        self.end_batch(&self.history, ends, Some(at)).await
    }

    fn takes_run_times(&self) -> bool {
        true
    }

    fn max_history_batch(&self) -> usize {
        history::MAX_HISTORY_BATCH
    }

    async fn instances(&self) -> Result<Vec<RegistryRow>, LockError> {
        let rows = self.query("registry", "", &self.sql.instances, &[]).await?;
        self.decode("registry", || rows.iter().map(registry_row).collect())
    }

    async fn request_after(
        &self,
        child: &str,
        slot_at: DateTime<Utc>,
        parent: &str,
    ) -> Result<i64, LockError> {
        let slot_at = slot(slot_at);
        let rows = self
            .query(
                "after",
                child,
                &self.sql.request_after,
                &[
                    (&child, Type::TEXT),
                    (&parent, Type::TEXT),
                    (&slot_at, Type::TIMESTAMP),
                ],
            )
            .await?;
        self.decode("after", || {
            rows.first().map_or(Ok(0), |row| Ok(row.try_get(0)?))
        })
    }

    async fn after_requests(
        &self,
        child: &str,
        slot_at: DateTime<Utc>,
    ) -> Result<Vec<String>, LockError> {
        let slot_at = slot(slot_at);
        let rows = self
            .query(
                "after",
                child,
                &self.sql.after_requests,
                &[(&child, Type::TEXT), (&slot_at, Type::TIMESTAMP)],
            )
            .await?;
        self.decode("after", || {
            rows.iter().map(|row| Ok(row.try_get(0)?)).collect()
        })
    }

    async fn delete_after(&self, child: &str, through: DateTime<Utc>) -> Result<u64, LockError> {
        let through = slot(through);
        self.execute(
            "after",
            child,
            &self.sql.delete_after,
            &[(&child, Type::TEXT), (&through, Type::TIMESTAMP)],
        )
        .await
    }

    async fn open_incidents(&self) -> Result<Vec<Incident>, LockError> {
        let rows = self
            .query("incidents", "", &self.sql.open_incidents, &[])
            .await?;
        self.decode("incidents", || rows.iter().map(incident_row).collect())
    }

    async fn open_incident(&self, key: &str, summary: &str) -> Result<bool, LockError> {
        let summary = lock_cluster::truncate(summary, MAX_DETAIL_LEN);
        let inserted = self
            .execute(
                "incidents",
                key,
                &self.sql.open_incident,
                &[(&key, Type::TEXT), (&summary, Type::TEXT)],
            )
            .await?;
        if inserted == 1 {
            return Ok(true);
        }
        // The row exists: open (nothing changes) or resolved (this call reopens it).
        let n = self
            .execute(
                "incidents",
                key,
                &self.sql.reopen_incident,
                &[(&summary, Type::TEXT), (&key, Type::TEXT)],
            )
            .await?;
        Ok(n == 1)
    }

    async fn resolve_incident(&self, key: &str) -> Result<bool, LockError> {
        let n = self
            .execute(
                "incidents",
                key,
                &self.sql.resolve_incident,
                &[(&key, Type::TEXT)],
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
        let before = naive(before);
        let limit = i64::from(limit);
        self.execute(
            "housekeeping",
            "",
            sql,
            &[(&before, Type::TIMESTAMP), (&limit, Type::INT8)],
        )
        .await
    }
}

#[async_trait]
impl OperatorStore for PgOperations {
    async fn pause(&self, job: &str, requested_by: &str) -> Result<bool, LockError> {
        let n = self
            .execute(
                "pause",
                job,
                &self.sql.pause,
                &[(&job, Type::TEXT), (&requested_by, Type::TEXT)],
            )
            .await?;
        Ok(n > 0)
    }

    async fn resume(&self, job: &str) -> Result<bool, LockError> {
        let n = self
            .execute("resume", job, &self.sql.resume, &[(&job, Type::TEXT)])
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
        let params = stored_params(params);
        let rows = self
            .query(
                "trigger",
                job,
                &self.sql.request_trigger,
                &[
                    (&job, Type::TEXT),
                    (&requested_by, Type::TEXT),
                    (&params, Type::TEXT),
                ],
            )
            .await?;
        self.decode("trigger", || {
            rows.first().map_or(Ok(0), |row| Ok(row.try_get(0)?))
        })
    }

    async fn withdraw_trigger(&self, id: i64) -> Result<bool, LockError> {
        let n = self
            .execute(
                "trigger",
                "",
                &self.sql.withdraw_trigger,
                &[(&id, Type::INT8)],
            )
            .await?;
        Ok(n > 0)
    }

    async fn control(&self) -> Result<Vec<ControlRequest>, LockError> {
        let rows = self.query("control", "", &self.sql.control, &[]).await?;
        self.decode("control", || {
            rows.iter().map(|row| control_row(&self.sql, row)).collect()
        })
    }

    async fn registry(&self) -> Result<Vec<RegistryRow>, LockError> {
        let rows = self.query("registry", "", &self.sql.registry, &[]).await?;
        self.decode("registry", || rows.iter().map(registry_row).collect())
    }

    async fn history(&self, job: &str, limit: u32) -> Result<Vec<RunRecord>, LockError> {
        let limit = i64::from(limit);
        let rows = self
            .query(
                "history",
                job,
                &self.sql.history,
                &[(&job, Type::TEXT), (&limit, Type::INT8)],
            )
            .await?;
        self.decode("history", || {
            rows.iter().map(|row| run_row(&self.sql, row)).collect()
        })
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
        let limit = i64::from(limit);
        let rows = self
            .query(
                "history",
                job,
                &self.sql.history_page,
                &[
                    (&job, Type::TEXT),
                    (&before, Type::INT8),
                    (&limit, Type::INT8),
                ],
            )
            .await?;
        self.decode("history", || {
            rows.iter().map(|row| run_row(&self.sql, row)).collect()
        })
    }

    async fn run_logs(
        &self,
        job: &str,
        ids: std::ops::RangeInclusive<i64>,
    ) -> Result<Vec<(i64, RunLog)>, LockError> {
        let rows = self
            .query(
                "history",
                job,
                &self.sql.run_logs,
                &[
                    (&job, Type::TEXT),
                    (ids.start(), Type::INT8),
                    (ids.end(), Type::INT8),
                ],
            )
            .await?;
        self.decode("history", || {
            let mut logs = Vec::with_capacity(rows.len());
            for row in &rows {
                let id = row.try_get(0)?;
                if let Some(log) = self.sql.run_log(id, row.try_get(1)?)? {
                    logs.push((id, log));
                }
            }
            Ok(logs)
        })
    }

    async fn last_runs(&self) -> Result<Vec<RunRecord>, LockError> {
        let rows = self.query("history", "", &self.sql.last_runs, &[]).await?;
        self.decode("history", || {
            rows.iter().map(|row| run_row(&self.sql, row)).collect()
        })
    }

    async fn last_successes(&self) -> Result<Vec<(String, DateTime<Utc>)>, LockError> {
        let rows = self
            .query("history", "", &self.sql.last_successes, &[])
            .await?;
        self.decode("history", || {
            rows.iter()
                .map(|row| Ok((row.try_get(0)?, utc(row.try_get(1)?))))
                .collect()
        })
    }

    async fn record_action(&self, action: &ActionRecord) -> Result<(), LockError> {
        let (job, requested_by, detail) = action.truncated();
        let kind = action.action.as_str();
        self.execute(
            "action log",
            job,
            &self.sql.record_action,
            &[
                (&job, Type::TEXT),
                (&kind, Type::TEXT),
                (&requested_by, Type::TEXT),
                (&detail, Type::TEXT),
            ],
        )
        .await
        .map(drop)
    }

    async fn actions(&self, job: &str, limit: u32) -> Result<Vec<ActionRecord>, LockError> {
        let limit = i64::from(limit);
        let rows = self
            .query(
                "action log",
                job,
                &self.sql.actions,
                &[(&job, Type::TEXT), (&limit, Type::INT8)],
            )
            .await?;
        self.decode("action log", || rows.iter().map(action_row).collect())
    }
}
