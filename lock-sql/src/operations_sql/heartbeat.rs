//! The heartbeat's registry upsert, written for any number of rows.
//!
//! Decisions, and why:
//! - **Cut into statements of at most [`HEARTBEAT_ROWS_PER_STATEMENT`] rows** where the rows
//!   are bound one parameter per column (MySQL and SQLite): each database refuses a statement
//!   with more parameters than its limit (65,535 in MySQL and MariaDB, 32,766 in the SQLite
//!   the providers bundle), which one statement of 13 per row reaches at about 5,000 and 2,500
//!   jobs. PostgreSQL binds arrays instead ([`OperationsSql::heartbeat_arrays`]): one
//!   statement whatever the number of jobs.
//! - **Every row of a beat gets the same `heartbeat_at`**, however many statements carry it:
//!   the complete beat's deletion ([`OperationsSql::prune_jobs`]) takes the job rows written
//!   before the instance's own row, and a statement's now differs from the next one's (per
//!   statement in MySQL and SQLite, even in one transaction). The first statement writes the
//!   instance's own row at the database's now and the others copy its time (MySQL: from a
//!   session variable set just before, since MySQL refuses a subquery on the table an
//!   `INSERT` writes to).

use std::ops::Range;

use lock_cluster::{Heartbeat, JobRegistration};

use super::{OperationsSql, REGISTRY_COLUMNS, SqlDialect};

/// Parameters per registry row in [`OperationsSql::heartbeat`].
pub const HEARTBEAT_PARAMS: usize = 13;

/// The most registry rows one statement of [`OperationsSql::heartbeat_upserts`] carries.
///
/// 1,000 rows are 13,000 parameters, well under MySQL's and MariaDB's 65,535 and the bundled
/// SQLite's 32,766 (`SQLITE_MAX_VARIABLE_NUMBER`, which a build may lower), and about 200 kB of
/// text, under SQLite's default 1 MB statement. What it costs: a beat of more jobs takes one
/// more statement (a round trip) per thousand jobs, plus in MySQL one to take the beat's time
/// and the transaction's begin and commit; a beat of at most 999 jobs stays one statement, as
/// before.
pub const HEARTBEAT_ROWS_PER_STATEMENT: usize = 1_000;

/// MySQL's session variable holding the time of a beat cut into several statements.
const BEAT_AT_VARIABLE: &str = "@lock_heartbeat_at";

/// One statement of a heartbeat's registry upsert, as [`OperationsSql::heartbeat_upserts`]
/// cuts it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HeartbeatUpsert {
    /// The beat's rows it writes: row 0 is the instance's own, row `n` its `n`-th job. Empty
    /// for MySQL's statement that takes the beat's time.
    pub rows: Range<usize>,
    /// The statement: [`HEARTBEAT_PARAMS`] parameters per row of [`rows`](Self::rows), in the
    /// order of [`OperationsSql::heartbeat`], numbered from 1 in each statement.
    pub sql: String,
}

impl HeartbeatUpsert {
    /// The registrations of `beat` whose rows this statement writes, in order: None for the
    /// instance's own row.
    ///
    /// ```
    /// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
    /// # use lock_cluster::{Heartbeat, InstanceInfo, JobRegistration};
    /// # let table = LockTableConfig::default().resolve(IdentifierStyle::ANSI)?;
    /// # let sql = OperationsSql::new(SqlDialect::Sqlite, &table)?;
    /// # let instance = InstanceInfo { instance_id: "a".into(), host: "h".into(), pid: 1,
    /// #     version: "1".into(), started_at: chrono::Utc::now(), clock_offset_ms: 0,
    /// #     heartbeat_ms: 1000 };
    /// let job = JobRegistration { name: "report".into(), lock_name: "report".into(),
    ///     trigger: "fixed delay 5s".into(), zone: None, next_fire: None, following_fire: None };
    /// let beat = Heartbeat { instance, jobs: vec![job.clone()] };
    /// let upserts = sql.heartbeat_upserts(beat.jobs.len() + 1);
    /// let rows: Vec<_> = upserts[0].registrations(&beat).collect();
    /// assert_eq!(rows, [None, Some(&job)]);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn registrations<'a>(
        &self,
        beat: &'a Heartbeat,
    ) -> impl Iterator<Item = Option<&'a JobRegistration>> + 'a {
        self.rows
            .clone()
            .map(move |row| row.checked_sub(1).map(|job| &beat.jobs[job]))
    }
}

/// Where a statement takes its rows' `heartbeat_at` from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BeatAt {
    /// The database's now: the beat's only statement, or its first (with the instance's row).
    Now,
    /// MySQL: [`BEAT_AT_VARIABLE`], set before the beat's first statement.
    Variable,
    /// The instance's own row, written by the beat's first statement (parameter 1, the first
    /// row's instance id, is every row's).
    OwnRow,
}

impl OperationsSql {
    /// The heartbeat's upsert of `rows` registry rows (the instance's own row and one per job)
    /// as one statement: parameters per row, in order, as [`REGISTRY_COLUMNS`] without
    /// `heartbeat_at` (the database's now): instance_id, job_name, lock_name, trigger_text,
    /// zone_name, next_fire, host_name, pid, app_version, started_at, clock_offset_ms,
    /// heartbeat_ms, following_fire (13 per row).
    ///
    /// One statement is bound by the database's parameter limit (about 5,000 rows in MySQL,
    /// 2,500 in SQLite): a provider sends [`heartbeat_upserts`](Self::heartbeat_upserts),
    /// which cuts a larger beat, or [`heartbeat_arrays`](Self::heartbeat_arrays) in
    /// PostgreSQL.
    ///
    /// ```
    /// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
    /// let table = LockTableConfig::default().resolve(IdentifierStyle::MYSQL)?;
    /// let sql = OperationsSql::new(SqlDialect::MySql, &table)?;
    /// assert_eq!(sql.heartbeat(2).matches('?').count(), 26);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn heartbeat(&self, rows: usize) -> String {
        let upsert = self.upsert(rows, BeatAt::Now);
        match self.dialect {
            // One statement: the upsert runs as a data-modifying CTE, and the same round trip
            // brings back the pauses and the pending trigger requests.
            SqlDialect::Postgres => format!("WITH beat AS ({upsert} RETURNING 1) {}", self.poll),
            _ => upsert,
        }
    }

    /// The heartbeat's upsert of `rows` registry rows (the instance's own row first, then one
    /// per job) as the statements to run, in order, on one connection: one statement of
    /// [`heartbeat`](Self::heartbeat)'s form per [`HEARTBEAT_ROWS_PER_STATEMENT`] rows, so that
    /// no statement passes the database's parameter limit, every row getting the same
    /// `heartbeat_at` (the database's now at the first statement). In MySQL a beat of several
    /// statements starts with one that takes that time, without rows. The poll of the control
    /// table is not among them (PostgreSQL's [`heartbeat`](Self::heartbeat) brings it back
    /// itself; run [`poll`](Self::poll) after these).
    ///
    /// A provider runs them in one transaction where the beat has one; MySQL's several
    /// statements in one too, so that a beat is written whole or not at all, as one statement
    /// was.
    ///
    /// ```
    /// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
    /// # use lock_sql::operations_sql::HEARTBEAT_ROWS_PER_STATEMENT;
    /// let table = LockTableConfig::default().resolve(IdentifierStyle::MYSQL)?;
    /// let sql = OperationsSql::new(SqlDialect::MySql, &table)?;
    /// assert_eq!(sql.heartbeat_upserts(3)[0].sql, sql.heartbeat(3));
    /// let upserts = sql.heartbeat_upserts(2_500);
    /// let rows: Vec<_> = upserts.iter().map(|u| u.rows.clone()).collect();
    /// assert_eq!(rows, [0..0, 0..1_000, 1_000..2_000, 2_000..2_500]);
    /// assert_eq!(upserts[3].sql.matches('?').count(), 500 * 13);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn heartbeat_upserts(&self, rows: usize) -> Vec<HeartbeatUpsert> {
        if rows <= HEARTBEAT_ROWS_PER_STATEMENT {
            return vec![HeartbeatUpsert {
                rows: 0..rows,
                sql: self.upsert(rows, BeatAt::Now),
            }];
        }
        let mut upserts = Vec::with_capacity(rows.div_ceil(HEARTBEAT_ROWS_PER_STATEMENT) + 1);
        if self.dialect == SqlDialect::MySql {
            upserts.push(HeartbeatUpsert {
                rows: 0..0,
                sql: format!("SET {BEAT_AT_VARIABLE} = {}", self.dialect.now()),
            });
        }
        for start in (0..rows).step_by(HEARTBEAT_ROWS_PER_STATEMENT) {
            let end = rows.min(start + HEARTBEAT_ROWS_PER_STATEMENT);
            let at = match self.dialect {
                SqlDialect::MySql => BeatAt::Variable,
                _ if start == 0 => BeatAt::Now,
                _ => BeatAt::OwnRow,
            };
            upserts.push(HeartbeatUpsert {
                rows: start..end,
                sql: self.upsert(end - start, at),
            });
        }
        upserts
    }

    /// The upsert of `rows` rows, parameters numbered from 1, `heartbeat_at` from `at`.
    fn upsert(&self, rows: usize, at: BeatAt) -> String {
        let d = self.dialect;
        let beat_at = match at {
            BeatAt::Now => d.now().to_owned(),
            BeatAt::Variable => BEAT_AT_VARIABLE.to_owned(),
            BeatAt::OwnRow => format!(
                "(SELECT heartbeat_at FROM {} WHERE instance_id = {} AND job_name = '')",
                self.instances_qualified,
                d.p(1)
            ),
        };
        let values: Vec<String> = (0..rows)
            .map(|row| {
                let at = |i: usize| d.p(row * HEARTBEAT_PARAMS + i);
                format!(
                    "({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {beat_at}, {}, {}, {})",
                    at(1),
                    at(2),
                    at(3),
                    at(4),
                    at(5),
                    at(6),
                    at(7),
                    at(8),
                    at(9),
                    at(10),
                    at(11),
                    at(12),
                    at(13)
                )
            })
            .collect();
        format!(
            "INSERT INTO {} ({REGISTRY_COLUMNS}) VALUES {} {}",
            self.instances_qualified,
            values.join(", "),
            self.heartbeat_conflict()
        )
    }

    /// PostgreSQL's heartbeat over arrays: the same upsert and poll as
    /// [`heartbeat`](Self::heartbeat), one text whatever the number of rows. A beat of a
    /// thousand jobs is then seven scalar and six array parameters, not 13,000 parameters in a
    /// statement text of its own that the server parses and plans at every beat (tens of
    /// milliseconds of the database's CPU per instance and beat), and no 65,535-parameter
    /// limit to cut it for. What `lock-provider-postgres` and the PostgreSQL backend of
    /// `lock-provider-sqlx` send.
    ///
    /// Parameters: `$1` instance_id, `$2` host_name, `$3` pid (`int8`), `$4` app_version,
    /// `$5` started_at (`timestamp`), `$6` clock_offset_ms (`int8`), `$7` heartbeat_ms
    /// (`int8`), then one array element per row, the instance's own row first (`job_name`
    /// `''`): `$8` job_name (`text[]`), `$9` lock_name (`text[]`), `$10` trigger_text
    /// (`text[]`), `$11` zone_name (`text[]`), `$12` next_fire (`timestamp[]`), `$13`
    /// following_fire (`timestamp[]`). Returns the pauses, pending trigger requests and
    /// `after` requests ([`CONTROL_COLUMNS`](super::CONTROL_COLUMNS)).
    ///
    /// ```
    /// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
    /// let table = LockTableConfig::default().resolve(IdentifierStyle::POSTGRES)?;
    /// let sql = OperationsSql::new(SqlDialect::Postgres, &table)?;
    /// let beat = sql.heartbeat_arrays();
    /// assert!(beat.contains("unnest($8::text[]"));
    /// assert!(!beat.contains("$14"));
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn heartbeat_arrays(&self) -> String {
        let now = self.dialect.now();
        format!(
            "WITH beat AS (INSERT INTO {} ({REGISTRY_COLUMNS}) \
             SELECT $1::text, j.job, j.lock, j.trigger, j.zone, j.next_fire, $2::text, $3::int8, \
             $4::text, $5::timestamp, {now}, $6::int8, $7::int8, j.following \
             FROM unnest($8::text[], $9::text[], $10::text[], $11::text[], $12::timestamp[], \
             $13::timestamp[]) AS j(job, lock, trigger, zone, next_fire, following) {} \
             RETURNING 1) {}",
            self.instances_qualified,
            self.heartbeat_conflict(),
            self.poll
        )
    }

    /// What a heartbeat row does to the row of its (instance, job) that exists.
    fn heartbeat_conflict(&self) -> String {
        let updated = [
            "lock_name",
            "trigger_text",
            "zone_name",
            "next_fire",
            "host_name",
            "pid",
            "app_version",
            "started_at",
            "heartbeat_at",
            "clock_offset_ms",
            "heartbeat_ms",
            "following_fire",
        ];
        match self.dialect {
            SqlDialect::MySql => format!(
                "ON DUPLICATE KEY UPDATE {}",
                updated
                    .iter()
                    .map(|c| format!("{c} = VALUES({c})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            _ => format!(
                "ON CONFLICT (instance_id, job_name) DO UPDATE SET {}",
                updated
                    .iter()
                    .map(|c| format!("{c} = excluded.{c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}
