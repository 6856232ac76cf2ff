//! The alert rules' incidents on Redis: one hash of every incident by key
//! (`{<prefix>:ops}:incidents`, open or resolved, as the SQL stores keep one row per key) and
//! a sorted set of the resolved ones by resolution time (`incidents:resolved`), so that
//! housekeeping deletes the oldest `limit` of them without reading the hash and never sees an
//! open one. Each operation is one script with the server's `TIME`, as every operations
//! script: of concurrent openers (or resolvers) of one key exactly one is told it won.

use lock_cluster::{Incident, MAX_DETAIL_LEN, truncate};
use lock_core::LockError;
use redis::Value;

use super::{required_text, required_time};
use crate::RedisLockProvider;
use crate::scripts::ReplyError;

/// An open incident: `{key, summary, opened_at}`.
pub(super) fn incident_row(row: &[Value]) -> Result<Incident, ReplyError> {
    Ok(Incident {
        key: required_text(row, 0, "key")?,
        summary: required_text(row, 1, "summary")?,
        opened_at: required_time(row, 2, "opening time")?,
    })
}

impl RedisLockProvider {
    /// [`ClusterStore::open_incidents`](lock_cluster::ClusterStore::open_incidents).
    pub(super) async fn read_incidents(&self) -> Result<Vec<Incident>, LockError> {
        let reply: Vec<Vec<Value>> = self
            .ops(
                "incidents",
                "",
                &self.ops_scripts.read_incidents,
                &[&self.keys.ops.incidents],
                &[],
            )
            .await?;
        let mut open = self.rows("incidents", reply, incident_row)?;
        // The SQL providers' order: oldest first, then by key.
        open.sort_by(|a, b| (a.opened_at, &a.key).cmp(&(b.opened_at, &b.key)));
        Ok(open)
    }

    /// [`ClusterStore::open_incident`](lock_cluster::ClusterStore::open_incident).
    pub(super) async fn open_one_incident(
        &self,
        key: &str,
        summary: &str,
    ) -> Result<bool, LockError> {
        let k = &self.keys.ops;
        let opened: i64 = self
            .ops(
                "incidents",
                "",
                &self.ops_scripts.open_incident,
                &[&k.incidents, &k.incidents_resolved],
                &[key.to_owned(), truncate(summary, MAX_DETAIL_LEN).to_owned()],
            )
            .await?;
        Ok(opened == 1)
    }

    /// [`ClusterStore::resolve_incident`](lock_cluster::ClusterStore::resolve_incident).
    pub(super) async fn resolve_one_incident(&self, key: &str) -> Result<bool, LockError> {
        let k = &self.keys.ops;
        let resolved: i64 = self
            .ops(
                "incidents",
                "",
                &self.ops_scripts.resolve_incident,
                &[&k.incidents, &k.incidents_resolved],
                &[key.to_owned()],
            )
            .await?;
        Ok(resolved == 1)
    }
}
