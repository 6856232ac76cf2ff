//! The complete heartbeat's second statement (see
//! [`ClusterStore::heartbeat`](lock_cluster::ClusterStore::heartbeat)).

use super::{OperationsSql, SqlDialect};

impl OperationsSql {
    /// The second statement of a complete heartbeat, sent after its upsert: deletes the
    /// instance's job rows written before the instance's own row (the jobs the upsert did not
    /// carry, as every row it wrote has the same `heartbeat_at`). One parameter: the
    /// instance id.
    ///
    /// ```
    /// # use lock_sql::{IdentifierStyle, LockTableConfig, OperationsSql, SqlDialect};
    /// let table = LockTableConfig::default().resolve(IdentifierStyle::MYSQL)?;
    /// let sql = OperationsSql::new(SqlDialect::MySql, &table)?;
    /// assert_eq!(sql.prune_jobs().matches('?').count(), 1);
    /// # Ok::<(), lock_core::LockError>(())
    /// ```
    pub fn prune_jobs(&self) -> String {
        let t = &self.instances_qualified;
        match self.dialect {
            // A self-join: MySQL refuses a subquery on the table a DELETE deletes from.
            SqlDialect::MySql => format!(
                "DELETE j FROM {t} AS j JOIN {t} AS own ON own.instance_id = j.instance_id \
                 AND own.job_name = '' WHERE j.instance_id = ? AND j.job_name <> '' \
                 AND j.heartbeat_at < own.heartbeat_at"
            ),
            d => {
                let id = d.p(1);
                format!(
                    "DELETE FROM {t} WHERE instance_id = {id} AND job_name <> '' AND heartbeat_at < \
                     (SELECT heartbeat_at FROM {t} WHERE instance_id = {id} AND job_name = '')"
                )
            }
        }
    }
}
