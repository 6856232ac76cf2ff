//! The key layout: one hash per lock, `<prefix>:<name>`, the prefix's lock index
//! `<prefix>\0locks`, and the operations keys (registry, run history, control, action log,
//! incidents) under `{<prefix>:ops}:`.
//!
//! The lock index is the set of this prefix's lock names, added to by every grant (in the
//! acquire script), so that `list_locks` reads it instead of a `SCAN` of the keyspace, and
//! `force_unlock` and `reset_slot` act only on its members: a provider with prefix `billing`
//! neither lists nor unlocks `billing:eu:report`, the lock `report` of prefix `billing:eu`.
//! Its name holds a NUL, which no prefix holds (printable ASCII) and no lock name of any
//! prefix can end the key with (`<p>:<name>` is this key only for a name holding the NUL), and
//! it is not under `<prefix>:`. It starts with the prefix, so with a hash tag in the prefix
//! (`{shedlock}`) it shares the locks' Redis Cluster slot and the scripts update it
//! atomically; on a cluster with a prefix without one, the locks are in every slot, so the
//! index is not kept and `list_locks` falls back to a `SCAN` of the node it asks.
//!
//! One key per lock is what makes every lock script a single-key script, so the locks work
//! unchanged on Redis Cluster (each lock lives in the slot of its own key). A prefix with a
//! hash tag (`{shedlock}`) puts every lock in one slot instead, so that `list_locks` finds them
//! all on one node.
//!
//! The operations keys all start with `{<prefix>:ops}`, a hash tag of their own: they share
//! one cluster slot, so each operations script, which touches several of them, runs on one
//! node and declares every key it touches. (A prefix starting with `}` would make that tag
//! empty, and Redis would hash each whole key: [`RedisLockConfig::validate`] refuses it.) They start with `{`, so they are never under
//! `<prefix>:` (the lock keys' `SCAN` pattern) and no lock name can collide with them.

use crate::config::RedisLockConfig;

/// The keys of one configuration.
#[derive(Clone, Debug)]
pub(crate) struct KeyLayout {
    /// `<prefix>:`
    head: String,
    /// `<prefix>\0locks`: the set of this prefix's lock names.
    pub(crate) index: String,
    /// The prefix holds a hash tag: every lock key and the index share one cluster slot.
    pub(crate) tagged: bool,
    /// The operations keys.
    pub(crate) ops: OpsKeys,
}

/// The operations keys of one prefix, `{<prefix>:ops}:<what>` (see the crate's README, "The
/// operations keys").
#[derive(Clone, Debug)]
pub(crate) struct OpsKeys {
    /// `{<prefix>:ops}`: the common head and hash tag.
    pub(crate) base: String,
    /// Hash: the id counters, fields `run` and `control`.
    pub(crate) ids: String,
    /// Hash: the registry, field `["<instance>","<job>"]` (job `""` for the instance's own
    /// row), value the row as JSON.
    pub(crate) instances: String,
    /// Sorted set: each registry field scored by its last heartbeat (ms), for housekeeping.
    pub(crate) heartbeats: String,
    /// Hash: run id to the run as JSON.
    pub(crate) runs: String,
    /// Sorted set: run ids (20 digits, so that runs started in one millisecond go in id
    /// order) scored by start (ms), for housekeeping.
    pub(crate) runs_started: String,
    /// Sorted set, all scores 0: `<len>:<job>:<id, 20 digits>`, a job's runs in id order (a
    /// lexicographic range per job).
    pub(crate) runs_by_job: String,
    /// Hash: job to its newest run id.
    pub(crate) runs_last: String,
    /// Hash: job to the end (ms) of its latest successful run.
    pub(crate) runs_succeeded: String,
    /// Hash: run id to the run's log lines (`RunLog::as_stored`), for the runs that kept
    /// any; apart from `runs`, so that the history reads never decode them.
    pub(crate) runs_logs: String,
    /// Hash: control id to the pause, trigger or after request as JSON.
    pub(crate) control: String,
    /// Sorted set: pauses, unclaimed trigger requests and after requests (what a heartbeat
    /// returns), scored by id.
    pub(crate) control_open: String,
    /// Hash: paused job to its pause's control id.
    pub(crate) control_paused: String,
    /// Sorted set: claimed trigger requests scored by claim time (ms), for housekeeping.
    pub(crate) control_claimed: String,
    /// Sorted set, all scores 0: `<len>:<child>:<slot, 20 digits>:<id, 20 digits>`, the after
    /// requests, a lexicographic range per child and within it per slot (`after_requests`,
    /// `delete_after` read their range alone).
    pub(crate) control_after: String,
    /// Sorted set: the members of `control_after` scored by request time (ms), for
    /// housekeeping.
    pub(crate) control_after_requested: String,
    /// Sorted set: each job with an action log, scored by the time (ms) of its oldest row,
    /// for housekeeping.
    pub(crate) actions_jobs: String,
    /// Hash: incident key to the incident as JSON (summary, opened, resolved when it is),
    /// open or resolved: one field per key, as the SQL stores keep one row.
    pub(crate) incidents: String,
    /// Sorted set: the resolved incidents' keys scored by resolution (ms), for housekeeping
    /// (an open incident is never in it, so never deleted).
    pub(crate) incidents_resolved: String,
}

impl OpsKeys {
    fn new(prefix: &str) -> Self {
        let base = format!("{{{prefix}:ops}}");
        let key = |what: &str| format!("{base}:{what}");
        OpsKeys {
            ids: key("ids"),
            instances: key("instances"),
            heartbeats: key("heartbeats"),
            runs: key("runs"),
            runs_started: key("runs:started"),
            runs_by_job: key("runs:by_job"),
            runs_last: key("runs:last"),
            runs_succeeded: key("runs:succeeded"),
            runs_logs: key("runs:logs"),
            control: key("control"),
            control_open: key("control:open"),
            control_paused: key("control:paused"),
            control_claimed: key("control:claimed"),
            control_after: key("control:after"),
            control_after_requested: key("control:after:requested"),
            actions_jobs: key("actions:jobs"),
            incidents: key("incidents"),
            incidents_resolved: key("incidents:resolved"),
            base,
        }
    }

    /// Every key with the Redis type it must have, for `check`.
    pub(crate) fn typed(&self) -> [(&str, &'static str); 18] {
        [
            (&self.ids, "hash"),
            (&self.instances, "hash"),
            (&self.heartbeats, "zset"),
            (&self.runs, "hash"),
            (&self.runs_started, "zset"),
            (&self.runs_by_job, "zset"),
            (&self.runs_last, "hash"),
            (&self.runs_succeeded, "hash"),
            (&self.runs_logs, "hash"),
            (&self.control, "hash"),
            (&self.control_open, "zset"),
            (&self.control_paused, "hash"),
            (&self.control_claimed, "zset"),
            (&self.control_after, "zset"),
            (&self.control_after_requested, "zset"),
            (&self.actions_jobs, "zset"),
            (&self.incidents, "hash"),
            (&self.incidents_resolved, "zset"),
        ]
    }

    /// List: `job`'s action log, newest first, as JSON rows, capped at
    /// [`ACTIONS_PER_JOB`](crate::operations::ACTIONS_PER_JOB). `<len>:<job>` after the
    /// head, so that no job's key is another's whatever the names hold; the hash tag is the
    /// head's, so it shares the other operations keys' slot.
    pub(crate) fn actions_of(&self, job: &str) -> String {
        format!("{}:actions:job:{}:{job}", self.base, job.len())
    }

    /// The `SCAN MATCH` pattern of every operations key (the prefix holds no glob character,
    /// and `{`, `}` are not glob characters).
    pub(crate) fn pattern(&self) -> String {
        format!("{}:*", self.base)
    }
}

impl KeyLayout {
    /// The layout of a validated configuration.
    pub(crate) fn new(config: &RedisLockConfig) -> Self {
        let prefix = &config.key_prefix;
        KeyLayout {
            head: format!("{prefix}:"),
            index: format!("{prefix}\0locks"),
            tagged: hash_tag(prefix) != prefix,
            ops: OpsKeys::new(&config.key_prefix),
        }
    }

    /// The hash of lock `name`.
    pub(crate) fn key(&self, name: &str) -> String {
        format!("{}{name}", self.head)
    }

    /// The `SCAN MATCH` pattern of every lock: the prefix holds no glob character
    /// ([`RedisLockConfig::validate`]), so only the `*` matches freely.
    pub(crate) fn pattern(&self) -> String {
        format!("{}*", self.head)
    }

    /// The lock name of `key`, if it is one of this layout's keys.
    pub(crate) fn name_of<'k>(&self, key: &'k str) -> Option<&'k str> {
        key.strip_prefix(&self.head).filter(|name| !name.is_empty())
    }
}

/// The hash tag Redis Cluster hashes a key by: what lies between the first `{` and the first
/// `}` after it, if not empty; else the whole key. Keys of one tag are in one cluster slot.
pub(crate) fn hash_tag(key: &str) -> &str {
    if let Some(open) = key.find('{')
        && let Some(len) = key[open + 1..].find('}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_names_round_trip() {
        let layout = KeyLayout::new(&RedisLockConfig::default().with_key_prefix("{ops}"));
        assert_eq!(layout.key("report:daily"), "{ops}:report:daily");
        assert_eq!(layout.pattern(), "{ops}:*");
        assert_eq!(layout.name_of("{ops}:report:daily"), Some("report:daily"));
        assert_eq!(layout.name_of("{ops}:"), None);
        assert_eq!(layout.name_of("other:report"), None);
    }

    #[test]
    fn the_lock_index_is_no_lock_and_shares_a_tagged_prefixs_slot() {
        let tagged = KeyLayout::new(&RedisLockConfig::default().with_key_prefix("{ops}:eu"));
        assert!(tagged.tagged);
        assert_eq!(hash_tag(&tagged.index), hash_tag(&tagged.key("report")));
        assert_eq!(tagged.name_of(&tagged.index), None);
        let parent = KeyLayout::new(&RedisLockConfig::default().with_key_prefix("{ops}"));
        // The nested prefix's index is under the parent's head, but no lock name has a NUL.
        assert!(
            parent
                .name_of(&tagged.index)
                .is_some_and(|name| name.contains('\0'))
        );
        for untagged in ["shedlock", "a{b", "{}x"] {
            let layout = KeyLayout::new(&RedisLockConfig::default().with_key_prefix(untagged));
            assert!(!layout.tagged, "{untagged}");
        }
    }

    #[test]
    fn the_operations_keys_share_one_slot_and_stay_out_of_the_lock_pattern() {
        for prefix in [
            "shedlock",
            "{locks}",
            "a}b",
            "billing:locks",
            "{",
            "{}",
            "x}",
        ] {
            let layout = KeyLayout::new(&RedisLockConfig::default().with_key_prefix(prefix));
            let keys = layout.ops.typed();
            let tag = hash_tag(keys[0].0);
            for (key, _) in keys {
                assert_eq!(hash_tag(key), tag, "{prefix}: {key}");
                assert!(key.starts_with(&layout.ops.base), "{key}");
                // `<prefix>:*` would list it as a lock.
                assert!(layout.name_of(key).is_none(), "{prefix}: {key}");
            }
            // A job's action list too, whatever the job's name holds.
            for job in ["report", "{x}", "}", "a:b"] {
                let key = layout.ops.actions_of(job);
                assert_eq!(hash_tag(&key), tag, "{prefix}: {key}");
                assert!(layout.name_of(&key).is_none(), "{prefix}: {key}");
            }
        }
        let layout = KeyLayout::new(&RedisLockConfig::default());
        assert_eq!(layout.ops.runs, "{shedlock:ops}:runs");
        assert_eq!(
            layout.ops.actions_of("report"),
            "{shedlock:ops}:actions:job:6:report"
        );
        assert_eq!(layout.ops.pattern(), "{shedlock:ops}:*");
    }
}
