//! Batches: the acquires (or releases) of one instance that come due together, decided by one
//! script call ([`ACQUIRE_MANY`](crate::lua::ACQUIRE_MANY),
//! [`RELEASE_MANY`](crate::lua::RELEASE_MANY)) instead of one round trip each.
//!
//! Decisions, and why:
//! - **One script, one clock reading.** The script runs the single acquire's logic for each
//!   key in order, on the server's `TIME` read once, so every outcome is exactly what that
//!   many [`ACQUIRE`](crate::lua::ACQUIRE)s would have answered (a name twice in one batch is
//!   granted at most once), and a loser still writes nothing. A script is atomic on the
//!   server: batches of several instances cannot interleave, let alone deadlock.
//! - **Redis Cluster**: a script may only touch keys of one hash slot. Keys that share a hash
//!   tag (a prefix such as `{locks}`) always do, so they stay one call. The provider tries the
//!   whole batch as one call first; when the server answers `CROSSSLOT` (nothing ran), it
//!   remembers that it talks to a cluster and from then on groups the keys by hash tag, one
//!   call per group, sent together on the multiplexed connection.
//! - **[`MAX_BATCH`](crate::provider::MAX_BATCH) is 256** keys: a script blocks the server while it runs, and 256 acquires
//!   take well under a millisecond there.
//! - **Replica acknowledgements** ([`ReplicaAcks`](crate::ReplicaAcks)): one `WAIT` covers every
//!   grant of the call; when too few replicas acknowledged, each grant is released again and
//!   the batch fails, as a single acquire does.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use lock_core::encoding::{at_least_millis, fence_to_sql, lease_millis};
use lock_core::{AcquireOutcome, Lease, LockError, LockRequest, validate_lock_name};
use redis::{ErrorKind, Script, ServerErrorKind, Value};

use crate::RedisLockProvider;
use crate::keys::hash_tag;
use crate::provider::{acquire_outcome, give_up_at_arg};

impl RedisLockProvider {
    /// [`LockProvider::acquire_many`](lock_core::LockProvider::acquire_many) on Redis.
    pub(crate) async fn acquire_batch(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        let mut args = Vec::with_capacity(requests.len());
        for request in requests {
            validate_lock_name(&request.name)?;
            let slot = request
                .slot
                .map_or(String::new(), |slot| slot.unix_millis().to_string());
            let lead = i64::try_from(request.max_slot_lead.as_millis()).unwrap_or(i64::MAX);
            args.push([
                request.locked_by.to_string(),
                lease_millis(request.lock_at_most_for).to_string(),
                slot,
                lead.to_string(),
                give_up_at_arg(request),
                request.name.to_string(),
            ]);
        }
        let names: Vec<&str> = requests.iter().map(|r| &*r.name).collect();
        let replies: Vec<Vec<Value>> = self
            .run_many("acquire", &self.scripts.acquire_many, &names, &args, true)
            .await?;
        let outcomes = requests
            .iter()
            .zip(&replies)
            .map(|(request, reply)| {
                acquire_outcome(request, reply).map_err(|e| self.error("acquire", &request.name, e))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(acks) = self.config.replica_acks {
            let granted: Vec<&Lease> = outcomes
                .iter()
                .filter_map(|o| match o {
                    AcquireOutcome::Acquired(lease) => Some(lease),
                    AcquireOutcome::Refused(_) => None,
                })
                .collect();
            if let Some(first) = granted.first() {
                // `wait_for_replicas` releases its own lease when too few acknowledged; the
                // others of the call are released here.
                if let Err(error) = self.wait_for_replicas(first, acks).await {
                    for lease in &granted[1..] {
                        let _ = lock_core::LockProvider::release(self, lease, Duration::ZERO).await;
                    }
                    return Err(error);
                }
            }
        }
        Ok(outcomes)
    }

    /// [`LockProvider::release_many`](lock_core::LockProvider::release_many) on Redis.
    pub(crate) async fn release_batch(
        &self,
        leases: &[(Lease, Duration)],
    ) -> Result<Vec<bool>, LockError> {
        let args: Vec<[String; 3]> = leases
            .iter()
            .map(|(lease, at_least)| {
                [
                    lease.locked_by().to_owned(),
                    fence_to_sql(lease).to_string(),
                    at_least_millis(*at_least).to_string(),
                ]
            })
            .collect();
        let names: Vec<&str> = leases.iter().map(|(lease, _)| lease.name()).collect();
        let released: Vec<i64> = self
            .run_many("release", &self.scripts.release_many, &names, &args, false)
            .await?;
        Ok(released.into_iter().map(|r| r == 1).collect())
    }

    /// Runs `script` over the keys of `names` with `args` (one group per key), as one call,
    /// or one call per hash tag once the server has said it is a cluster. With `indexed`, the
    /// prefix's lock index follows the locks' keys where it shares their slot
    /// ([`index_key`](RedisLockProvider::index_key)). The replies come back in the order of
    /// `names`.
    async fn run_many<T: redis::FromRedisValue, const N: usize>(
        &self,
        operation: &'static str,
        script: &Script,
        names: &[&str],
        args: &[[String; N]],
        indexed: bool,
    ) -> Result<Vec<T>, LockError> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = names.iter().map(|name| self.keys.key(name)).collect();
        if !self.cross_slot.load(Ordering::Relaxed) {
            let all: Vec<usize> = (0..keys.len()).collect();
            match self.invoke(script, &keys, args, &all, indexed).await {
                Ok(replies) => return self.check_len(operation, names[0], keys.len(), replies),
                Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::CrossSlot) => {
                    self.learn_cross_slot();
                }
                Err(e) => return Err(self.error(operation, names[0], e)),
            }
        }
        let mut groups: HashMap<&str, Vec<usize>> = HashMap::new();
        for (index, key) in keys.iter().enumerate() {
            groups.entry(hash_tag(key)).or_default().push(index);
        }
        let calls = groups
            .values()
            .map(|indices| self.invoke::<T, N>(script, &keys, args, indices, indexed));
        let answers = futures_util::future::join_all(calls).await;
        let mut replies: Vec<Option<T>> = (0..keys.len()).map(|_| None).collect();
        for (indices, answer) in groups.values().zip(answers) {
            let answer = answer.map_err(|e| self.error(operation, names[indices[0]], e))?;
            let answer = self.check_len(operation, names[indices[0]], indices.len(), answer)?;
            for (index, reply) in indices.iter().zip(answer) {
                replies[*index] = Some(reply);
            }
        }
        // Every index is in exactly one group, and every group's answer has one reply per index.
        Ok(replies.into_iter().flatten().collect())
    }

    /// One script call over the keys at `indices` (and the lock index, with `indexed`).
    async fn invoke<T: redis::FromRedisValue, const N: usize>(
        &self,
        script: &Script,
        keys: &[String],
        args: &[[String; N]],
        indices: &[usize],
        indexed: bool,
    ) -> redis::RedisResult<Vec<T>> {
        let mut invocation = script.prepare_invoke();
        for &index in indices {
            invocation.key(&keys[index]);
            for arg in &args[index] {
                invocation.arg(arg);
            }
        }
        if let Some(index) = self.index_key().filter(|_| indexed) {
            invocation.key(index);
        }
        let mut conn = self.conn.clone();
        invocation.invoke_async(&mut conn).await
    }

    /// `replies`, if there is one per key (`expected`).
    fn check_len<T>(
        &self,
        operation: &'static str,
        name: &str,
        expected: usize,
        replies: Vec<T>,
    ) -> Result<Vec<T>, LockError> {
        if replies.len() != expected {
            return Err(self.error(
                operation,
                name,
                format!("{} replies to a script over {expected} keys", replies.len()),
            ));
        }
        Ok(replies)
    }
}
