//! The operations keys (job registry, run history, pauses and trigger requests, the action
//! log and the alert rules' incidents) of a [`RedisLockProvider`]: the
//! [`Cluster`](lock_cluster::Cluster) on Redis, one Lua script per operation
//! (`operations/scripts.rs`), every time from the server's `TIME`.
//!
//! The keys are all under `{<prefix>:ops}:` (see `keys.rs` and the crate's README, "The
//! operations keys"): one cluster slot, outside the lock keys' `SCAN` pattern. Redis has no
//! tables to create, so [`check`](ClusterStore::check) only makes sure no key of another
//! type sits where an operations key goes.
//!
//! Decisions, and why:
//! - **A dependent job's `after` requests are control rows** (kind `after`, pending while
//!   they exist, so every heartbeat returns them as it returns pauses), indexed per child and
//!   slot in one lexicographic sorted set (`control:after`), so that `after_requests` and
//!   `delete_after` read the child's range alone, never every control row. Its slot must not
//!   be before 1970: the index keeps it as 20 digits.
//! - **A stored parameters text that does not decode is an error naming the row** (control
//!   request or run, its id and job), in every read, the heartbeat's too. This provider only
//!   stores what [`Params::encode`] wrote from checked parameters, so such a text was written
//!   by hand or by something else; reading it as "no parameters" would run a manual job
//!   without what was asked (a `dry_run=true` lost) or show a history row that lies, and
//!   leaving the row out would hide it. While the heartbeat fails, an instance keeps the
//!   pauses it last saw and logs it once; withdrawing the request (or rewriting the field)
//!   ends it.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_cluster::{
    ActionRecord, ClusterStore, ControlKind, ControlRequest, Expired, Heartbeat, Incident,
    InstanceInfo, JobRegistration, MAX_ERROR_LEN, OperatorStore, RegistryRow, RunEnd, RunLog,
    RunRecord, RunStart, RunState, truncate,
};
use lock_core::{FireKind, LockError, Params};
use redis::{Script, Value};

use crate::RedisLockProvider;
use crate::scripts::{ReplyError, int, opt_time, text, time};

mod actions;
mod incidents;
pub(crate) mod scripts;

pub use actions::ACTIONS_PER_JOB;

/// The most after requests one `delete_after` script deletes (it is called again while a
/// batch is full): a script blocks the server while it runs.
const DELETE_AFTER_BATCH: u64 = 1000;

/// A time as the operations keys store it: whole milliseconds since the epoch (as the lock
/// hashes; times reach here at that precision already).
fn millis(at: DateTime<Utc>) -> String {
    at.timestamp_millis().to_string()
}

fn opt_millis(at: Option<DateTime<Utc>>) -> String {
    at.map(millis).unwrap_or_default()
}

/// A housekeeping cut-off in whole milliseconds, for `score < cut`: rounded up, so that a
/// stored (whole) millisecond is below it exactly when it is before `before`.
fn cut_off(before: DateTime<Utc>) -> String {
    let ms = before.timestamp_millis();
    let sub_ms = !before.timestamp_subsec_nanos().is_multiple_of(1_000_000);
    (ms + i64::from(sub_ms)).to_string()
}

impl RedisLockProvider {
    /// Runs operations script `script` on `keys` with `args`: EVALSHA, and EVAL again after
    /// `NOSCRIPT`.
    async fn ops<T: redis::FromRedisValue>(
        &self,
        operation: &'static str,
        job: &str,
        script: &Script,
        keys: &[&str],
        args: &[String],
    ) -> Result<T, LockError> {
        let mut invocation = script.prepare_invoke();
        for key in keys {
            invocation.key(*key);
        }
        for arg in args {
            invocation.arg(arg);
        }
        let mut conn = self.conn.clone();
        invocation
            .invoke_async(&mut conn)
            .await
            .map_err(|e| self.ops_error(operation, job, e))
    }

    fn ops_error(
        &self,
        operation: &'static str,
        job: &str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> LockError {
        let backend = match &self.server {
            Some(server) => format!("{} on {server}", self.tables()),
            None => self.tables(),
        };
        LockError::provider(operation, job, backend, source)
    }

    /// Rows a script returned, each parsed by `parse`.
    fn rows<T>(
        &self,
        operation: &'static str,
        reply: Vec<Vec<Value>>,
        parse: fn(&[Value]) -> Result<T, ReplyError>,
    ) -> Result<Vec<T>, LockError> {
        reply
            .iter()
            .map(|row| parse(row.as_slice()))
            .collect::<Result<_, _>>()
            .map_err(|e| self.ops_error(operation, "", e))
    }
}

fn field(row: &[Value], i: usize) -> &Value {
    row.get(i).unwrap_or(&Value::Nil)
}

fn required_text(row: &[Value], i: usize, what: &str) -> Result<String, ReplyError> {
    text(field(row, i))?.ok_or_else(|| format!("a row without its {what}"))
}

fn required_int(row: &[Value], i: usize, what: &str) -> Result<i64, ReplyError> {
    int(field(row, i))?.ok_or_else(|| format!("a row without its {what}"))
}

fn required_time(row: &[Value], i: usize, what: &str) -> Result<DateTime<Utc>, ReplyError> {
    time(required_int(row, i, what)?)
}

/// The parameters stored in field `i` (none when absent), checked again by
/// [`Params::decode`]; `row` names the row in the error (see the module's decisions).
fn params(
    row_values: &[Value],
    i: usize,
    row: impl FnOnce() -> String,
) -> Result<Params, ReplyError> {
    match text(field(row_values, i))? {
        None => Ok(Params::new()),
        Some(stored) => Params::decode(&stored)
            .map_err(|e| format!("{}: its stored parameters do not decode: {e}", row())),
    }
}

/// A control row: `{id, job, kind, requested_at, requested_by, claimed_by, claimed_at, slot,
/// params}`.
fn control_row(row: &[Value]) -> Result<ControlRequest, ReplyError> {
    let id = required_int(row, 0, "id")?;
    let job = required_text(row, 1, "job")?;
    let params = params(row, 8, || {
        format!("control request {id} of job `{job}` (withdraw it, or rewrite its `params`)")
    })?;
    Ok(ControlRequest {
        id,
        job,
        // An unknown kind written by hand reads as a trigger request nobody runs, as in the
        // SQL providers.
        kind: required_text(row, 2, "kind")?
            .parse()
            .unwrap_or(ControlKind::Trigger),
        requested_at: required_time(row, 3, "request time")?,
        requested_by: required_text(row, 4, "requester")?,
        claimed_by: text(field(row, 5))?,
        claimed_at: opt_time(field(row, 6))?,
        slot: opt_time(field(row, 7))?,
        params,
    })
}

/// A run: `{id, job, slot, fire_kind, instance_id, fence, started_at, ended_at, outcome,
/// error, attempt, cancel_requested, params}`.
fn run_row(row: &[Value]) -> Result<RunRecord, ReplyError> {
    let id = required_int(row, 0, "id")?;
    let job = required_text(row, 1, "job")?;
    let params = params(row, 12, || format!("run {id} of job `{job}`"))?;
    Ok(RunRecord {
        id,
        job,
        slot: opt_time(field(row, 2))?,
        fire_kind: required_text(row, 3, "fire kind")?
            .parse()
            .unwrap_or(FireKind::Scheduled),
        instance_id: required_text(row, 4, "instance")?,
        fence: lock_core::encoding::fence_from_sql(required_int(row, 5, "fence")?),
        started_at: required_time(row, 6, "start")?,
        ended_at: opt_time(field(row, 7))?,
        outcome: required_text(row, 8, "outcome")?
            .parse()
            .unwrap_or(RunState::Running),
        error: text(field(row, 9))?,
        // Absent from a run stored before they existed: its only attempt, not cancelled.
        attempt: int(field(row, 10))?
            .and_then(|n| u32::try_from(n).ok())
            .unwrap_or(1),
        cancel_requested: int(field(row, 11))? == Some(1),
        params,
    })
}

/// A registry row: `{instance_id, job, lock_name, trigger, zone, next_fire, following_fire,
/// host, pid, version, started_at, clock_offset_ms, heartbeat_ms, heartbeat_at}`.
fn registry_row(row: &[Value]) -> Result<RegistryRow, ReplyError> {
    let job = required_text(row, 1, "job")?;
    Ok(RegistryRow {
        instance: InstanceInfo {
            instance_id: required_text(row, 0, "instance")?,
            host: required_text(row, 7, "host")?,
            pid: u32::try_from(required_int(row, 8, "pid")?).unwrap_or(0),
            version: required_text(row, 9, "version")?,
            started_at: required_time(row, 10, "start")?,
            clock_offset_ms: required_int(row, 11, "clock offset")?,
            heartbeat_ms: required_int(row, 12, "heartbeat interval")?,
        },
        heartbeat_at: required_time(row, 13, "heartbeat")?,
        job: if job.is_empty() {
            None
        } else {
            Some(JobRegistration {
                name: job,
                lock_name: required_text(row, 2, "lock name")?,
                trigger: required_text(row, 3, "trigger")?,
                zone: text(field(row, 4))?,
                next_fire: opt_time(field(row, 5))?,
                following_fire: opt_time(field(row, 6))?,
            })
        },
    })
}

/// The heartbeat script's arguments: the instance, whether the beat is complete, then six
/// per job.
fn heartbeat_args(beat: &Heartbeat, complete: bool) -> Vec<String> {
    let i = &beat.instance;
    let mut args = vec![
        i.instance_id.clone(),
        i.host.clone(),
        i.pid.to_string(),
        i.version.clone(),
        millis(i.started_at),
        i.clock_offset_ms.to_string(),
        i.heartbeat_ms.to_string(),
        if complete { "1" } else { "0" }.to_owned(),
    ];
    for job in &beat.jobs {
        args.extend([
            job.name.clone(),
            job.lock_name.clone(),
            job.trigger.clone(),
            job.zone.clone().unwrap_or_default(),
            opt_millis(job.next_fire),
            opt_millis(job.following_fire),
        ]);
    }
    args
}

impl RedisLockProvider {
    /// One heartbeat script; `complete`: also delete the instance's other job rows.
    async fn beat(
        &self,
        beat: &Heartbeat,
        complete: bool,
    ) -> Result<Vec<ControlRequest>, LockError> {
        let k = &self.keys.ops;
        let reply: Vec<Vec<Value>> = self
            .ops(
                "heartbeat",
                "",
                &self.ops_scripts.heartbeat,
                &[&k.instances, &k.heartbeats, &k.control, &k.control_open],
                &heartbeat_args(beat, complete),
            )
            .await?;
        self.rows("heartbeat", reply, control_row)
    }
}

#[async_trait]
impl ClusterStore for RedisLockProvider {
    /// `redis keys {<prefix>:ops}:*`.
    fn tables(&self) -> String {
        format!("redis keys {}", self.keys.ops.pattern())
    }

    /// Nothing to create on Redis: succeeds unless a key where an operations key goes holds
    /// another type (another application's key under this prefix), which every operation
    /// would then fail on.
    async fn check(&self) -> Result<(), LockError> {
        let typed = self.keys.ops.typed();
        let mut pipe = redis::pipe();
        for (key, _) in &typed {
            pipe.cmd("TYPE").arg(*key);
        }
        let mut conn = self.conn.clone();
        let found: Vec<String> = pipe
            .query_async(&mut conn)
            .await
            .map_err(|e| self.ops_error("check", "", e))?;
        for ((key, expected), found) in typed.iter().zip(&found) {
            if found != "none" && found != expected {
                return Err(LockError::InvalidConfiguration(format!(
                    "Redis key {key} is a {found}, where the operations keys of prefix {:?} \
                     keep a {expected}: another application writes under this prefix; \
                     choose another key prefix",
                    self.config.key_prefix
                )));
            }
        }
        Ok(())
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        self.beat(beat, true).await
    }

    async fn heartbeat_changes(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        self.beat(beat, false).await
    }

    async fn claim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let k = &self.keys.ops;
        let claimed: i64 = self
            .ops(
                "claim",
                "",
                &self.ops_scripts.claim_trigger,
                &[&k.control, &k.control_open, &k.control_claimed],
                &[id.to_string(), instance_id.to_owned()],
            )
            .await?;
        Ok(claimed == 1)
    }

    async fn unclaim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let k = &self.keys.ops;
        let handed_back: i64 = self
            .ops(
                "unclaim",
                "",
                &self.ops_scripts.unclaim_trigger,
                &[&k.control, &k.control_open, &k.control_claimed],
                &[id.to_string(), instance_id.to_owned()],
            )
            .await?;
        Ok(handed_back == 1)
    }

    async fn run_started(&self, run: &RunStart) -> Result<i64, LockError> {
        let k = &self.keys.ops;
        self.ops(
            "history",
            &run.job,
            &self.ops_scripts.run_started,
            &[
                &k.ids,
                &k.runs,
                &k.runs_started,
                &k.runs_by_job,
                &k.runs_last,
            ],
            &[
                run.job.clone(),
                opt_millis(run.slot),
                run.fire_kind.as_str().to_owned(),
                run.instance_id.clone(),
                // As the SQL providers store it (BIGINT): the same number reads back.
                i64::try_from(run.fence).unwrap_or(-1).to_string(),
                run.attempt.to_string(),
                run.params.encode(),
            ],
        )
        .await
    }

    async fn run_ended(&self, end: &RunEnd) -> Result<(), LockError> {
        let k = &self.keys.ops;
        let (has_error, error) = match end.error.as_deref() {
            Some(e) => ("1", truncate(e, MAX_ERROR_LEN)),
            None => ("0", ""),
        };
        let _ended: i64 = self
            .ops(
                "history",
                "",
                &self.ops_scripts.run_ended,
                &[&k.runs, &k.runs_succeeded, &k.runs_logs],
                &[
                    end.id.to_string(),
                    end.outcome.as_str().to_owned(),
                    has_error.to_owned(),
                    error.to_owned(),
                    u8::from(end.cancel_requested).to_string(),
                    end.logs
                        .as_ref()
                        .map_or_else(String::new, |l| l.as_stored().to_owned()),
                ],
            )
            .await?;
        Ok(())
    }

    async fn delete_expired(
        &self,
        what: Expired,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, LockError> {
        let k = &self.keys.ops;
        let args = [cut_off(before), limit.to_string()];
        let deleted: i64 = match what {
            Expired::Runs => {
                self.ops(
                    "housekeeping",
                    "",
                    &self.ops_scripts.delete_runs,
                    &[
                        &k.runs,
                        &k.runs_started,
                        &k.runs_by_job,
                        &k.runs_last,
                        &k.runs_succeeded,
                        &k.runs_logs,
                    ],
                    &args,
                )
                .await?
            }
            Expired::ClaimedTriggers => {
                self.ops(
                    "housekeeping",
                    "",
                    &self.ops_scripts.delete_control,
                    &[
                        &k.control,
                        &k.control_open,
                        &k.control_claimed,
                        &k.control_after,
                        &k.control_after_requested,
                    ],
                    &args,
                )
                .await?
            }
            Expired::StaleRegistry => {
                self.ops(
                    "housekeeping",
                    "",
                    &self.ops_scripts.delete_scored,
                    &[&k.instances, &k.heartbeats],
                    &args,
                )
                .await?
            }
            Expired::Actions => self.delete_actions(args[0].clone(), limit).await?,
            Expired::Incidents => {
                self.ops(
                    "housekeeping",
                    "",
                    &self.ops_scripts.delete_scored,
                    &[&k.incidents, &k.incidents_resolved],
                    &args,
                )
                .await?
            }
        };
        Ok(u64::try_from(deleted).unwrap_or(0))
    }

    async fn request_after(
        &self,
        child: &str,
        slot: DateTime<Utc>,
        parent: &str,
    ) -> Result<i64, LockError> {
        if slot.timestamp_millis() < 0 {
            return Err(LockError::InvalidConfiguration(format!(
                "job `{child}`: an after request's slot {slot} is before 1970, which {} cannot \
                 index",
                self.tables()
            )));
        }
        let k = &self.keys.ops;
        self.ops(
            "after request",
            child,
            &self.ops_scripts.request_after,
            &[
                &k.ids,
                &k.control,
                &k.control_open,
                &k.control_after,
                &k.control_after_requested,
            ],
            &[child.to_owned(), millis(slot), parent.to_owned()],
        )
        .await
    }

    async fn after_requests(
        &self,
        child: &str,
        slot: DateTime<Utc>,
    ) -> Result<Vec<String>, LockError> {
        if slot.timestamp_millis() < 0 {
            // `request_after` refuses such a slot: none is stored.
            return Ok(Vec::new());
        }
        let k = &self.keys.ops;
        self.ops(
            "after request",
            child,
            &self.ops_scripts.after_requests,
            &[&k.control, &k.control_after],
            &[child.to_owned(), millis(slot)],
        )
        .await
    }

    async fn delete_after(&self, child: &str, through: DateTime<Utc>) -> Result<u64, LockError> {
        if through.timestamp_millis() < 0 {
            return Ok(0);
        }
        let k = &self.keys.ops;
        let args = [
            child.to_owned(),
            millis(through),
            DELETE_AFTER_BATCH.to_string(),
        ];
        let mut deleted = 0;
        // Bounded scripts: a child whose lock decided no slot for a long while (its instances
        // were gone) may have many rows; each batch is atomic, and deleting is idempotent.
        loop {
            let batch: u64 = self
                .ops(
                    "after request",
                    child,
                    &self.ops_scripts.delete_after,
                    &[
                        &k.control,
                        &k.control_open,
                        &k.control_after,
                        &k.control_after_requested,
                    ],
                    &args,
                )
                .await?;
            deleted += batch;
            if batch < DELETE_AFTER_BATCH {
                return Ok(deleted);
            }
        }
    }

    async fn open_incidents(&self) -> Result<Vec<Incident>, LockError> {
        self.read_incidents().await
    }

    async fn open_incident(&self, key: &str, summary: &str) -> Result<bool, LockError> {
        self.open_one_incident(key, summary).await
    }

    async fn resolve_incident(&self, key: &str) -> Result<bool, LockError> {
        self.resolve_one_incident(key).await
    }

    async fn instances(&self) -> Result<Vec<RegistryRow>, LockError> {
        let reply: Vec<Vec<Value>> = self
            .ops(
                "instances",
                "",
                &self.ops_scripts.read_instances,
                &[&self.keys.ops.instances],
                &[],
            )
            .await?;
        let mut rows = self.rows("instances", reply, registry_row)?;
        rows.sort_by(|a, b| a.instance.instance_id.cmp(&b.instance.instance_id));
        Ok(rows)
    }
}

#[async_trait]
impl OperatorStore for RedisLockProvider {
    async fn pause(&self, job: &str, requested_by: &str) -> Result<bool, LockError> {
        let k = &self.keys.ops;
        let paused: i64 = self
            .ops(
                "pause",
                job,
                &self.ops_scripts.pause,
                &[&k.ids, &k.control, &k.control_open, &k.control_paused],
                &[job.to_owned(), requested_by.to_owned()],
            )
            .await?;
        Ok(paused == 1)
    }

    async fn resume(&self, job: &str) -> Result<bool, LockError> {
        let k = &self.keys.ops;
        let resumed: i64 = self
            .ops(
                "resume",
                job,
                &self.ops_scripts.resume,
                &[&k.control, &k.control_open, &k.control_paused],
                &[job.to_owned()],
            )
            .await?;
        Ok(resumed == 1)
    }

    async fn request_trigger(&self, job: &str, requested_by: &str) -> Result<i64, LockError> {
        self.request_trigger_with_params(job, requested_by, &Params::new())
            .await
    }

    async fn request_trigger_with_params(
        &self,
        job: &str,
        requested_by: &str,
        params: &Params,
    ) -> Result<i64, LockError> {
        let k = &self.keys.ops;
        self.ops(
            "trigger",
            job,
            &self.ops_scripts.request_trigger,
            &[&k.ids, &k.control, &k.control_open],
            &[job.to_owned(), requested_by.to_owned(), params.encode()],
        )
        .await
    }

    async fn withdraw_trigger(&self, id: i64) -> Result<bool, LockError> {
        let k = &self.keys.ops;
        let withdrawn: i64 = self
            .ops(
                "trigger",
                "",
                &self.ops_scripts.withdraw_trigger,
                &[&k.control, &k.control_open],
                &[id.to_string()],
            )
            .await?;
        Ok(withdrawn == 1)
    }

    async fn control(&self) -> Result<Vec<ControlRequest>, LockError> {
        let reply: Vec<Vec<Value>> = self
            .ops(
                "control",
                "",
                &self.ops_scripts.read_control,
                &[&self.keys.ops.control],
                &[],
            )
            .await?;
        let mut rows = self.rows("control", reply, control_row)?;
        rows.sort_by_key(|c| c.id);
        Ok(rows)
    }

    async fn registry(&self) -> Result<Vec<RegistryRow>, LockError> {
        let reply: Vec<Vec<Value>> = self
            .ops(
                "registry",
                "",
                &self.ops_scripts.read_registry,
                &[&self.keys.ops.instances],
                &[],
            )
            .await?;
        let mut rows = self.rows("registry", reply, registry_row)?;
        // The SQL providers' order: by instance, its own row (job "") first.
        rows.sort_by(|a, b| {
            let job = |r: &RegistryRow| r.job.as_ref().map(|j| j.name.clone());
            (&a.instance.instance_id, job(a)).cmp(&(&b.instance.instance_id, job(b)))
        });
        Ok(rows)
    }

    async fn history(&self, job: &str, limit: u32) -> Result<Vec<RunRecord>, LockError> {
        let k = &self.keys.ops;
        let reply: Vec<Vec<Value>> = self
            .ops(
                "history",
                job,
                &self.ops_scripts.read_history,
                &[&k.runs, &k.runs_by_job],
                &[job.to_owned(), limit.to_string()],
            )
            .await?;
        self.rows("history", reply, run_row)
    }

    async fn run_logs(
        &self,
        job: &str,
        ids: std::ops::RangeInclusive<i64>,
    ) -> Result<Vec<(i64, RunLog)>, LockError> {
        let k = &self.keys.ops;
        // Ids are positive: the range's ends as the index writes them (20 digits).
        let (lo, hi) = ((*ids.start()).max(0), (*ids.end()).max(0));
        let reply: Vec<(i64, String)> = self
            .ops(
                "history",
                job,
                &self.ops_scripts.read_run_logs,
                &[&k.runs_by_job, &k.runs_logs],
                &[job.to_owned(), lo.to_string(), hi.to_string()],
            )
            .await?;
        let mut logs = Vec::with_capacity(reply.len());
        for (id, text) in reply {
            let log = RunLog::from_stored(text).map_err(|e| {
                self.ops_error(
                    "history",
                    job,
                    format!(
                        "the logs of run {id} in {} do not decode ({e}): fix or delete the field",
                        k.runs_logs
                    ),
                )
            })?;
            logs.push((id, log));
        }
        Ok(logs)
    }

    async fn last_runs(&self) -> Result<Vec<RunRecord>, LockError> {
        let k = &self.keys.ops;
        let reply: Vec<Vec<Value>> = self
            .ops(
                "history",
                "",
                &self.ops_scripts.read_last_runs,
                &[&k.runs, &k.runs_last],
                &[],
            )
            .await?;
        let mut rows = self.rows("history", reply, run_row)?;
        rows.sort_by(|a, b| a.job.cmp(&b.job));
        Ok(rows)
    }

    async fn last_successes(&self) -> Result<Vec<(String, DateTime<Utc>)>, LockError> {
        let mut conn = self.conn.clone();
        let all: std::collections::HashMap<String, i64> = redis::cmd("HGETALL")
            .arg(&self.keys.ops.runs_succeeded)
            .query_async(&mut conn)
            .await
            .map_err(|e| self.ops_error("history", "", e))?;
        all.into_iter()
            .map(|(job, ended)| Ok((job, time(ended)?)))
            .collect::<Result<_, ReplyError>>()
            .map_err(|e| self.ops_error("history", "", e))
    }

    async fn record_action(&self, action: &ActionRecord) -> Result<(), LockError> {
        self.push_action(action).await
    }

    async fn actions(&self, job: &str, limit: u32) -> Result<Vec<ActionRecord>, LockError> {
        self.read_actions(job, limit).await
    }
}

#[cfg(test)]
mod tests;
