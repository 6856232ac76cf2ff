//! Which jobs run after which (`Trigger::after`), as the scheduler keeps it while it runs: each
//! child with the runs of its parents it waits for, the child fires started here and not ended
//! yet, and the queue of child fires due, which `dependencies.rs` starts.
//!
//! Decisions, and why:
//! - **The request is a row, written by the parent's instance before its end is recorded**
//!   (`ClusterStore::request_after`): an instance that dies right after its parent succeeded
//!   leaves the row, and every live instance's heartbeat brings it back. A row that no
//!   instance acted on within [`Dependents::hand_off`] (one heartbeat interval; the parent's
//!   own instance acts within milliseconds) is fired by the instance that sees it.
//! - **Once per slot does the rest**: the child's fire has its parent's slot, so a second
//!   instance firing it is refused by the child's lock; no claim is needed.
//! - **A child with several parents, or a sharded parent**, fires once the rows of every one
//!   of them (every shard: `name#index`) are there for the slot; whichever instance writes the
//!   last row sees them all (it reads after its own write).
//! - **No timer and no polling**: a child fire is started by a parent's end, or by a heartbeat
//!   that happens anyway.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use lock_cluster::{ControlKind, ControlRequest};
use lock_core::{FireSlot, LockError};
use lock_trigger::{Distribution, Firing, Overlap};
use tokio::sync::mpsc;

use super::Job;

/// A job that runs after others: its name and the parents' runs it waits for, each a job name
/// or, for a sharded parent, `name#index` for each of its shards.
#[derive(Clone, Debug)]
pub(super) struct Child {
    pub(super) name: Arc<str>,
    pub(super) needs: Arc<[String]>,
}

impl Child {
    /// Whether the runs of `present` (parents' labels) are all the child waits for.
    pub(super) fn is_complete<S: AsRef<str>>(&self, present: &[S]) -> bool {
        self.needs
            .iter()
            .all(|need| present.iter().any(|p| p.as_ref() == need))
    }
}

/// One child fire to start: `child`, for `slot`.
#[derive(Debug)]
pub(super) struct Due {
    pub(super) child: Arc<str>,
    pub(super) slot: FireSlot,
}

/// The dependencies of the jobs this instance runs (`Operations::dependents`).
pub(super) struct Dependents {
    /// Each parent's children.
    by_parent: RwLock<HashMap<Arc<str>, Vec<Child>>>,
    /// Each child, by name.
    by_child: RwLock<HashMap<Arc<str>, Child>>,
    /// The (child, slot) fires started here and not ended.
    in_flight: Mutex<HashSet<(Arc<str>, DateTime<Utc>)>>,
    due: mpsc::UnboundedSender<Due>,
    /// Taken once, by the loop that starts the fires (`dependencies::start_due`).
    receiver: Mutex<Option<mpsc::UnboundedReceiver<Due>>>,
    /// How old a request must be before an instance other than its writer fires it.
    hand_off: Duration,
}

impl Dependents {
    /// No dependencies yet; requests older than `hand_off` are anyone's.
    pub(super) fn new(hand_off: Duration) -> Self {
        let (due, receiver) = mpsc::unbounded_channel();
        Dependents {
            by_parent: RwLock::default(),
            by_child: RwLock::default(),
            in_flight: Mutex::default(),
            due,
            receiver: Mutex::new(Some(receiver)),
            hand_off,
        }
    }

    /// The queue of due child fires; None after the first call.
    pub(super) fn take_receiver(&self) -> Option<mpsc::UnboundedReceiver<Due>> {
        self.receiver
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Adds `child`, which waits for the runs `needs`, under each of `parents`.
    pub(super) fn register(&self, child: &Job, needs: Vec<String>) {
        let child = Child {
            name: child.shared_name(),
            needs: needs.into(),
        };
        let mut by_parent = self.by_parent.write().unwrap_or_else(|p| p.into_inner());
        for parent in self.parents_of(&child) {
            by_parent.entry(parent).or_default().push(child.clone());
        }
        self.by_child
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(child.name.clone(), child);
    }

    /// The parents' names of `child`'s needs (a shard's label is its job's name).
    fn parents_of(&self, child: &Child) -> Vec<Arc<str>> {
        let mut parents: Vec<Arc<str>> = Vec::new();
        for need in child.needs.iter() {
            let name = need
                .rsplit_once('#')
                .map_or(need.as_str(), |(name, _)| name);
            if !parents.iter().any(|p| &**p == name) {
                parents.push(name.into());
            }
        }
        parents
    }

    /// Forgets `name` as a child (`remove_job`).
    pub(super) fn unregister(&self, name: &str) {
        let Some(child) = self
            .by_child
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .remove(name)
        else {
            return;
        };
        let mut by_parent = self.by_parent.write().unwrap_or_else(|p| p.into_inner());
        for parent in self.parents_of(&child) {
            if let Some(children) = by_parent.get_mut(&parent) {
                children.retain(|c| &*c.name != name);
            }
        }
    }

    /// Whether `parent` has children here: the one question a parent's fire pays for.
    pub(super) fn has_children(&self, parent: &str) -> bool {
        self.by_parent
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(parent)
            .is_some_and(|children| !children.is_empty())
    }

    /// `parent`'s children.
    pub(super) fn children_of(&self, parent: &str) -> Vec<Child> {
        self.by_parent
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(parent)
            .cloned()
            .unwrap_or_default()
    }

    /// Queues `child`'s fire for `slot`, unless one is running here already.
    pub(super) fn fire(&self, child: Arc<str>, slot: FireSlot) {
        if self.begin(&child, slot) {
            // Closed only when the scheduler stops: the fire is then another instance's.
            let _ = self.due.send(Due { child, slot });
        }
    }

    /// Notes `child`'s fire for `slot` as running here; false when it already is.
    pub(super) fn begin(&self, child: &Arc<str>, slot: FireSlot) -> bool {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert((child.clone(), slot.instant()))
    }

    /// The child named `name`, if it runs here.
    pub(super) fn child(&self, name: &str) -> Option<Child> {
        self.by_child
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// `child`'s fire for `slot` has ended (or was not started).
    pub(super) fn finished(&self, child: &Arc<str>, slot: FireSlot) {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(child.clone(), slot.instant()));
    }

    /// At a heartbeat, with its control rows and the database's `now`: queues the fire of
    /// every child of this instance whose requests for a slot are all there, the oldest of
    /// them written more than the hand-off delay ago (its writer did not fire it: it died, or
    /// could not reach the database).
    pub(super) fn recover(&self, control: &[ControlRequest], now: DateTime<Utc>) {
        // Each (child, slot): its oldest request, and the parents' runs there.
        type Requests<'a> = (DateTime<Utc>, Vec<&'a str>);
        let mut slots: HashMap<(&str, DateTime<Utc>), Requests<'_>> = HashMap::new();
        for row in control.iter().filter(|c| c.kind == ControlKind::After) {
            let Some(slot) = row.slot else { continue };
            let entry = slots
                .entry((row.job.as_str(), slot))
                .or_insert((row.requested_at, Vec::new()));
            entry.0 = entry.0.min(row.requested_at);
            entry.1.push(row.requested_by.as_str());
        }
        if slots.is_empty() {
            return;
        }
        let hand_off = chrono::TimeDelta::from_std(self.hand_off).unwrap_or(chrono::TimeDelta::MAX);
        let by_child = self.by_child.read().unwrap_or_else(|p| p.into_inner());
        let mut due: Vec<_> = slots
            .into_iter()
            .filter(|(_, (oldest, _))| now - *oldest >= hand_off)
            .filter_map(|((child, slot), (_, present))| {
                let child = by_child.get(child)?;
                child
                    .is_complete(&present)
                    .then(|| (child.name.clone(), slot))
            })
            .collect();
        drop(by_child);
        // Oldest slot first: a later one would make the child's lock refuse the earlier.
        due.sort_by_key(|(_, slot)| *slot);
        for (child, slot) in due {
            tracing::info!(
                job = &*child,
                slot = %slot,
                "dependent run requested more than {} s ago and its request still there: this \
                 instance asks for the slot's lock (its writer died, or the run is still going: \
                 once per slot keeps it to one run)",
                self.hand_off.as_secs_f64()
            );
            self.fire(child, FireSlot::new(slot));
        }
    }
}

/// Registers every child among `jobs` (all the scheduler's); returns how many.
pub(super) fn register_all<'a>(
    dependents: &Dependents,
    jobs: impl Iterator<Item = &'a Job> + Clone,
) -> usize {
    let mut children = 0;
    for job in jobs
        .clone()
        .filter(|job| job.trigger().parents().next().is_some())
    {
        let needs = needs(job, |parent| {
            jobs.clone()
                .find(|j| j.name() == parent)
                .map(|j| j.distribution())
        });
        dependents.register(job, needs);
        children += 1;
    }
    children
}

/// The runs a child waits for: each parent's name, or `name#index` for each shard of a
/// sharded parent.
pub(super) fn needs(child: &Job, job_named: impl Fn(&str) -> Option<Distribution>) -> Vec<String> {
    let mut needs = Vec::new();
    for parent in child.trigger().parents() {
        match job_named(parent) {
            Some(Distribution::Shards(total)) => {
                needs.extend((0..total).map(|index| format!("{parent}#{index}")));
            }
            _ => needs.push(parent.to_owned()),
        }
    }
    needs
}

/// What `start()` refuses of the jobs' dependencies, naming the jobs: a parent no job has, a
/// cycle, a broadcast parent (no fixed set of runs to wait for), parents that do not share a
/// schedule (their slots would never meet), `overlap = "replace"` on a child (it has no next
/// slot to replace its run with), and dependencies on a provider without the cluster's
/// tables (the requests are rows there).
pub(super) fn check(jobs: &[&Job], has_store: bool) -> Result<(), LockError> {
    let by_name: HashMap<&str, &Job> = jobs.iter().map(|job| (job.name(), *job)).collect();
    let refuse = |message: String| Err(LockError::InvalidConfiguration(message));
    for job in jobs {
        let parents: Vec<&str> = job.trigger().parents().collect();
        if parents.is_empty() {
            continue;
        }
        let name = job.name();
        if !has_store {
            return refuse(format!(
                "job `{name}` runs after {}: dependent jobs need a provider that keeps the \
                 cluster's tables (the parents' requests are rows there); call the provider's \
                 ensure_schema(), or give the job a schedule of its own",
                job.trigger()
            ));
        }
        for parent in &parents {
            let Some(found) = by_name.get(parent) else {
                let mut known: Vec<&str> = by_name.keys().copied().collect();
                known.sort_unstable();
                known.truncate(20);
                return refuse(format!(
                    "job `{name}` runs after `{parent}`, which no job is named (jobs: {})",
                    known.join(", ")
                ));
            };
            if found.distribution() == Distribution::Broadcast {
                return refuse(format!(
                    "job `{name}` runs after `{parent}`, a broadcast job: its runs are one per \
                     live instance, so there is no fixed set of them to wait for; make \
                     `{parent}` sharded, or run `{name}` on a schedule"
                ));
            }
        }
        if job.overlap() == Overlap::Replace {
            return refuse(format!(
                "job `{name}` runs after {} with overlap = \"replace\": a dependent job has \
                 no next slot of its own to replace its run with; use \"queue\" (the next \
                 parent run's fire waits for the running one) or \"skip\"",
                job.trigger()
            ));
        }
        if let Some(cycle) = cycle_from(job, &by_name) {
            return refuse(format!(
                "jobs {} run after each other in a circle: none of them would ever fire",
                cycle
                    .iter()
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(" → ")
            ));
        }
        if parents.len() > 1 {
            let schedules: Vec<(&str, Option<String>)> = parents
                .iter()
                .map(|p| (*p, schedule_of(by_name[p], &by_name)))
                .collect();
            let first = &schedules[0].1;
            if first.is_none() || schedules.iter().any(|(_, s)| s != first) {
                let listed: Vec<String> = schedules
                    .iter()
                    .map(|(p, s)| match s {
                        Some(s) => format!("`{p}` ({s})"),
                        None => format!("`{p}` (no slots)"),
                    })
                    .collect();
                return refuse(format!(
                    "job `{name}` runs after {}, whose schedules differ: {}; a child of several \
                     parents runs when all of them succeeded for the same slot, so they must \
                     share one cron or fixed-rate schedule",
                    job.trigger(),
                    listed.join(", ")
                ));
            }
        }
    }
    Ok(())
}

/// The parents' path from `start` back to itself, if it runs after itself.
fn cycle_from<'a>(start: &'a Job, by_name: &HashMap<&str, &'a Job>) -> Option<Vec<&'a str>> {
    // Depth first over the parents, with the path: jobs are few levels deep.
    fn walk<'a>(
        job: &'a Job,
        start: &str,
        by_name: &HashMap<&str, &'a Job>,
        path: &mut Vec<&'a str>,
        seen: &mut HashSet<&'a str>,
    ) -> bool {
        for parent in job.trigger().parents() {
            let Some(next) = by_name.get(parent) else {
                continue;
            };
            if next.name() == start {
                path.push(next.name());
                return true;
            }
            if !seen.insert(next.name()) {
                continue;
            }
            path.push(next.name());
            if walk(next, start, by_name, path, seen) {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut path = vec![start.name()];
    let mut seen = HashSet::new();
    walk(start, start.name(), by_name, &mut path, &mut seen).then_some(path)
}

/// The schedule a job's slots come from: its own cron or fixed rate, or its first parent's
/// for a child; None for a fixed-delay job (it has no slots). Called after the cycle check.
fn schedule_of(job: &Job, by_name: &HashMap<&str, &Job>) -> Option<String> {
    let mut job = job;
    // Bounded by the number of jobs: no cycle is left.
    for _ in 0..=by_name.len() {
        match job.trigger().spec().kind.firing() {
            Firing::Slotted { .. } => return Some(job.trigger().to_string()),
            Firing::AfterRun { .. } => return None,
            Firing::AfterParents => job = by_name.get(job.trigger().parents().next()?)?,
        }
    }
    None
}
