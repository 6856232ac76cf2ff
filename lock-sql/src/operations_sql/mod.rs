//! The SQL of the operations tables (registry, run history, control, action log), written once
//! for every SQL dialect, so that a provider crate only binds parameters and reads rows.
//!
//! The tables live next to the lock table, in its schema, and take their names from it:
//! `shedlock_instances` (the registry: one row per instance, `job_name = ''`, and one per job
//! it runs), `shedlock_runs` (one row per run), `shedlock_control` (pause rows, manual
//! trigger requests and the `after` requests of dependent jobs), `shedlock_actions` (the
//! action log: who paused, resumed, triggered or unlocked what, and when) and
//! `shedlock_incidents` (the alert rules' incidents: one row per incident key, open or
//! resolved). Their columns are
//! fixed; every time is the database's clock, stored like the lock table stores its own
//! (`TIMESTAMP(3)` UTC in PostgreSQL, `DATETIME(3)` UTC in MySQL and MariaDB, fixed-width
//! text in SQLite).
//!
//! Every statement's parameters are listed on its field, in order; a provider binds them with
//! its driver's types (times as UTC `NaiveDateTime`, or SQLite's text).
//!
//! ```
//! use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
//!
//! let table = LockTableConfig::default().with_table("ops.shedlock").resolve(IdentifierStyle::POSTGRES)?;
//! let sql = OperationsSql::new(SqlDialect::Postgres, &table)?;
//! assert_eq!(sql.tables.runs, "ops.shedlock_runs");
//! assert!(sql.run_end.starts_with(r#"UPDATE "ops"."shedlock_runs" SET"#));
//! # Ok::<(), lock_core::LockError>(())
//! ```

mod create;
mod dialect;
mod heartbeat;
mod params;
mod prune;
mod statements;

use lock_cluster::Expired;

pub use dialect::SqlDialect;
pub use heartbeat::{HEARTBEAT_PARAMS, HEARTBEAT_ROWS_PER_STATEMENT, HeartbeatUpsert};
pub use params::{StoredParamsError, stored_params};

/// The limits of the operations tables' columns, which every store (SQL or not) keeps.
pub use lock_cluster::{MAX_DETAIL_LEN, MAX_ERROR_LEN, MAX_TEXT_LEN};

/// The operations tables' names, for messages (`schema.table` or `table`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperationsTables {
    /// The registry: instances and the jobs they run, with heartbeats.
    pub instances: String,
    /// The run history.
    pub runs: String,
    /// Pauses, manual trigger requests and dependent jobs' `after` requests.
    pub control: String,
    /// The action log: pauses, resumes, triggers and unlocks, with who asked.
    pub actions: String,
    /// The alert rules' incidents, one row per incident key.
    pub incidents: String,
}

impl OperationsTables {
    /// The five names, comma-separated.
    ///
    /// ```
    /// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
    /// let table = LockTableConfig::default().resolve(IdentifierStyle::ANSI)?;
    /// let sql = OperationsSql::new(SqlDialect::Sqlite, &table)?;
    /// assert_eq!(
    ///     sql.tables.listing(),
    ///     "shedlock_instances, shedlock_runs, shedlock_control, shedlock_actions, \
    ///      shedlock_incidents"
    /// );
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn listing(&self) -> String {
        format!(
            "{}, {}, {}, {}, {}",
            self.instances, self.runs, self.control, self.actions, self.incidents
        )
    }
}

/// One operations table's name: quoted for statements, as shown in messages, and bare.
struct TableName {
    quoted: String,
    display: String,
    bare: String,
}

/// The tables' names, derived from the lock table's.
struct TableNames {
    instances: TableName,
    runs: TableName,
    control: TableName,
    actions: TableName,
    incidents: TableName,
}

/// The columns every registry read returns, in this order: instance_id, job_name, lock_name,
/// trigger_text, zone_name, next_fire, host_name, pid, app_version, started_at, heartbeat_at,
/// clock_offset_ms.
pub const REGISTRY_COLUMNS: &str = "instance_id, job_name, lock_name, trigger_text, zone_name, \
     next_fire, host_name, pid, app_version, started_at, heartbeat_at, clock_offset_ms, heartbeat_ms, \
     following_fire";

/// The columns every run read returns, in this order: id, job_name, slot_at, fire_kind,
/// instance_id, fence, started_at, ended_at, outcome, error_text, attempt (an integer from 1),
/// cancel_requested (a boolean; 0 or 1 in SQLite), params (text or NULL: read with
/// [`OperationsSql::run_params`]).
pub const RUN_COLUMNS: &str = "id, job_name, slot_at, fire_kind, instance_id, fence, started_at, ended_at, outcome, error_text, attempt, cancel_requested, params";

/// What the tables gained after they first shipped, for a dialect without
/// `ADD COLUMN IF NOT EXISTS` (SQLite): a column of the history or control table, or the index
/// on such columns. `missing` reads one boolean (true when it is missing), `ddl` adds it (a
/// column with a default, or NULL, for the rows there).
///
/// ```
/// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
/// let table = LockTableConfig::default().resolve(IdentifierStyle::ANSI)?;
/// let sql = OperationsSql::new(SqlDialect::Sqlite, &table)?;
/// assert_eq!(
///     sql.added_later[0].ddl,
///     r#"ALTER TABLE "shedlock_runs" ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1"#
/// );
/// assert!(sql.added_later.last().unwrap().ddl.starts_with("CREATE INDEX"));
/// # Ok::<(), lock_core::LockError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct AddedLater {
    /// One row, one boolean: true when the column (or index) is missing.
    pub missing: String,
    /// Adds it.
    pub ddl: String,
}

/// The columns every control read returns, in this order: id, job_name, request_kind,
/// requested_at, requested_by, claimed_by, claimed_at, slot_at (an `after` request's slot, NULL
/// otherwise), params (text or NULL: read with [`OperationsSql::control_params`]).
pub const CONTROL_COLUMNS: &str = "id, job_name, request_kind, requested_at, requested_by, claimed_by, claimed_at, slot_at, params";

/// The columns every action log read returns, in this order: id, acted_at, job_name, action,
/// requested_by, detail.
pub const ACTION_COLUMNS: &str = "id, acted_at, job_name, action, requested_by, detail";

/// The columns every incident read returns, in this order: incident_key, summary, opened_at.
pub const INCIDENT_COLUMNS: &str = "incident_key, summary, opened_at";

/// Every statement on the operations tables, for one lock table and dialect.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OperationsSql {
    /// The dialect the statements are written in.
    pub dialect: SqlDialect,
    /// The tables' names, for messages.
    pub tables: OperationsTables,
    /// The bare (unqualified, folded) table names, for catalog lookups: instances, runs,
    /// control, actions, incidents.
    pub bare: [String; 5],
    /// The DDL, one statement per element, each a no-op when its object exists.
    pub create: Vec<String>,
    /// MySQL: the statement that releases the named lock the DDL runs under (the last of
    /// [`create`](Self::create)); a provider runs it when a statement before it failed.
    pub create_release: Option<String>,
    /// SQLite: the columns added to the history (`attempt`, `cancel_requested`, `params`,
    /// `logs`) and
    /// control (`slot_at`, `params`) tables since they first shipped, then the index on the
    /// latter, each to add after [`create`](Self::create) where `missing` says so, in the same
    /// transaction. Empty in PostgreSQL and MySQL, whose `create` adds them itself
    /// (`ADD COLUMN IF NOT EXISTS`, a catalog check).
    pub added_later: Vec<AddedLater>,
    /// Reads nothing but fails when a table is missing: `SELECT` of no row from each of the
    /// five tables, and of the history's and control table's added columns (what
    /// `ensure_schema()` looks for before it runs any DDL); in PostgreSQL also when an index
    /// added since the tables first shipped is missing (the last-success index, the
    /// one-pause-row index, the `after` rows' index), so that an existing schema gets them.
    pub probe: Vec<String>,
    /// The same for the three tables the scheduler needs (registry, history, control) and
    /// their added columns: what [`ClusterStore::check`](lock_cluster::ClusterStore::check)
    /// reads, so that tables from before a column fail the check with the DDL, not the first
    /// run. The action log and the incidents are not among them: only the tools that act
    /// write the former and only alert rules the latter, and a deployment whose
    /// `ensure_schema()` has not created them yet keeps its registry, history and pauses.
    pub check: Vec<String>,
    /// Pauses, pending trigger requests and `after` requests (never claimed, so always
    /// pending) ([`CONTROL_COLUMNS`]); no parameters.
    pub poll: String,
    /// `1` instance id, `2` request id: claims an unclaimed trigger request (1 row changed
    /// when this instance won it).
    pub claim: String,
    /// `1` instance id, `2` request id: hands a trigger request claimed by that instance
    /// back, unclaimed (1 row changed when it was).
    pub unclaim: String,
    /// `1` job, `2` slot or NULL, `3` fire kind, `4` instance id, `5` fence, `6` attempt (an
    /// integer from 1), `7` params (`Params::encode`, NULL for none): the start row
    /// (`RETURNING id` in PostgreSQL and SQLite; MySQL reads the insert id).
    pub run_start: String,
    /// `1` outcome, `2` error or NULL, `3` cancel requested (a boolean), `4` the run's log
    /// lines (`RunLog::as_stored`, NULL for none), `5` run id: the end of a run.
    pub run_end: String,
    /// `1` job, `2` lowest run id, `3` highest run id: `id` and `logs` (read with
    /// [`OperationsSql::run_log`]) of the job's runs in that range that kept lines, newest
    /// first; on the `(job_name, id)` index.
    pub run_logs: String,
    /// `1` job, `2` requested by: inserts a pause unless the job is paused already; of
    /// concurrent pauses of one job exactly one inserts (a unique index).
    pub pause: String,
    /// `1` job: deletes the job's pause rows.
    pub resume: String,
    /// `1` job, `2` requested by, `3` params (`Params::encode`, NULL for none): a trigger
    /// request (`RETURNING id` in PostgreSQL and SQLite).
    pub request_trigger: String,
    /// `1` child job, `2` parent (`name` or `name#shard`), `3` slot: an `after` request
    /// (`RETURNING id` in PostgreSQL and SQLite), requested at the database's now.
    pub request_after: String,
    /// `1` child job, `2` slot: the parents (`requested_by`) of the child's `after` rows for
    /// exactly that slot, oldest first; on the `(job_name, request_kind, slot_at)` index.
    pub after_requests: String,
    /// `1` child job, `2` through: deletes the child's `after` rows for slots up to and
    /// including `through`.
    pub delete_after: String,
    /// `1` request id: deletes the request if no instance claimed it yet.
    pub withdraw_trigger: String,
    /// Every control row ([`CONTROL_COLUMNS`]), oldest first; no parameters.
    pub control: String,
    /// Every registry row ([`REGISTRY_COLUMNS`]); no parameters.
    pub registry: String,
    /// The instances' own rows only (`job_name = ''`, [`REGISTRY_COLUMNS`]), for the ranks of
    /// sharded and broadcast jobs at each heartbeat; no parameters.
    pub instances: String,
    /// `1` job, `2` limit: the job's newest runs first ([`RUN_COLUMNS`]).
    pub history: String,
    /// `1` job, `2` run id, `3` limit: the job's runs older than that run, newest first
    /// ([`RUN_COLUMNS`]); keyset paging on the `(job_name, id)` index.
    pub history_page: String,
    /// The newest run of every job in the history ([`RUN_COLUMNS`]); no parameters. One index
    /// seek per job name, whatever the history's length.
    pub last_runs: String,
    /// `job_name` and the latest `ended_at` of a successful run, per job; no parameters. One
    /// index seek per job name, whatever the history's length.
    pub last_successes: String,
    /// `1` before, `2` limit: deletes at most `limit` runs started before `before`.
    pub delete_runs: String,
    /// `1` before, `2` limit: deletes at most `limit` rows of trigger requests claimed before
    /// `before` and of `after` requests requested before it (one batch for both).
    pub delete_claimed: String,
    /// `1` before, `2` limit: deletes at most `limit` registry rows not refreshed since `before`.
    pub delete_stale_registry: String,
    /// `1` job, `2` action, `3` requested by, `4` detail or NULL: one action log row (its
    /// time: the database's now).
    pub record_action: String,
    /// `1` job, `2` limit: the job's newest action log rows first ([`ACTION_COLUMNS`]), on the
    /// `(job_name, id)` index.
    pub actions: String,
    /// `1` before, `2` limit: deletes at most `limit` action log rows written before `before`.
    pub delete_actions: String,
    /// Every open incident ([`INCIDENT_COLUMNS`]), oldest first; no parameters.
    pub open_incidents: String,
    /// `1` key, `2` summary (cut to [`MAX_DETAIL_LEN`] bytes by the caller): inserts the
    /// incident, open since the database's now, unless a row of that key exists (1 row
    /// changed when it was inserted). Where it exists, [`reopen_incident`](Self::reopen_incident).
    pub open_incident: String,
    /// `1` summary, `2` key: reopens the incident if it is resolved (1 row changed when it
    /// was reopened: this caller opened it).
    pub reopen_incident: String,
    /// `1` key: resolves the incident if it is open (1 row changed when this caller resolved
    /// it).
    pub resolve_incident: String,
    /// `1` before, `2` limit: deletes at most `limit` incidents resolved before `before`.
    pub delete_incidents: String,
    /// The registry's quoted name, for the heartbeat's upsert.
    instances_qualified: String,
}

impl OperationsSql {
    /// The batched delete of [`ClusterStore::delete_expired`](lock_cluster::ClusterStore::delete_expired)
    /// for `what`: `1` before, `2` limit.
    pub fn delete_expired(&self, what: Expired) -> &str {
        match what {
            Expired::Runs => &self.delete_runs,
            Expired::ClaimedTriggers => &self.delete_claimed,
            Expired::StaleRegistry => &self.delete_stale_registry,
            Expired::Actions => &self.delete_actions,
            Expired::Incidents => &self.delete_incidents,
        }
    }

    /// PostgreSQL: the key under which `ensure_schema()` creates these tables, as `$1` of
    /// [`sql::postgres::ENSURE_SCHEMA_LOCK`](crate::sql::postgres::ENSURE_SCHEMA_LOCK) in
    /// the creating transaction (a concurrent `CREATE TABLE IF NOT EXISTS` of one name can fail
    /// there). The same for every driver, so that instances of the tokio-postgres and the sqlx
    /// providers starting at once are serialized too.
    ///
    /// ```
    /// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
    /// let table = LockTableConfig::default().resolve(IdentifierStyle::POSTGRES)?;
    /// let sql = OperationsSql::new(SqlDialect::Postgres, &table)?;
    /// assert_eq!(sql.schema_lock_key(), "lock-provider-postgres operations shedlock_runs");
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn schema_lock_key(&self) -> String {
        format!("lock-provider-postgres operations {}", self.tables.runs)
    }
}

#[cfg(test)]
mod tests;
