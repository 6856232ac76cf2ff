//! The DDL of the operations tables: each statement a no-op when its object exists, so that
//! `ensure_schema()` creates what an older version did not (the action log came after the
//! other three, the incidents after it) and leaves the rest alone.

use super::{MAX_DETAIL_LEN, MAX_ERROR_LEN, MAX_TEXT_LEN, SqlDialect, TableName, TableNames};
use crate::ResolvedTable;

/// `CREATE TABLE IF NOT EXISTS` for the five tables, then their indexes (inline in MySQL,
/// which has no `CREATE INDEX IF NOT EXISTS`).
pub(super) fn statements(d: SqlDialect, lock_table: &ResolvedTable, t: &TableNames) -> Vec<String> {
    let style = d.style();
    let ts = d.timestamp();
    let text = |n: usize| match d {
        SqlDialect::Sqlite => "TEXT".to_owned(),
        _ => format!("VARCHAR({n})"),
    };
    let big = match d {
        SqlDialect::Sqlite => "INTEGER",
        _ => "BIGINT",
    };
    let t255 = text(MAX_TEXT_LEN);
    let t64 = text(64);
    let t16 = text(16);
    let terr = text(MAX_ERROR_LEN);
    let tdetail = text(MAX_DETAIL_LEN);
    let index = |name: &str, table: &TableName, columns: &str| {
        index_ddl(d, lock_table, name, table, columns)
    };
    let mysql_index = |name: &str, columns: &str| match d {
        SqlDialect::MySql => format!(
            ",\n  INDEX {} ({columns})",
            style.quote(&format!("{}_{name}", lock_table.name))
        ),
        _ => String::new(),
    };
    let mut create = vec![
        format!(
            "CREATE TABLE IF NOT EXISTS {instances} (\n  \
             instance_id {t255} NOT NULL,\n  \
             job_name {t255} NOT NULL,\n  \
             lock_name {t64} NOT NULL,\n  \
             trigger_text {t255} NOT NULL,\n  \
             zone_name {t64} NULL,\n  \
             next_fire {ts} NULL,\n  \
             host_name {t255} NOT NULL,\n  \
             pid {big} NOT NULL,\n  \
             app_version {t64} NOT NULL,\n  \
             started_at {ts} NOT NULL,\n  \
             heartbeat_at {ts} NOT NULL,\n  \
             clock_offset_ms {big} NOT NULL,\n  \
             heartbeat_ms {big} NOT NULL,\n  \
             following_fire {ts} NULL,\n  \
             PRIMARY KEY (instance_id, job_name)\n){storage}",
            instances = t.instances.quoted,
            // A job row is rewritten at each heartbeat that moved its next fire: room on its
            // page keeps the update HOT (see `kit::sql::postgres::create_table`).
            storage = match d {
                SqlDialect::Postgres =>
                    format!(" WITH (fillfactor = {})", crate::sql::postgres::FILLFACTOR),
                _ => String::new(),
            },
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {runs} (\n  \
             {id},\n  \
             job_name {t255} NOT NULL,\n  \
             slot_at {ts} NULL,\n  \
             fire_kind {t16} NOT NULL,\n  \
             instance_id {t255} NOT NULL,\n  \
             fence {big} NOT NULL,\n  \
             started_at {ts} NOT NULL,\n  \
             ended_at {ts} NULL,\n  \
             outcome {t16} NOT NULL,\n  \
             error_text {terr} NULL,\n  \
             {attempt},\n  \
             {cancel_requested},\n  \
             {params},\n  \
             {logs}{job_index}{started_index}\n)",
            runs = t.runs.quoted,
            attempt = LaterColumn::Attempt.definition(d),
            cancel_requested = LaterColumn::CancelRequested.definition(d),
            params = LaterColumn::RunParams.definition(d),
            logs = LaterColumn::RunLogs.definition(d),
            id = d.id_column(),
            job_index = mysql_index("runs_job", "job_name, id"),
            started_index = mysql_index("runs_started", "started_at"),
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {control} (\n  \
             {id},\n  \
             job_name {t255} NOT NULL,\n  \
             request_kind {t16} NOT NULL,\n  \
             requested_at {ts} NOT NULL,\n  \
             requested_by {t255} NOT NULL,\n  \
             claimed_by {t255} NULL,\n  \
             claimed_at {ts} NULL,\n  \
             {slot_at},\n  \
             {params}\n)",
            control = t.control.quoted,
            id = d.id_column(),
            slot_at = LaterColumn::SlotAt.definition(d),
            params = LaterColumn::ControlParams.definition(d),
        ),
        format!(
            "CREATE TABLE IF NOT EXISTS {actions} (\n  \
             {id},\n  \
             acted_at {ts} NOT NULL,\n  \
             job_name {t255} NOT NULL,\n  \
             action {t16} NOT NULL,\n  \
             requested_by {t255} NOT NULL,\n  \
             detail {tdetail} NULL{job_index}\n)",
            actions = t.actions.quoted,
            id = d.id_column(),
            job_index = mysql_index("actions_job", "job_name, id"),
        ),
        // One row per incident key. The key compares bytes in MySQL too, as names do
        // everywhere (`missed_slot/Report` and `missed_slot/report` are two incidents).
        format!(
            "CREATE TABLE IF NOT EXISTS {incidents} (\n  \
             incident_key {t255}{binary} NOT NULL PRIMARY KEY,\n  \
             summary {tdetail} NOT NULL,\n  \
             opened_at {ts} NOT NULL,\n  \
             resolved_at {ts} NULL\n)",
            incidents = t.incidents.quoted,
            binary = match d {
                SqlDialect::MySql => " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
                _ => "",
            },
        ),
    ];
    if d != SqlDialect::MySql {
        create.push(index("runs_job", &t.runs, "job_name, id"));
        create.push(index("runs_started", &t.runs, "started_at"));
        create.push(index("actions_job", &t.actions, "job_name, id"));
    }
    // Added after the tables first shipped: created on existing tables too, each a no-op when
    // present. A table from before may hold two pause rows of one job (the race this index
    // closes): the newer ones go first, so that the unique index can be built.
    create.push(dedupe_pauses(t));
    match d {
        SqlDialect::MySql => {
            let schema = match &lock_table.schema {
                Some(schema) => format!("'{schema}'"),
                None => "DATABASE()".to_owned(),
            };
            // Compared without case: with `lower_case_table_names` the catalog holds the
            // names folded, and index and column names never have case in MySQL.
            let missing = |catalog: &str, table: &TableName, condition: &str| {
                format!(
                    "SELECT COUNT(*) = 0 FROM information_schema.{catalog} \
                     WHERE table_schema = {schema} AND LOWER(table_name) = LOWER('{}') AND {condition}",
                    table.bare
                )
            };
            let runs_ok = style.quote(&format!("{}_{RUNS_OK}", lock_table.name));
            create.extend(mysql_if(
                &missing(
                    "statistics",
                    &t.runs,
                    &format!("LOWER(index_name) = LOWER('{}_{RUNS_OK}')", lock_table.name),
                ),
                &format!(
                    "CREATE INDEX {runs_ok} ON {} ({RUNS_OK_COLUMNS})",
                    t.runs.quoted
                ),
            ));
            for column in LaterColumn::ADDED {
                let table = column.table(t);
                create.extend(mysql_if(
                    &missing(
                        "columns",
                        table,
                        &format!("LOWER(column_name) = '{}'", column.name()),
                    ),
                    &format!(
                        "ALTER TABLE {} ADD COLUMN {}",
                        table.quoted,
                        column.definition(d)
                    ),
                ));
            }
            let after = style.quote(&format!("{}_{CONTROL_AFTER}", lock_table.name));
            create.extend(mysql_if(
                &missing(
                    "statistics",
                    &t.control,
                    &format!(
                        "LOWER(index_name) = LOWER('{}_{CONTROL_AFTER}')",
                        lock_table.name
                    ),
                ),
                &format!(
                    "CREATE INDEX {after} ON {} ({CONTROL_AFTER_COLUMNS})",
                    t.control.quoted
                ),
            ));
            let paused = style.quote(&format!("{}_{PAUSED}", lock_table.name));
            create.extend(mysql_if(
                &missing("columns", &t.control, "LOWER(column_name) = 'pause_job'"),
                &format!(
                    "ALTER TABLE {} ADD COLUMN {MYSQL_PAUSE_JOB}, ADD UNIQUE INDEX {paused} (pause_job)",
                    t.control.quoted
                ),
            ));
            // Instances starting at once would each find the index missing and the second's
            // `ALTER` fail (duplicate column or key): the DDL runs under a named lock of the
            // tables, as PostgreSQL's under an advisory lock.
            let [lock, release] = mysql_ddl_lock(&schema, &t.control.bare);
            create.insert(0, lock);
            create.push(release);
        }
        // SQLite has no `ADD COLUMN IF NOT EXISTS`: its providers add the columns of
        // `added_later` where their probe says they are missing, then the index on them.
        SqlDialect::Sqlite => {
            create.push(index(RUNS_OK, &t.runs, RUNS_OK_COLUMNS));
            create.push(paused_index(index(PAUSED, &t.control, "job_name")));
        }
        SqlDialect::Postgres => {
            for column in LaterColumn::ADDED {
                create.push(format!(
                    "ALTER TABLE {} ADD COLUMN IF NOT EXISTS {}",
                    column.table(t).quoted,
                    column.definition(d)
                ));
            }
            create.push(index(RUNS_OK, &t.runs, RUNS_OK_COLUMNS));
            create.push(paused_index(index(PAUSED, &t.control, "job_name")));
            create.push(after_index(d, lock_table, t));
        }
    }
    create
}

/// The pause index (PostgreSQL and SQLite): unique, partial.
fn paused_index(index: String) -> String {
    index.replace("CREATE INDEX", "CREATE UNIQUE INDEX") + " WHERE request_kind = 'pause'"
}

/// `CREATE INDEX IF NOT EXISTS` of `<lock table>_<name>` on `table` (PostgreSQL and SQLite).
fn index_ddl(
    d: SqlDialect,
    lock_table: &ResolvedTable,
    name: &str,
    table: &TableName,
    columns: &str,
) -> String {
    let style = d.style();
    let name = style.quote(&format!("{}_{name}", lock_table.name));
    let (name, table) = match (&lock_table.schema, d) {
        // PostgreSQL puts an index in its table's schema and takes the table qualified;
        // SQLite takes the index qualified and the table bare (`ON` names a table of
        // the index's schema).
        (Some(schema), SqlDialect::Sqlite) => (
            format!("{}.{name}", style.quote(schema)),
            style.quote(&table.bare),
        ),
        _ => (name, table.quoted.clone()),
    };
    format!("CREATE INDEX IF NOT EXISTS {name} ON {table} ({columns})")
}

/// The columns added to the history and control tables after they first shipped, each
/// nullable or with a default, so that `ensure_schema()` adds them to an existing table and
/// its old rows read as attempt 1, cancellation not asked, no slot and no parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LaterColumn {
    /// Runs: which attempt of its fire a row is, from 1.
    Attempt,
    /// Runs: cancellation was asked before the body ended.
    CancelRequested,
    /// Runs: a manual run's parameters (`Params::encode`), NULL for none.
    RunParams,
    /// Control: the slot an `after` request runs its child for.
    SlotAt,
    /// Control: a trigger request's parameters, NULL for none.
    ControlParams,
    /// Runs: the run's log lines (`lock_cluster::RunLog`), NULL for none.
    RunLogs,
}

/// Which of the tables a [`LaterColumn`] belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LaterTable {
    Runs,
    Control,
}

impl LaterColumn {
    pub(super) const ADDED: [LaterColumn; 6] = [
        LaterColumn::Attempt,
        LaterColumn::CancelRequested,
        LaterColumn::RunParams,
        LaterColumn::SlotAt,
        LaterColumn::ControlParams,
        LaterColumn::RunLogs,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            LaterColumn::Attempt => "attempt",
            LaterColumn::CancelRequested => "cancel_requested",
            LaterColumn::RunParams | LaterColumn::ControlParams => "params",
            LaterColumn::SlotAt => "slot_at",
            LaterColumn::RunLogs => "logs",
        }
    }

    pub(super) fn of(self) -> LaterTable {
        match self {
            LaterColumn::Attempt
            | LaterColumn::CancelRequested
            | LaterColumn::RunParams
            | LaterColumn::RunLogs => LaterTable::Runs,
            LaterColumn::SlotAt | LaterColumn::ControlParams => LaterTable::Control,
        }
    }

    pub(super) fn table(self, t: &TableNames) -> &TableName {
        match self.of() {
            LaterTable::Runs => &t.runs,
            LaterTable::Control => &t.control,
        }
    }

    /// The column's definition, as `CREATE TABLE` and `ADD COLUMN` take it. A boolean is
    /// `BOOLEAN` where the dialect has one (MySQL's is `TINYINT(1)`), 0 or 1 in SQLite.
    /// Parameters are `MEDIUMTEXT` in MySQL: 32 of them, each a 64-byte key and a
    /// 1000-byte value that percent-encoding can triple, pass `TEXT`'s 64 KB; so do a run's
    /// log lines (up to `lock_cluster::MAX_RUN_LOG_BYTES`).
    pub(super) fn definition(self, d: SqlDialect) -> String {
        let definition = match (self, d) {
            (LaterColumn::Attempt, _) => "INTEGER NOT NULL DEFAULT 1",
            (LaterColumn::CancelRequested, SqlDialect::Sqlite) => "INTEGER NOT NULL DEFAULT 0",
            (LaterColumn::CancelRequested, _) => "BOOLEAN NOT NULL DEFAULT FALSE",
            (
                LaterColumn::RunParams | LaterColumn::ControlParams | LaterColumn::RunLogs,
                SqlDialect::MySql,
            ) => "MEDIUMTEXT NULL",
            (LaterColumn::RunParams | LaterColumn::ControlParams | LaterColumn::RunLogs, _) => {
                "TEXT NULL"
            }
            (LaterColumn::SlotAt, SqlDialect::Postgres) => "TIMESTAMP(3) NULL",
            (LaterColumn::SlotAt, SqlDialect::MySql) => "DATETIME(3) NULL",
            (LaterColumn::SlotAt, SqlDialect::Sqlite) => "TEXT NULL",
        };
        format!("{} {definition}", self.name())
    }
}

/// The index `after_requests` and `delete_after` seek: a child's `after` rows by slot.
const CONTROL_AFTER: &str = "control_after";
const CONTROL_AFTER_COLUMNS: &str = "job_name, request_kind, slot_at";

/// The `after` rows' index (PostgreSQL and SQLite), created once its columns exist: in
/// SQLite after `added_later` added them to an older table.
pub(super) fn after_index(d: SqlDialect, lock_table: &ResolvedTable, t: &TableNames) -> String {
    index_ddl(
        d,
        lock_table,
        CONTROL_AFTER,
        &t.control,
        CONTROL_AFTER_COLUMNS,
    )
}

/// The bare name of the `after` rows' index, for SQLite's catalog check.
pub(super) fn after_index_name(lock_table: &ResolvedTable) -> String {
    format!("{}_{CONTROL_AFTER}", lock_table.name)
}

/// The index the last success of each job is read from: one seek per job for
/// `MAX(ended_at) .. WHERE job_name = ? AND outcome = 'succeeded'`.
const RUNS_OK: &str = "runs_ok";
const RUNS_OK_COLUMNS: &str = "job_name, outcome, ended_at";

/// The unique index that keeps one pause row per job (partial in PostgreSQL and SQLite; on a
/// generated column in MySQL, which has no partial index: NULL for other rows).
const PAUSED: &str = "paused";
const MYSQL_PAUSE_JOB: &str =
    "pause_job VARCHAR(255) AS (CASE WHEN request_kind = 'pause' THEN job_name END) STORED";

/// The names of the indexes added after the tables first shipped (the last-success index, the
/// pause index and the `after` rows' index), bare: for the probes that tell whether
/// `ensure_schema()` has work to do.
pub(super) fn added_indexes(lock_table: &ResolvedTable) -> [String; 3] {
    [
        format!("{}_{RUNS_OK}", lock_table.name),
        format!("{}_{PAUSED}", lock_table.name),
        after_index_name(lock_table),
    ]
}

/// Deletes every pause row of a job but its oldest: what a pause race could leave before the
/// unique index existed. The derived table: MySQL deletes from no table its subquery reads.
fn dedupe_pauses(t: &TableNames) -> String {
    let control = &t.control.quoted;
    format!(
        "DELETE FROM {control} WHERE request_kind = 'pause' AND id NOT IN \
         (SELECT id FROM (SELECT MIN(id) AS id FROM {control} WHERE request_kind = 'pause' \
         GROUP BY job_name) AS oldest)"
    )
}

/// The statements that take and release the named lock (`GET_LOCK`, at most 60 s) under which
/// MySQL's DDL of the tables next to `control` runs; the name is hashed to stay within
/// MySQL's 64 characters. [`mysql_ddl_release`] is the second, for a provider to run when a
/// statement between them failed.
fn mysql_ddl_lock(schema: &str, control: &str) -> [String; 2] {
    let name = format!("SHA1(CONCAT('lock_sql ddl ', {schema}, '.', '{control}'))");
    [
        format!("DO GET_LOCK({name}, 60)"),
        format!("DO RELEASE_LOCK({name})"),
    ]
}

/// The statement that releases the named lock of MySQL's DDL (see [`mysql_ddl_lock`]): the
/// last of `create`, also to be run by a provider when one before it failed, so that the
/// connection does not go back to its pool holding the lock.
pub(super) fn mysql_ddl_release(create: &[String]) -> Option<String> {
    create
        .last()
        .filter(|last| last.starts_with("DO RELEASE_LOCK("))
        .cloned()
}

/// MySQL has no `CREATE INDEX IF NOT EXISTS` (MariaDB has) nor `ADD COLUMN IF NOT EXISTS`:
/// `ddl` runs when `missing` (one boolean, from the catalog) is true, as one prepared
/// statement, on the connection that runs the rest of the DDL.
fn mysql_if(missing: &str, ddl: &str) -> [String; 4] {
    let ddl = ddl.replace('\'', "''");
    [
        format!("SET @lock_sql_ddl = IF(({missing}), '{ddl}', 'DO 0')"),
        "PREPARE lock_sql_ddl FROM @lock_sql_ddl".to_owned(),
        "EXECUTE lock_sql_ddl".to_owned(),
        "DEALLOCATE PREPARE lock_sql_ddl".to_owned(),
    ]
}
