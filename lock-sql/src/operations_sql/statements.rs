//! The statements' text for one lock table and dialect: [`OperationsSql::new`].

use super::{
    ACTION_COLUMNS, AddedLater, CONTROL_COLUMNS, INCIDENT_COLUMNS, OperationsSql, OperationsTables,
    REGISTRY_COLUMNS, RUN_COLUMNS, SqlDialect, TableName, TableNames, create,
};
use crate::{MAX_IDENTIFIER_LEN, ResolvedTable, validate_identifier};
use lock_core::LockError;

impl OperationsSql {
    /// The statements for the operations tables next to `lock_table`. Fails when a derived
    /// name would be longer than [`MAX_IDENTIFIER_LEN`].
    pub fn new(dialect: SqlDialect, lock_table: &ResolvedTable) -> Result<Self, LockError> {
        let style = dialect.style();
        let derive = |suffix: &str| -> Result<TableName, LockError> {
            let bare = format!("{}_{suffix}", lock_table.name);
            validate_identifier(&bare).map_err(|reason| {
                LockError::InvalidConfiguration(format!(
                    "operations table {bare:?} (the lock table's name and `_{suffix}`): {reason}; \
                     a lock table name of at most {} bytes leaves room for it",
                    MAX_IDENTIFIER_LEN - 1 - "instances".len()
                ))
            })?;
            Ok(match &lock_table.schema {
                Some(schema) => TableName {
                    quoted: format!("{}.{}", style.quote(schema), style.quote(&bare)),
                    display: format!("{schema}.{bare}"),
                    bare,
                },
                None => TableName {
                    quoted: style.quote(&bare),
                    display: bare.clone(),
                    bare,
                },
            })
        };
        let names = TableNames {
            instances: derive("instances")?,
            runs: derive("runs")?,
            control: derive("control")?,
            actions: derive("actions")?,
            incidents: derive("incidents")?,
        };
        let create = create::statements(dialect, lock_table, &names);
        let create_release = create::mysql_ddl_release(&create);
        let instances = names.instances.quoted.clone();
        let runs = &names.runs.quoted;
        let control = &names.control.quoted;
        let actions = &names.actions.quoted;
        let incidents = &names.incidents.quoted;
        let d = dialect;
        let p = |n| d.p(n);
        let now = d.now();
        let tables: Vec<String> = [&instances, runs, control, actions, incidents]
            .iter()
            .map(|t| format!("SELECT 1 FROM {t} WHERE 1 = 0"))
            .collect();
        // Tables from before the history's and control table's added columns (`attempt`,
        // `cancel_requested`, `params`, `logs`; `slot_at`, `params`): DDL to run, and a check that
        // fails with it.
        let later = |table: create::LaterTable, name: &str| {
            let columns: Vec<&str> = create::LaterColumn::ADDED
                .iter()
                .filter(|c| c.of() == table)
                .map(|c| c.name())
                .collect();
            format!("SELECT {} FROM {name} WHERE 1 = 0", columns.join(", "))
        };
        let columns = [
            later(create::LaterTable::Runs, runs),
            later(create::LaterTable::Control, control),
        ];
        let check: Vec<String> = tables[..3].iter().chain(&columns).cloned().collect();
        let mut probe: Vec<String> = tables.into_iter().chain(columns).collect();
        let added_later = match d {
            SqlDialect::Sqlite => {
                let schema = lock_table
                    .schema
                    .as_ref()
                    .map(|s| format!(", '{s}'"))
                    .unwrap_or_default();
                let mut added: Vec<AddedLater> = create::LaterColumn::ADDED
                    .iter()
                    .map(|&column| {
                        let table = column.table(&names);
                        AddedLater {
                            missing: format!(
                                "SELECT COUNT(*) = 0 FROM pragma_table_info('{}'{schema}) WHERE name = '{}'",
                                table.bare,
                                column.name()
                            ),
                            ddl: format!(
                                "ALTER TABLE {} ADD COLUMN {}",
                                table.quoted,
                                column.definition(d)
                            ),
                        }
                    })
                    .collect();
                added.push(AddedLater {
                    missing: format!(
                        "SELECT COUNT(*) = 0 FROM pragma_index_list('{}'{schema}) WHERE name = '{}'",
                        names.control.bare,
                        create::after_index_name(lock_table)
                    ),
                    ddl: create::after_index(d, lock_table, &names),
                });
                added
            }
            _ => Vec::new(),
        };
        // PostgreSQL's `ensure_schema()` runs no DDL when the probes succeed: the indexes added
        // since the tables first shipped are probed too (a cast that fails when one is missing).
        if d == SqlDialect::Postgres {
            for index in create::added_indexes(lock_table) {
                let index = match &lock_table.schema {
                    Some(schema) => format!("{}.{}", style.quote(schema), style.quote(&index)),
                    None => style.quote(&index),
                };
                probe.push(format!("SELECT '{index}'::regclass"));
            }
        }

        let poll = format!(
            "SELECT {CONTROL_COLUMNS} FROM {control} \
             WHERE request_kind = 'pause' OR claimed_by IS NULL ORDER BY id"
        );
        let claim = format!(
            "UPDATE {control} SET claimed_by = {p1}, claimed_at = {now} \
             WHERE id = {p2} AND request_kind = 'trigger' AND claimed_by IS NULL",
            p1 = p(1),
            p2 = p(2)
        );
        // Only the claimer's claim: an instance hands back what it cannot run, never another's.
        // The parameters in their order: MySQL's `?` are positional.
        let unclaim = format!(
            "UPDATE {control} SET claimed_by = NULL, claimed_at = NULL \
             WHERE claimed_by = {p1} AND id = {p2} AND request_kind = 'trigger'",
            p1 = p(1),
            p2 = p(2)
        );
        let returning_id = match d {
            SqlDialect::MySql => "",
            _ => " RETURNING id",
        };
        let run_start = format!(
            "INSERT INTO {runs} (job_name, slot_at, fire_kind, instance_id, fence, attempt, params, \
             started_at, outcome) \
             VALUES ({}, {}, {}, {}, {}, {}, {}, {now}, 'running'){returning_id}",
            p(1),
            p(2),
            p(3),
            p(4),
            p(5),
            p(6),
            p(7)
        );
        let run_end = format!(
            "UPDATE {runs} SET ended_at = {now}, outcome = {}, error_text = {}, cancel_requested = {}, \
             logs = {} WHERE id = {}",
            p(1),
            p(2),
            p(3),
            p(4),
            p(5)
        );
        // Apart from RUN_COLUMNS: the history reads (every refresh of a page) never carry the
        // lines; this one reads them for a range of the job's ids on its `(job_name, id)` index.
        let run_logs = format!(
            "SELECT id, logs FROM {runs} WHERE job_name = {} AND id >= {} AND id <= {} \
             AND logs IS NOT NULL ORDER BY id DESC",
            p(1),
            p(2),
            p(3)
        );
        // A job is paused by one row, whoever asks twice: two pauses at once both see no row,
        // and the unique index on the job's pause row (see `create`) turns the second insert
        // into nothing, so that exactly one caller is told it paused. PostgreSQL and SQLite keep
        // the NOT EXISTS too, for tables whose `ensure_schema()` has not added the index yet.
        // MySQL inserts plain VALUES: an INSERT .. SELECT takes the table's AUTO-INC lock for
        // the statement and shared locks on what it reads, and concurrent ones deadlock there
        // (MariaDB answers "Failed to read auto-increment value", 1467).
        let pause = match d {
            SqlDialect::MySql => format!(
                "INSERT IGNORE INTO {control} (job_name, request_kind, requested_at, requested_by) \
                 VALUES (?, 'pause', {now}, ?)"
            ),
            _ => format!(
                "INSERT INTO {control} (job_name, request_kind, requested_at, requested_by) \
                 SELECT {p1}, 'pause', {now}, {p2} WHERE NOT EXISTS \
                 (SELECT 1 FROM {control} WHERE job_name = {p1} AND request_kind = 'pause') \
                 ON CONFLICT DO NOTHING",
                p1 = p(1),
                p2 = p(2)
            ),
        };
        let resume = format!(
            "DELETE FROM {control} WHERE job_name = {} AND request_kind = 'pause'",
            p(1)
        );
        let request_trigger = format!(
            "INSERT INTO {control} (job_name, request_kind, requested_at, requested_by, params) \
             VALUES ({}, 'trigger', {now}, {}, {}){returning_id}",
            p(1),
            p(2),
            p(3)
        );
        // `after` rows are never claimed (`claim`, `unclaim` and `withdraw_trigger` take
        // trigger rows only): each live instance's heartbeat brings them back until the
        // child's lock decided the slot and `delete_after` removes them.
        let request_after = format!(
            "INSERT INTO {control} (job_name, request_kind, requested_at, requested_by, slot_at) \
             VALUES ({}, 'after', {now}, {}, {}){returning_id}",
            p(1),
            p(2),
            p(3)
        );
        let after_requests = format!(
            "SELECT requested_by FROM {control} \
             WHERE job_name = {} AND request_kind = 'after' AND slot_at = {} ORDER BY id",
            p(1),
            p(2)
        );
        let delete_after = format!(
            "DELETE FROM {control} WHERE job_name = {} AND request_kind = 'after' AND slot_at <= {}",
            p(1),
            p(2)
        );
        let withdraw_trigger = format!(
            "DELETE FROM {control} WHERE id = {} AND request_kind = 'trigger' AND claimed_by IS NULL",
            p(1)
        );
        let control_all = format!("SELECT {CONTROL_COLUMNS} FROM {control} ORDER BY id");
        let registry =
            format!("SELECT {REGISTRY_COLUMNS} FROM {instances} ORDER BY instance_id, job_name");
        let instances_only = format!(
            "SELECT {REGISTRY_COLUMNS} FROM {instances} WHERE job_name = '' ORDER BY instance_id"
        );
        let history = format!(
            "SELECT {RUN_COLUMNS} FROM {runs} WHERE job_name = {} ORDER BY id DESC LIMIT {}",
            p(1),
            p(2)
        );
        let history_page = format!(
            "SELECT {RUN_COLUMNS} FROM {runs} WHERE job_name = {} AND id < {} \
             ORDER BY id DESC LIMIT {}",
            p(1),
            p(2),
            p(3)
        );
        // Both read one index seek per job name, never the history: a skip scan over the
        // `(job_name, id)` index (a recursive CTE in PostgreSQL and SQLite, which have no
        // loose index scan) and the job's newest id; the last success from the
        // `(job_name, outcome, ended_at)` index. MySQL and MariaDB do the skip scan themselves
        // for a `GROUP BY` on an index's first column ("Using index for group-by"), and bound
        // a recursive CTE's depth (`cte_max_recursion_depth`, 1000), so they group.
        let run_cols = RUN_COLUMNS
            .split(", ")
            .map(|c| format!("r.{c}"))
            .collect::<Vec<_>>()
            .join(", ");
        let (last_runs, last_successes) = match d {
            SqlDialect::MySql => (
                format!(
                    "SELECT {run_cols} FROM {runs} r JOIN \
                     (SELECT MAX(id) AS last_id FROM {runs} GROUP BY job_name) l ON r.id = l.last_id \
                     ORDER BY r.job_name"
                ),
                format!(
                    "SELECT job_name, MAX(ended_at) FROM {runs} WHERE outcome = 'succeeded' \
                     GROUP BY job_name"
                ),
            ),
            _ => {
                let job_names = format!(
                    "WITH RECURSIVE jobs (name) AS (\
                     SELECT MIN(job_name) FROM {runs} \
                     UNION ALL \
                     SELECT (SELECT MIN(n.job_name) FROM {runs} n WHERE n.job_name > jobs.name) \
                     FROM jobs WHERE jobs.name IS NOT NULL) "
                );
                // PostgreSQL would hash-join a small history on `r.id = (..)`, reading all of
                // it: LATERAL with a LIMIT is one seek per job whatever it estimates. SQLite
                // has no LATERAL, and always looks the id up per job.
                let newest = match d {
                    SqlDialect::Postgres => format!(
                        "{job_names}SELECT {run_cols} FROM jobs CROSS JOIN LATERAL \
                         (SELECT * FROM {runs} l WHERE l.job_name = jobs.name \
                         ORDER BY l.id DESC LIMIT 1) r ORDER BY r.job_name"
                    ),
                    _ => format!(
                        "{job_names}SELECT {run_cols} FROM jobs JOIN {runs} r ON r.id = \
                         (SELECT MAX(l.id) FROM {runs} l WHERE l.job_name = jobs.name) \
                         ORDER BY r.job_name"
                    ),
                };
                // The scalar subquery of a flattened derived table is evaluated twice per row,
                // in the filter and in the result: LATERAL in PostgreSQL; in SQLite a LIMIT
                // keeps the derived table whole.
                let succeeded = match d {
                    SqlDialect::Postgres => format!(
                        "{job_names}SELECT jobs.name, l.succeeded FROM jobs CROSS JOIN LATERAL \
                         (SELECT MAX(s.ended_at) AS succeeded FROM {runs} s \
                         WHERE s.job_name = jobs.name AND s.outcome = 'succeeded') l \
                         WHERE l.succeeded IS NOT NULL"
                    ),
                    _ => format!(
                        "{job_names}SELECT name, succeeded FROM (SELECT jobs.name, \
                         (SELECT MAX(s.ended_at) FROM {runs} s \
                         WHERE s.job_name = jobs.name AND s.outcome = 'succeeded') AS succeeded \
                         FROM jobs LIMIT -1) AS last WHERE succeeded IS NOT NULL"
                    ),
                };
                (newest, succeeded)
            }
        };
        let record_action = format!(
            "INSERT INTO {actions} (acted_at, job_name, action, requested_by, detail) \
             VALUES ({now}, {}, {}, {}, {})",
            p(1),
            p(2),
            p(3),
            p(4)
        );
        let actions_of = format!(
            "SELECT {ACTION_COLUMNS} FROM {actions} WHERE job_name = {} ORDER BY id DESC LIMIT {}",
            p(1),
            p(2)
        );
        // Oldest first by id, which follows `acted_at`: the batch stops at the first `limit`
        // rows it meets, without an index of its own on a table of human-paced rows.
        let delete_actions = match d {
            SqlDialect::MySql => {
                format!("DELETE FROM {actions} WHERE acted_at < ? ORDER BY id LIMIT ?")
            }
            _ => format!(
                "DELETE FROM {actions} WHERE id IN \
                 (SELECT id FROM {actions} WHERE acted_at < {} ORDER BY id LIMIT {})",
                p(1),
                p(2)
            ),
        };
        let open_incidents = format!(
            "SELECT {INCIDENT_COLUMNS} FROM {incidents} WHERE resolved_at IS NULL \
             ORDER BY opened_at, incident_key"
        );
        let open_incident = format!(
            "{insert} {incidents} (incident_key, summary, opened_at) VALUES ({}, {}, {now}){conflict}",
            p(1),
            p(2),
            insert = match d {
                SqlDialect::Postgres => "INSERT INTO",
                SqlDialect::MySql => "INSERT IGNORE INTO",
                SqlDialect::Sqlite => "INSERT OR IGNORE INTO",
            },
            conflict = match d {
                SqlDialect::Postgres => " ON CONFLICT (incident_key) DO NOTHING",
                _ => "",
            },
        );
        let reopen_incident = format!(
            "UPDATE {incidents} SET summary = {}, opened_at = {now}, resolved_at = NULL \
             WHERE incident_key = {} AND resolved_at IS NOT NULL",
            p(1),
            p(2)
        );
        let resolve_incident = format!(
            "UPDATE {incidents} SET resolved_at = {now} \
             WHERE incident_key = {} AND resolved_at IS NULL",
            p(1)
        );
        let delete_incidents = match d {
            SqlDialect::MySql => format!("DELETE FROM {incidents} WHERE resolved_at < ? LIMIT ?"),
            _ => format!(
                "DELETE FROM {incidents} WHERE incident_key IN \
                 (SELECT incident_key FROM {incidents} WHERE resolved_at < {} LIMIT {})",
                p(1),
                p(2)
            ),
        };
        // Bounded batches: a housekeeping run never holds a long lock on a big table. Claimed
        // trigger rows by their claim, `after` rows by their request (a child that never ran
        // for a slot, its instances gone): one time per row, so that each parameter is used
        // once (MySQL's `?` are positional). Pauses and unclaimed triggers read NULL and stay.
        let expired_control = "CASE request_kind WHEN 'trigger' THEN claimed_at \
                               WHEN 'after' THEN requested_at END";
        let (delete_runs, delete_claimed, delete_stale_registry) = match d {
            SqlDialect::MySql => (
                format!("DELETE FROM {runs} WHERE started_at < ? ORDER BY id LIMIT ?"),
                format!("DELETE FROM {control} WHERE {expired_control} < ? ORDER BY id LIMIT ?"),
                format!("DELETE FROM {instances} WHERE heartbeat_at < ? LIMIT ?"),
            ),
            SqlDialect::Postgres => (
                format!(
                    "DELETE FROM {runs} WHERE id IN \
                     (SELECT id FROM {runs} WHERE started_at < $1 ORDER BY id LIMIT $2)"
                ),
                format!(
                    "DELETE FROM {control} WHERE id IN (SELECT id FROM {control} \
                     WHERE {expired_control} < $1 ORDER BY id LIMIT $2)"
                ),
                format!(
                    "DELETE FROM {instances} WHERE (instance_id, job_name) IN \
                     (SELECT instance_id, job_name FROM {instances} WHERE heartbeat_at < $1 LIMIT $2)"
                ),
            ),
            SqlDialect::Sqlite => (
                format!(
                    "DELETE FROM {runs} WHERE id IN \
                     (SELECT id FROM {runs} WHERE started_at < ?1 ORDER BY id LIMIT ?2)"
                ),
                format!(
                    "DELETE FROM {control} WHERE id IN (SELECT id FROM {control} \
                     WHERE {expired_control} < ?1 ORDER BY id LIMIT ?2)"
                ),
                format!(
                    "DELETE FROM {instances} WHERE rowid IN \
                     (SELECT rowid FROM {instances} WHERE heartbeat_at < ?1 LIMIT ?2)"
                ),
            ),
        };
        Ok(OperationsSql {
            dialect,
            tables: OperationsTables {
                instances: names.instances.display.clone(),
                runs: names.runs.display.clone(),
                control: names.control.display.clone(),
                actions: names.actions.display.clone(),
                incidents: names.incidents.display.clone(),
            },
            bare: [
                names.instances.bare.clone(),
                names.runs.bare.clone(),
                names.control.bare.clone(),
                names.actions.bare.clone(),
                names.incidents.bare.clone(),
            ],
            create,
            create_release,
            added_later,
            probe,
            check,
            poll,
            claim,
            unclaim,
            run_start,
            run_end,
            run_logs,
            pause,
            resume,
            request_trigger,
            request_after,
            after_requests,
            delete_after,
            withdraw_trigger,
            control: control_all,
            registry,
            instances: instances_only,
            history,
            history_page,
            last_runs,
            last_successes,
            delete_runs,
            delete_claimed,
            delete_stale_registry,
            record_action,
            actions: actions_of,
            delete_actions,
            open_incidents,
            open_incident,
            reopen_incident,
            resolve_incident,
            delete_incidents,
            instances_qualified: instances,
        })
    }
}
