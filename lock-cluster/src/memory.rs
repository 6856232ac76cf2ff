//! The operations tables of [`InMemoryLockProvider`]: the same behaviour as the SQL providers'
//! tables, in this process's memory, on the provider's clock.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::{
    Cluster, ClusterProvider, ClusterStore, ControlKind, ControlRequest, Expired, Heartbeat,
    InstanceInfo, JobRegistration, MAX_ERROR_LEN, OperatorStore, RegistryRow, RunEnd, RunLog,
    RunRecord, RunStart, RunState, truncate,
};
use lock_core::{InMemoryLockProvider, LockError, LockProvider, Params};

/// The rows, in memory.
#[derive(Debug, Default)]
pub(crate) struct MemoryOperations {
    state: Mutex<Rows>,
    /// The action log, apart from the other tables.
    actions: crate::memory_actions::MemoryActionLog,
    /// The alert rules' incidents, apart too.
    incidents: crate::memory_incidents::MemoryIncidents,
}

#[derive(Debug, Default)]
struct Rows {
    registry: Registry,
    runs: Vec<RunRecord>,
    /// The runs' log lines by run id, apart from the rows as the SQL stores keep them in a
    /// column that only `run_logs` reads.
    run_logs: BTreeMap<i64, RunLog>,
    control: Vec<ControlRequest>,
    next_id: i64,
}

impl Rows {
    fn id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    /// What a heartbeat returns: every pause and every unclaimed trigger request.
    fn pending_control(&self) -> Vec<ControlRequest> {
        self.control
            .iter()
            .filter(|c| c.kind == ControlKind::Pause || c.claimed_by.is_none())
            .cloned()
            .collect()
    }
}

/// The registry, by instance: each instance's own row once, and its job rows by name, so a
/// heartbeat finds its rows by lookup and 10,000 job rows do not hold 10,000 copies of the
/// instance's fields, nor of a trigger text they share.
#[derive(Debug, Default)]
struct Registry {
    /// In order of first heartbeat (few: one per instance).
    instances: Vec<Registered>,
    /// The trigger and zone texts of the rows, each kept once.
    texts: HashSet<Arc<str>>,
}

#[derive(Debug)]
struct Registered {
    info: InstanceInfo,
    heartbeat_at: DateTime<Utc>,
    jobs: BTreeMap<Box<str>, StoredJob>,
}

/// A job row as kept here.
#[derive(Debug)]
struct StoredJob {
    /// None: the job's own name.
    lock_name: Option<Box<str>>,
    trigger: Arc<str>,
    zone: Option<Arc<str>>,
    next_fire: Option<DateTime<Utc>>,
    following_fire: Option<DateTime<Utc>>,
    heartbeat_at: DateTime<Utc>,
}

impl Registry {
    fn intern(texts: &mut HashSet<Arc<str>>, text: &str) -> Arc<str> {
        if let Some(kept) = texts.get(text) {
            return kept.clone();
        }
        let kept: Arc<str> = Arc::from(text);
        texts.insert(kept.clone());
        kept
    }

    /// Writes `beat` at `now`; `complete`: its jobs are all the instance's jobs, the others'
    /// rows are deleted.
    fn beat(&mut self, beat: &Heartbeat, now: DateTime<Utc>, complete: bool) {
        let id = &beat.instance.instance_id;
        let at = match self
            .instances
            .iter()
            .position(|r| &r.info.instance_id == id)
        {
            Some(at) => at,
            None => {
                self.instances.push(Registered {
                    info: beat.instance.clone(),
                    heartbeat_at: now,
                    jobs: BTreeMap::new(),
                });
                self.instances.len() - 1
            }
        };
        let registered = &mut self.instances[at];
        registered.info.clone_from(&beat.instance);
        registered.heartbeat_at = now;
        if complete {
            registered.jobs.clear();
        }
        for job in &beat.jobs {
            let stored = StoredJob {
                lock_name: (job.lock_name != job.name).then(|| job.lock_name.as_str().into()),
                trigger: Self::intern(&mut self.texts, &job.trigger),
                zone: job
                    .zone
                    .as_deref()
                    .map(|zone| Self::intern(&mut self.texts, zone)),
                next_fire: job.next_fire,
                following_fire: job.following_fire,
                heartbeat_at: now,
            };
            registered.jobs.insert(job.name.as_str().into(), stored);
        }
        if complete {
            // Texts no row holds any more.
            self.texts.retain(|text| Arc::strong_count(text) > 1);
        }
    }

    /// Every row: each instance's own, then its jobs'.
    fn rows(&self) -> Vec<RegistryRow> {
        let mut rows = Vec::new();
        for registered in &self.instances {
            rows.push(RegistryRow {
                instance: registered.info.clone(),
                heartbeat_at: registered.heartbeat_at,
                job: None,
            });
            rows.extend(registered.jobs.iter().map(|(name, job)| RegistryRow {
                instance: registered.info.clone(),
                heartbeat_at: job.heartbeat_at,
                job: Some(JobRegistration {
                    name: name.to_string(),
                    lock_name: job.lock_name.as_deref().unwrap_or(name).to_owned(),
                    trigger: job.trigger.to_string(),
                    zone: job.zone.as_deref().map(str::to_owned),
                    next_fire: job.next_fire,
                    following_fire: job.following_fire,
                }),
            }));
        }
        rows
    }

    /// Deletes at most `limit` rows written before `before`; returns how many. Job rows go
    /// first: an instance's row is deleted once none of its job rows is left (they are never
    /// newer than it, so an expired instance's job rows are expired too).
    fn delete_before(&mut self, before: DateTime<Utc>, limit: usize) -> usize {
        let mut left = limit;
        for registered in &mut self.instances {
            registered.jobs.retain(|_, job| {
                if job.heartbeat_at < before && left > 0 {
                    left -= 1;
                    false
                } else {
                    true
                }
            });
        }
        self.instances.retain(|r| {
            if r.heartbeat_at < before && r.jobs.is_empty() && left > 0 {
                left -= 1;
                false
            } else {
                true
            }
        });
        limit - left
    }
}

impl MemoryOperations {
    fn rows(&self) -> MutexGuard<'_, Rows> {
        // Every change is a push, a retain or a field assignment: a panic cannot leave a row
        // half-written, so a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The in-memory tables of `provider`, kept with it (shared by every user of the provider).
fn tables(provider: &InMemoryLockProvider) -> Arc<MemoryOperations> {
    provider.attachment::<MemoryOperations>()
}

/// The provider's clock, to the millisecond as the SQL tables keep it.
async fn now(provider: &InMemoryLockProvider) -> DateTime<Utc> {
    // The provider's clock never fails.
    let now = provider
        .database_time()
        .await
        .unwrap_or_else(|_| Utc::now());
    lock_core::FireSlot::new(now).instant()
}

impl ClusterProvider for InMemoryLockProvider {
    fn cluster(&self) -> Option<&dyn Cluster> {
        Some(self)
    }
}

#[async_trait]
impl ClusterStore for InMemoryLockProvider {
    fn tables(&self) -> String {
        "in-memory operations tables".to_owned()
    }

    async fn check(&self) -> Result<(), LockError> {
        Ok(())
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        let now = now(self).await;
        let ops = tables(self);
        let mut rows = ops.rows();
        rows.registry.beat(beat, now, true);
        Ok(rows.pending_control())
    }

    async fn heartbeat_changes(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        let now = now(self).await;
        let ops = tables(self);
        let mut rows = ops.rows();
        rows.registry.beat(beat, now, false);
        Ok(rows.pending_control())
    }

    async fn claim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let now = now(self).await;
        let ops = tables(self);
        let mut rows = ops.rows();
        match rows
            .control
            .iter_mut()
            .find(|c| c.id == id && c.kind == ControlKind::Trigger && c.claimed_by.is_none())
        {
            Some(request) => {
                request.claimed_by = Some(instance_id.to_owned());
                request.claimed_at = Some(now);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn unclaim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        let ops = tables(self);
        let mut rows = ops.rows();
        match rows.control.iter_mut().find(|c| {
            c.id == id
                && c.kind == ControlKind::Trigger
                && c.claimed_by.as_deref() == Some(instance_id)
        }) {
            Some(request) => {
                request.claimed_by = None;
                request.claimed_at = None;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn run_started(&self, run: &RunStart) -> Result<i64, LockError> {
        let now = now(self).await;
        let ops = tables(self);
        let mut rows = ops.rows();
        let id = rows.id();
        rows.runs.push(RunRecord {
            id,
            job: run.job.clone(),
            slot: run.slot,
            fire_kind: run.fire_kind,
            instance_id: run.instance_id.clone(),
            fence: run.fence,
            started_at: now,
            ended_at: None,
            outcome: RunState::Running,
            error: None,
            attempt: run.attempt,
            cancel_requested: false,
            params: run.params.clone(),
        });
        Ok(id)
    }

    async fn run_ended(&self, end: &RunEnd) -> Result<(), LockError> {
        let now = now(self).await;
        let ops = tables(self);
        let mut rows = ops.rows();
        let Rows { runs, run_logs, .. } = &mut *rows;
        if let Some(run) = runs.iter_mut().find(|r| r.id == end.id) {
            run.ended_at = Some(now);
            run.outcome = end.outcome;
            run.error = end
                .error
                .as_deref()
                .map(|e| truncate(e, MAX_ERROR_LEN).to_owned());
            run.cancel_requested = end.cancel_requested;
            match &end.logs {
                Some(logs) => run_logs.insert(end.id, logs.clone()),
                None => run_logs.remove(&end.id),
            };
        }
        Ok(())
    }

    async fn open_incidents(&self) -> Result<Vec<crate::Incident>, LockError> {
        Ok(tables(self).incidents.open())
    }

    async fn open_incident(&self, key: &str, summary: &str) -> Result<bool, LockError> {
        let now = now(self).await;
        Ok(tables(self).incidents.open_one(key, summary, now))
    }

    async fn resolve_incident(&self, key: &str) -> Result<bool, LockError> {
        let now = now(self).await;
        Ok(tables(self).incidents.resolve(key, now))
    }

    async fn delete_expired(
        &self,
        what: Expired,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, LockError> {
        let ops = tables(self);
        let mut rows = ops.rows();
        let mut left = limit as usize;
        let mut keep = |expired: bool| {
            if expired && left > 0 {
                left -= 1;
                false
            } else {
                true
            }
        };
        match what {
            Expired::Runs => {
                let Rows { runs, run_logs, .. } = &mut *rows;
                runs.retain(|r| {
                    let kept = keep(r.started_at < before);
                    if !kept {
                        run_logs.remove(&r.id);
                    }
                    kept
                })
            }
            Expired::ClaimedTriggers => rows.control.retain(|c| {
                keep(match c.kind {
                    ControlKind::Trigger => c.claimed_at.is_some_and(|at| at < before),
                    ControlKind::After => c.requested_at < before,
                    ControlKind::Pause => false,
                })
            }),
            Expired::StaleRegistry => left -= rows.registry.delete_before(before, left),
            Expired::Actions => left -= tables(self).actions.delete_before(before, left),
            Expired::Incidents => left -= ops.incidents.delete_before(before, left),
        }
        Ok((limit as usize - left) as u64)
    }

    async fn request_after(
        &self,
        child: &str,
        slot: DateTime<Utc>,
        parent: &str,
    ) -> Result<i64, LockError> {
        let now = now(self).await;
        let ops = tables(self);
        let mut rows = ops.rows();
        let id = rows.id();
        rows.control.push(ControlRequest {
            id,
            job: child.to_owned(),
            kind: ControlKind::After,
            requested_at: now,
            requested_by: parent.to_owned(),
            claimed_by: None,
            claimed_at: None,
            slot: Some(slot),
            params: Params::new(),
        });
        Ok(id)
    }

    async fn after_requests(
        &self,
        child: &str,
        slot: DateTime<Utc>,
    ) -> Result<Vec<String>, LockError> {
        Ok(tables(self)
            .rows()
            .control
            .iter()
            .filter(|c| c.kind == ControlKind::After && c.job == child && c.slot == Some(slot))
            .map(|c| c.requested_by.clone())
            .collect())
    }

    async fn delete_after(&self, child: &str, through: DateTime<Utc>) -> Result<u64, LockError> {
        let ops = tables(self);
        let mut rows = ops.rows();
        let before = rows.control.len();
        rows.control.retain(|c| {
            !(c.kind == ControlKind::After
                && c.job == child
                && c.slot.is_some_and(|s| s <= through))
        });
        Ok((before - rows.control.len()) as u64)
    }

    async fn instances(&self) -> Result<Vec<RegistryRow>, LockError> {
        let mut rows = OperatorStore::registry(self).await?;
        rows.retain(|row| row.job.is_none());
        Ok(rows)
    }
}

#[async_trait]
impl OperatorStore for InMemoryLockProvider {
    async fn pause(&self, job: &str, requested_by: &str) -> Result<bool, LockError> {
        let now = now(self).await;
        let ops = tables(self);
        let mut rows = ops.rows();
        if rows
            .control
            .iter()
            .any(|c| c.job == job && c.kind == ControlKind::Pause)
        {
            return Ok(false);
        }
        let id = rows.id();
        rows.control.push(ControlRequest {
            id,
            job: job.to_owned(),
            kind: ControlKind::Pause,
            requested_at: now,
            requested_by: requested_by.to_owned(),
            claimed_by: None,
            claimed_at: None,
            slot: None,
            params: Params::new(),
        });
        Ok(true)
    }

    async fn resume(&self, job: &str) -> Result<bool, LockError> {
        let ops = tables(self);
        let mut rows = ops.rows();
        let before = rows.control.len();
        rows.control
            .retain(|c| !(c.job == job && c.kind == ControlKind::Pause));
        Ok(rows.control.len() < before)
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
        let now = now(self).await;
        let ops = tables(self);
        let mut rows = ops.rows();
        let id = rows.id();
        rows.control.push(ControlRequest {
            id,
            job: job.to_owned(),
            kind: ControlKind::Trigger,
            requested_at: now,
            requested_by: requested_by.to_owned(),
            claimed_by: None,
            claimed_at: None,
            slot: None,
            params: params.clone(),
        });
        Ok(id)
    }

    async fn withdraw_trigger(&self, id: i64) -> Result<bool, LockError> {
        let ops = tables(self);
        let mut rows = ops.rows();
        let before = rows.control.len();
        rows.control
            .retain(|c| !(c.id == id && c.kind == ControlKind::Trigger && c.claimed_by.is_none()));
        Ok(rows.control.len() < before)
    }

    async fn control(&self) -> Result<Vec<ControlRequest>, LockError> {
        Ok(tables(self).rows().control.clone())
    }

    async fn registry(&self) -> Result<Vec<RegistryRow>, LockError> {
        Ok(tables(self).rows().registry.rows())
    }

    async fn history(&self, job: &str, limit: u32) -> Result<Vec<RunRecord>, LockError> {
        Ok(tables(self)
            .rows()
            .runs
            .iter()
            .rev()
            .filter(|r| r.job == job)
            .take(limit as usize)
            .cloned()
            .collect())
    }

    async fn history_page(
        &self,
        job: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<RunRecord>, LockError> {
        Ok(tables(self)
            .rows()
            .runs
            .iter()
            .rev()
            .filter(|r| r.job == job && before.is_none_or(|before| r.id < before))
            .take(limit as usize)
            .cloned()
            .collect())
    }

    async fn run_logs(
        &self,
        job: &str,
        ids: std::ops::RangeInclusive<i64>,
    ) -> Result<Vec<(i64, RunLog)>, LockError> {
        let ops = tables(self);
        let rows = ops.rows();
        Ok(rows
            .run_logs
            .range(ids)
            .rev()
            .filter(|(id, _)| rows.runs.iter().any(|r| r.id == **id && r.job == job))
            .map(|(id, logs)| (*id, logs.clone()))
            .collect())
    }

    async fn last_runs(&self) -> Result<Vec<RunRecord>, LockError> {
        let ops = tables(self);
        let rows = ops.rows();
        let mut last: Vec<RunRecord> = Vec::new();
        for run in rows.runs.iter().rev() {
            if !last.iter().any(|r| r.job == run.job) {
                last.push(run.clone());
            }
        }
        last.sort_by(|a, b| a.job.cmp(&b.job));
        Ok(last)
    }

    async fn last_successes(&self) -> Result<Vec<(String, DateTime<Utc>)>, LockError> {
        let ops = tables(self);
        let rows = ops.rows();
        let mut last: Vec<(String, DateTime<Utc>)> = Vec::new();
        for run in &rows.runs {
            if let (RunState::Succeeded, Some(ended)) = (run.outcome, run.ended_at) {
                match last.iter_mut().find(|(job, _)| *job == run.job) {
                    Some((_, at)) => *at = (*at).max(ended),
                    None => last.push((run.job.clone(), ended)),
                }
            }
        }
        Ok(last)
    }

    // The action log (`memory_actions.rs`): the two methods only delegate.
    async fn record_action(&self, action: &crate::ActionRecord) -> Result<(), LockError> {
        let now = now(self).await;
        tables(self).actions.record(action, now);
        Ok(())
    }

    async fn actions(&self, job: &str, limit: u32) -> Result<Vec<crate::ActionRecord>, LockError> {
        Ok(tables(self).actions.of(job, limit))
    }
}
