//! The DDL of the operations tables: each statement a no-op when its object exists, so that
//! `ensure_schema()` creates what an older version did not (the action log came after the
//! other three) and leaves the rest alone.

use super::{MAX_DETAIL_LEN, MAX_ERROR_LEN, MAX_TEXT_LEN, SqlDialect, TableName, TableNames};
use crate::ResolvedTable;

/// `CREATE TABLE IF NOT EXISTS` for the four tables, then their indexes (inline in MySQL,
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
    let index = |name: &str, table: &TableName, columns: &str| -> String {
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
             error_text {terr} NULL{job_index}{started_index}\n)",
            runs = t.runs.quoted,
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
             claimed_at {ts} NULL\n)",
            control = t.control.quoted,
            id = d.id_column(),
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
    ];
    if d != SqlDialect::MySql {
        create.push(index("runs_job", &t.runs, "job_name, id"));
        create.push(index("runs_started", &t.runs, "started_at"));
        create.push(index("actions_job", &t.actions, "job_name, id"));
    }
    create
}
