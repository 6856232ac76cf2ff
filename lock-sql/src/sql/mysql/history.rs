//! The run history in batches for MySQL and MariaDB
//! ([`ClusterStore::runs_started`](lock_cluster::ClusterStore::runs_started) and
//! [`runs_ended`](lock_cluster::ClusterStore::runs_ended)): the single statements
//! ([`OperationsSql::run_start`], [`OperationsSql::run_end`]), one per run, with their values
//! written as literals, in one text query from `START TRANSACTION` to `COMMIT`.
//!
//! Decisions, and why:
//!
//! - **One `INSERT` per run, not one `INSERT` of many rows.** The ids of a multi-row `INSERT`
//!   are consecutive only under `innodb_autoinc_lock_mode` 0 and 1; under 2 (MySQL 8's
//!   default) another session's inserts interleave with them, and `LAST_INSERT_ID()` names the
//!   first only. Each single-row `INSERT` answers with an OK packet carrying its own row's id,
//!   so the ids are read in the order of the runs whatever the mode. A plain `INSERT` is cheap
//!   to parse (unlike the lock batch's two-kilobyte acquire statement): on MariaDB 10.11 the
//!   text of 600 starts takes about 24 ms, against 10 ms for one multi-row `INSERT` and
//!   540 ms for the 600 single writes (lock-provider-mysql's `benches/history.rs`).
//! - **One `UPDATE` per end, by id**: the single end's statement itself, so the same columns
//!   and values by construction, each row found through the primary key. One `UPDATE` joined
//!   on the ids would save about 8 ms of 22 for 600 ends (same bench), not worth a second
//!   form of the statement to keep in step.
//! - **One transaction**, so that an error (a row the table refuses, a lost connection) applies
//!   to every run of the batch, as the trait says: the server stops at the failing statement
//!   and the driver rolls the transaction back (a provider must).
//! - **Texts bounded by [`MAX_HISTORY_TEXT`]**: a batch of ends carries the runs' log lines (up to
//!   64 KiB each, twice that as hexadecimal), which could outgrow the server's
//!   `max_allowed_packet`. A batch larger than the bound is sent as several texts on one
//!   connection, in the same transaction: the first starts it, the last commits it.
//! - **Literals need no escaping** ([`literal`](super::literal)): text as `_utf8mb4 X'…'`,
//!   times as `TIMESTAMP'…'`, whatever the session's `sql_mode`.

use lock_cluster::{RunEnd, RunStart};

use super::UnexpectedBatchAnswer;
use super::literal;
use crate::operations_sql::{OperationsSql, stored_params};

/// The longest text a batch sends in one query, in bytes (a statement longer on its own is
/// sent alone): a quarter of MariaDB's default `max_allowed_packet` (16 MiB; MySQL 8's is
/// 64 MiB).
pub const MAX_HISTORY_TEXT: usize = 4 << 20;

/// A statement split at its `?` parameters, to be written with literals in their place.
#[derive(Clone, Debug)]
struct Template(Vec<String>);

impl Template {
    fn new(statement: &str) -> Self {
        // Identifiers are ASCII letters, digits and `_`, and the statements hold no `?` in a
        // string: every `?` is a parameter.
        Template(statement.split('?').map(str::to_owned).collect())
    }

    /// The statement with `values` (each writing one literal) in place of its parameters.
    fn write(&self, out: &mut String, values: &[&dyn Fn(&mut String)]) {
        debug_assert_eq!(values.len() + 1, self.0.len(), "one value per parameter");
        for (piece, value) in self.0.iter().zip(values) {
            out.push_str(piece);
            value(out);
        }
        if let Some(last) = self.0.last() {
            out.push_str(last);
        }
    }
}

/// The batched start and end of runs in `<lock table>_runs`, for any driver that can send
/// several statements in one text query and read each one's OK packet.
///
/// ```
/// use lock_cluster::{RunEnd, RunStart, RunState};
/// use lock_core::FireKind;
/// use lock_sql::sql::mysql::HistoryBatchStatements;
/// use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
///
/// let table = LockTableConfig::default().resolve(IdentifierStyle::MYSQL)?;
/// let history = HistoryBatchStatements::new(&OperationsSql::new(SqlDialect::MySql, &table)?);
/// let run = RunStart {
///     job: "it's".into(),
///     slot: None,
///     fire_kind: FireKind::Manual,
///     instance_id: "a".into(),
///     fence: 7,
///     attempt: 1,
///     params: Default::default(),
/// };
/// let texts = history.runs_started(&[run.clone(), run]);
/// assert_eq!(texts.len(), 1);
/// assert!(texts[0].starts_with("START TRANSACTION;INSERT INTO `shedlock_runs`"));
/// assert!(texts[0].ends_with(";COMMIT") && !texts[0].contains('?'));
/// // The OK packets of START TRANSACTION, the two INSERTs and COMMIT:
/// assert_eq!(history.started_ids(2, &[None, Some(41), Some(57), None])?, [41, 57]);
///
/// let texts = history.runs_ended(&[RunEnd::new(41, RunState::Failed, Some("boom"))]);
/// assert!(texts[0].contains("UPDATE `shedlock_runs` SET") && texts[0].contains("WHERE id = 41"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct HistoryBatchStatements {
    start: Template,
    end: Template,
}

impl HistoryBatchStatements {
    /// The batches of `sql`'s single [`run_start`](OperationsSql::run_start) and
    /// [`run_end`](OperationsSql::run_end) (of [`SqlDialect::MySql`](crate::SqlDialect::MySql)).
    pub fn new(sql: &OperationsSql) -> Self {
        HistoryBatchStatements {
            start: Template::new(&sql.run_start),
            end: Template::new(&sql.run_end),
        }
    }

    /// The texts that write the start rows of `runs`, to be sent in order on one connection:
    /// `START TRANSACTION`, one `INSERT` per run, `COMMIT` (one text unless the batch is
    /// longer than [`MAX_HISTORY_TEXT`]). Empty for no runs. The id of each run's row is in the OK
    /// packet of its `INSERT`: [`started_ids`](Self::started_ids) reads them.
    pub fn runs_started(&self, runs: &[RunStart]) -> Vec<String> {
        let statements = runs.iter().map(|run| {
            let params = stored_params(&run.params);
            let mut text = String::with_capacity(
                self.start.0.iter().map(String::len).sum::<usize>()
                    + literal::text_len(&run.job)
                    + literal::text_len(&run.instance_id)
                    + params.as_deref().map_or(4, literal::text_len)
                    + 80,
            );
            self.start.write(
                &mut text,
                &[
                    &|out| literal::text(out, &run.job),
                    &|out| literal::nullable_time(out, run.slot.map(|slot| slot.naive_utc())),
                    &|out| literal::text(out, run.fire_kind.as_str()),
                    &|out| literal::text(out, &run.instance_id),
                    &|out| literal::integer(out, i64::try_from(run.fence).unwrap_or(-1)),
                    &|out| literal::integer(out, i64::from(run.attempt)),
                    &|out| literal::nullable_text(out, params.as_deref()),
                ],
            );
            text
        });
        transaction(statements)
    }

    /// The ids of the rows a [`runs_started`](Self::runs_started) batch of `runs` runs wrote,
    /// in the order of the runs, from the `last_insert_id` of every OK packet its texts
    /// answered, in order (None where a packet carried none). An error when the packets are
    /// not those of the batch: the caller then takes no row as written.
    pub fn started_ids(
        &self,
        runs: usize,
        packets: &[Option<u64>],
    ) -> Result<Vec<i64>, UnexpectedBatchAnswer> {
        if packets.len() != runs + 2 {
            return Err(UnexpectedBatchAnswer::new(format!(
                "{} statement results for a batch of {runs} run starts",
                packets.len()
            )));
        }
        packets[1..=runs]
            .iter()
            .enumerate()
            .map(|(at, id)| {
                id.and_then(|id| i64::try_from(id).ok())
                    .filter(|&id| id > 0)
                    .ok_or_else(|| {
                        UnexpectedBatchAnswer::new(format!("no row id for run start {}", at + 1))
                    })
            })
            .collect()
    }

    /// The texts that write the ends of `ends`, to be sent in order on one connection:
    /// `START TRANSACTION`, one `UPDATE` per end, `COMMIT` (one text unless the batch is
    /// longer than [`MAX_HISTORY_TEXT`]). Empty for no ends.
    pub fn runs_ended(&self, ends: &[RunEnd]) -> Vec<String> {
        let statements = ends.iter().map(|end| {
            let logs = end.logs.as_ref().map(|logs| logs.as_stored());
            let mut text = String::with_capacity(
                self.end.0.iter().map(String::len).sum::<usize>()
                    + end.error.as_deref().map_or(4, literal::text_len)
                    + logs.map_or(4, literal::text_len)
                    + 60,
            );
            self.end.write(
                &mut text,
                &[
                    &|out| literal::text(out, end.outcome.as_str()),
                    &|out| literal::nullable_text(out, end.error.as_deref()),
                    &|out| literal::integer(out, i64::from(end.cancel_requested)),
                    &|out| literal::nullable_text(out, logs),
                    &|out| literal::integer(out, end.id),
                ],
            );
            text
        });
        transaction(statements)
    }
}

/// `START TRANSACTION`, `statements`, `COMMIT`, cut into texts of at most [`MAX_HISTORY_TEXT`] bytes
/// at statement boundaries; none for no statements.
fn transaction(statements: impl Iterator<Item = String>) -> Vec<String> {
    let mut texts = Vec::new();
    let mut text = String::from("START TRANSACTION");
    let mut any = false;
    for statement in statements {
        any = true;
        if text.len() + 1 + statement.len() > MAX_HISTORY_TEXT && !text.is_empty() {
            texts.push(std::mem::take(&mut text));
        }
        if !text.is_empty() {
            text.push(';');
        }
        text.push_str(&statement);
    }
    if !any {
        return texts;
    }
    if text.len() + ";COMMIT".len() > MAX_HISTORY_TEXT {
        texts.push(std::mem::take(&mut text));
    }
    if !text.is_empty() {
        text.push(';');
    }
    text.push_str("COMMIT");
    texts.push(text);
    texts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{IdentifierStyle, LockTableConfig, SqlDialect};
    use lock_cluster::{RunLog, RunLogWriter, RunState};
    use lock_core::{FireKind, Params};

    fn history() -> (OperationsSql, HistoryBatchStatements) {
        let table = LockTableConfig::default()
            .with_table("ops.locks")
            .resolve(IdentifierStyle::MYSQL)
            .expect("table");
        let sql = OperationsSql::new(SqlDialect::MySql, &table).expect("sql");
        let history = HistoryBatchStatements::new(&sql);
        (sql, history)
    }

    fn run(job: &str) -> RunStart {
        RunStart {
            job: job.into(),
            slot: None,
            fire_kind: FireKind::Scheduled,
            instance_id: "i".into(),
            fence: 3,
            attempt: 2,
            params: Params::default(),
        }
    }

    #[test]
    fn a_start_is_the_single_insert_with_literals() {
        let (sql, history) = history();
        let slot = chrono::DateTime::from_timestamp(1_700_000_000, 5_000_000).expect("a time");
        let mut params = Params::new();
        params.insert("k", "it's é").expect("a parameter");
        let mut stored = String::new();
        literal::text(&mut stored, &params.encode());
        let texts = history.runs_started(&[
            RunStart {
                slot: Some(slot),
                params,
                ..run("a")
            },
            run("b"),
        ]);
        let one = |job: &str, slot: &str, params: &str| {
            sql.run_start
                .replacen('?', job, 1)
                .replacen('?', slot, 1)
                .replacen('?', "_utf8mb4 X'7363686564756C6564'", 1)
                .replacen('?', "_utf8mb4 X'69'", 1)
                .replacen('?', "3", 1)
                .replacen('?', "2", 1)
                .replacen('?', params, 1)
        };
        assert_eq!(
            texts,
            [format!(
                "START TRANSACTION;{};{};COMMIT",
                one(
                    "_utf8mb4 X'61'",
                    "TIMESTAMP'2023-11-14 22:13:20.005000'",
                    &stored
                ),
                one("_utf8mb4 X'62'", "NULL", "NULL"),
            )]
        );
    }

    #[test]
    fn an_end_is_the_single_update_with_literals() {
        let (sql, history) = history();
        let texts = history.runs_ended(&[
            RunEnd::new(9, RunState::Failed, Some("x")).with_cancel_requested(true),
            RunEnd::new(10, RunState::Succeeded, None),
        ]);
        let one = |outcome: &str, error: &str, cancel: &str, id: &str| {
            sql.run_end
                .replacen('?', outcome, 1)
                .replacen('?', error, 1)
                .replacen('?', cancel, 1)
                .replacen('?', "NULL", 1)
                .replacen('?', id, 1)
        };
        assert_eq!(
            texts,
            [format!(
                "START TRANSACTION;{};{};COMMIT",
                one("_utf8mb4 X'6661696C6564'", "_utf8mb4 X'78'", "1", "9"),
                one("_utf8mb4 X'737563636565646564'", "NULL", "0", "10"),
            )]
        );
    }

    #[test]
    fn no_runs_no_text() {
        let (_, history) = history();
        assert!(history.runs_started(&[]).is_empty());
        assert!(history.runs_ended(&[]).is_empty());
    }

    #[test]
    fn a_batch_longer_than_a_text_is_one_transaction_over_several() {
        let (_, history) = history();
        let mut writer = RunLogWriter::new(100_000, 65536);
        let now = chrono::Utc::now();
        for i in 0..3000 {
            writer.line(now, "INFO", "t", |m| {
                m.push_str(&format!("line {i} of many"))
            });
        }
        let logs: RunLog = writer.finish().expect("lines");
        let ends: Vec<RunEnd> = (1..=100)
            .map(|id| RunEnd::new(id, RunState::Succeeded, None).with_logs(Some(logs.clone())))
            .collect();
        let texts = history.runs_ended(&ends);
        assert!(texts.len() > 1, "{} texts", texts.len());
        assert!(texts.iter().all(|t| t.len() <= MAX_HISTORY_TEXT));
        assert!(texts[0].starts_with("START TRANSACTION;UPDATE"));
        assert!(texts[1..].iter().all(|t| t.starts_with("UPDATE")));
        assert!(texts.last().expect("texts").ends_with(";COMMIT"));
        let updates: usize = texts.iter().map(|t| t.matches("UPDATE ").count()).sum();
        assert_eq!(updates, 100);
    }

    #[test]
    fn ids_come_from_the_inserts_packets_only() {
        let (_, history) = history();
        assert_eq!(
            history.started_ids(2, &[None, Some(5), Some(3), None]),
            Ok(vec![5, 3])
        );
        assert!(history.started_ids(2, &[None, Some(5), None]).is_err());
        assert!(
            history
                .started_ids(2, &[None, Some(5), Some(0), None])
                .is_err()
        );
        assert!(history.started_ids(1, &[None, None, None]).is_err());
    }
}
