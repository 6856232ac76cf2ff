//! The action log on Redis: a capped list per job (`{<prefix>:ops}:actions:job:<len>:<job>`,
//! newest first, at most [`ACTIONS_PER_JOB`] rows) and a sorted set of the jobs scored by
//! their oldest row, for housekeeping. Times from the server's `TIME`, as every operations
//! script.

use lock_cluster::ActionRecord;
use lock_core::LockError;
use redis::Value;

use super::{field, required_int, required_text, required_time};
use crate::RedisLockProvider;
use crate::scripts::{ReplyError, text};

/// The most rows the action log keeps per job on Redis: the oldest go first when a job's
/// list grows past it (the SQL tables keep every row until housekeeping).
pub const ACTIONS_PER_JOB: usize = 1000;

/// An action: `{id, at, job, action, requested_by, detail}`.
fn action_row(row: &[Value]) -> Result<ActionRecord, ReplyError> {
    Ok(ActionRecord::read(
        required_int(row, 0, "id")?,
        required_time(row, 1, "time")?,
        required_text(row, 2, "job")?,
        // An unknown action written by hand reads as an unlock, as in the SQL providers.
        required_text(row, 3, "action")?
            .parse()
            .unwrap_or(lock_cluster::Action::Unlock),
        required_text(row, 4, "requester")?,
        text(field(row, 5))?,
    ))
}

impl RedisLockProvider {
    /// [`OperatorStore::record_action`](lock_cluster::OperatorStore::record_action).
    pub(super) async fn push_action(&self, action: &ActionRecord) -> Result<(), LockError> {
        let k = &self.keys.ops;
        let (job, requested_by, detail) = action.truncated();
        let _id: i64 = self
            .ops(
                "action log",
                job,
                &self.ops_scripts.record_action,
                &[&k.ids, &k.actions_jobs, &k.actions_of(job)],
                &[
                    job.to_owned(),
                    action.action.as_str().to_owned(),
                    requested_by.to_owned(),
                    detail.unwrap_or_default().to_owned(),
                    if detail.is_some() { "1" } else { "0" }.to_owned(),
                    ACTIONS_PER_JOB.to_string(),
                ],
            )
            .await?;
        Ok(())
    }

    /// [`OperatorStore::actions`](lock_cluster::OperatorStore::actions).
    pub(super) async fn read_actions(
        &self,
        job: &str,
        limit: u32,
    ) -> Result<Vec<ActionRecord>, LockError> {
        let reply: Vec<Vec<Value>> = self
            .ops(
                "action log",
                job,
                &self.ops_scripts.read_actions,
                &[&self.keys.ops.actions_of(job)],
                &[limit.to_string()],
            )
            .await?;
        self.rows("action log", reply, action_row)
    }

    /// Housekeeping of the action log: the jobs with rows before `cut` (ms, exclusive), at
    /// most `limit` of them, then one script over their lists (every key it touches declared).
    pub(super) async fn delete_actions(&self, cut: String, limit: u32) -> Result<i64, LockError> {
        let k = &self.keys.ops;
        let mut conn = self.conn.clone();
        let jobs: Vec<String> = redis::cmd("ZRANGEBYSCORE")
            .arg(&k.actions_jobs)
            .arg("-inf")
            .arg(format!("({cut}"))
            .arg("LIMIT")
            .arg(0)
            .arg(limit)
            .query_async(&mut conn)
            .await
            .map_err(|e| self.ops_error("housekeeping", "", e))?;
        if jobs.is_empty() || limit == 0 {
            return Ok(0);
        }
        let lists: Vec<String> = jobs.iter().map(|job| k.actions_of(job)).collect();
        let keys: Vec<&str> = std::iter::once(k.actions_jobs.as_str())
            .chain(lists.iter().map(String::as_str))
            .collect();
        let args: Vec<String> = [cut, limit.to_string()].into_iter().chain(jobs).collect();
        self.ops(
            "housekeeping",
            "",
            &self.ops_scripts.delete_actions,
            &keys,
            &args,
        )
        .await
    }
}
