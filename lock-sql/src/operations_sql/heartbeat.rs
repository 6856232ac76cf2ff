//! The heartbeat's registry upsert, written for any number of rows.

use super::{OperationsSql, REGISTRY_COLUMNS, SqlDialect};

impl OperationsSql {
    /// The heartbeat's upsert of `rows` registry rows (the instance's own row and one per job):
    /// parameters per row, in order, as [`REGISTRY_COLUMNS`] without `heartbeat_at` (the
    /// database's now): instance_id, job_name, lock_name, trigger_text, zone_name, next_fire,
    /// host_name, pid, app_version, started_at, clock_offset_ms, heartbeat_ms, following_fire
    /// (13 per row).
    ///
    /// ```
    /// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
    /// let table = LockTableConfig::default().resolve(IdentifierStyle::MYSQL)?;
    /// let sql = OperationsSql::new(SqlDialect::MySql, &table)?;
    /// assert_eq!(sql.heartbeat(2).matches('?').count(), 26);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn heartbeat(&self, rows: usize) -> String {
        let d = self.dialect;
        let now = d.now();
        let values: Vec<String> = (0..rows)
            .map(|row| {
                let at = |i: usize| d.p(row * HEARTBEAT_PARAMS + i);
                format!(
                    "({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {now}, {}, {}, {})",
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
        let upsert = format!(
            "INSERT INTO {} ({REGISTRY_COLUMNS}) VALUES {} {}",
            self.instances_qualified,
            values.join(", "),
            self.heartbeat_conflict()
        );
        match d {
            // One statement: the upsert runs as a data-modifying CTE, and the same round trip
            // brings back the pauses and the pending trigger requests.
            SqlDialect::Postgres => format!("WITH beat AS ({upsert} RETURNING 1) {}", self.poll),
            _ => upsert,
        }
    }

    /// PostgreSQL's heartbeat over arrays: the same upsert and poll as
    /// [`heartbeat`](Self::heartbeat), one text whatever the number of rows. A beat of a
    /// thousand jobs is then seven scalar and six array parameters, not 13,000 parameters in a
    /// statement text of its own that the server parses and plans at every beat (tens of
    /// milliseconds of the database's CPU per instance and beat), and it has no 65,535
    /// parameter limit (about 5,000 jobs).
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

/// Parameters per registry row in [`OperationsSql::heartbeat`].
pub const HEARTBEAT_PARAMS: usize = 13;
