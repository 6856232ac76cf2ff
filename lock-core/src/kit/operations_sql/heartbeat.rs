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
    /// # use lock_core::kit::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
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
        let update = match d {
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
        };
        let upsert = format!(
            "INSERT INTO {} ({REGISTRY_COLUMNS}) VALUES {} {update}",
            self.instances_qualified,
            values.join(", ")
        );
        match d {
            // One statement: the upsert runs as a data-modifying CTE, and the same round trip
            // brings back the pauses and the pending trigger requests.
            SqlDialect::Postgres => format!("WITH beat AS ({upsert} RETURNING 1) {}", self.poll),
            _ => upsert,
        }
    }
}

/// Parameters per registry row in [`OperationsSql::heartbeat`].
pub const HEARTBEAT_PARAMS: usize = 13;
