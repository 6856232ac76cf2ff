//! The alert rules' incidents on Redis: one hash of every incident by key
//! (`{<prefix>:ops}:incidents`, open or resolved, as JSON) and a sorted set of the resolved
//! ones scored by their resolution, for housekeeping. Each operation is one script, so of
//! concurrent openers (or resolvers) of one key exactly one changes it.

use lock_cluster::{Incident, MAX_DETAIL_LEN, truncate};
use lock_core::LockError;
use redis::Value;

use super::{required_text, required_time};
use crate::RedisLockProvider;
use crate::scripts::ReplyError;

/// An open incident: `{key, summary, opened_at}`.
fn incident_row(row: &[Value]) -> Result<Incident, ReplyError> {
    Ok(Incident {
        key: required_text(row, 0, "key")?,
        summary: required_text(row, 1, "summary")?,
        opened_at: required_time(row, 2, "opening")?,
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
                key,
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
                key,
                &self.ops_scripts.resolve_incident,
                &[&k.incidents, &k.incidents_resolved],
                &[key.to_owned()],
            )
            .await?;
        Ok(resolved == 1)
    }

    /// Housekeeping of the incidents resolved before `cut` (ms, exclusive), at most `limit`.
    pub(super) async fn delete_incidents(&self, cut: String, limit: u32) -> Result<i64, LockError> {
        let k = &self.keys.ops;
        self.ops(
            "housekeeping",
            "",
            &self.ops_scripts.delete_incidents,
            &[&k.incidents, &k.incidents_resolved],
            &[cut, limit.to_string()],
        )
        .await
    }
}
