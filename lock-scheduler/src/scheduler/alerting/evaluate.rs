//! The rules' conditions, evaluated on what the cluster's tables hold: which incidents are
//! firing now. Pure: the evaluation job (`incidents.rs`) reads the tables and acts on the
//! answer.

use std::collections::HashMap;
use std::fmt::Write as _;

use chrono::{DateTime, TimeDelta, Utc};
use lock_cluster::{ClusterView, MAX_TEXT_LEN, RunRecord, RunState};
use lock_core::FireKind;

use super::AlertRules;

/// One incident whose condition holds now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Firing {
    pub(super) key: String,
    pub(super) rule: &'static str,
    pub(super) job: Option<String>,
    pub(super) instance: Option<String>,
    pub(super) summary: String,
    pub(super) details: Vec<(&'static str, String)>,
}

pub(super) const FAILED_IN_A_ROW: &str = "failed_in_a_row";
pub(super) const RUNNING_TOO_LONG: &str = "running_too_long";
pub(super) const MISSED_SLOT: &str = "missed_slot";
pub(super) const INSTANCE_GONE: &str = "instance_gone";
pub(super) const LOCK_WAIT: &str = "lock_wait";

/// An incident's key: `<rule>/<subject>`, at most [`MAX_TEXT_LEN`] characters. A subject too
/// long for that is cut and followed by `~` and a hash of it (FNV-1a, the same on every
/// instance and version), so two long names never share a key.
pub(super) fn incident_key(rule: &str, subject: &str) -> String {
    let key = format!("{rule}/{subject}");
    if key.chars().count() <= MAX_TEXT_LEN {
        return key;
    }
    let hash = subject.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let keep = MAX_TEXT_LEN - rule.len() - 1 - 17;
    let mut cut: String = format!("{rule}/");
    cut.extend(subject.chars().take(keep));
    let _ = write!(cut, "~{hash:016x}");
    cut
}

/// A failure for `failed_in_a_row`: the body's own error, panic or timeout.
fn is_failure(outcome: RunState) -> bool {
    matches!(
        outcome,
        RunState::Failed | RunState::Panicked | RunState::TimedOut
    )
}

/// Whether a run's outcome counts for `failed_in_a_row` at all: a success ends a streak, a
/// failure adds to it; a run still going, skipped, missed, cancelled by a shutdown or cut
/// off by a lost lease or a dead instance is passed over.
fn counts(outcome: RunState) -> bool {
    outcome == RunState::Succeeded || is_failure(outcome)
}

/// The jobs whose history `failed_in_a_row` needs read: those whose newest run failed or is
/// still going (a retry after failures), and those with an open incident of the rule.
pub(super) fn streak_candidates<'a>(
    rules: &AlertRules,
    last_runs: &'a [RunRecord],
    open: &dyn Fn(&str) -> bool,
) -> Vec<&'a str> {
    if rules.failed_in_a_row == 0 {
        return Vec::new();
    }
    last_runs
        .iter()
        .filter(|run| {
            is_failure(run.outcome)
                || run.outcome == RunState::Running
                || open(&incident_key(FAILED_IN_A_ROW, &run.job))
        })
        .map(|run| run.job.as_str())
        .collect()
}

/// How many of a job's newest runs `failed_in_a_row` reads: enough to pass over the runs
/// that do not count (a retry running, a skip) between the failures.
pub(super) fn streak_window(rules: &AlertRules) -> u32 {
    rules
        .failed_in_a_row
        .saturating_mul(2)
        .saturating_add(8)
        .min(200)
}

/// Every incident firing at `now`.
///
/// `last_runs` is each job's newest run (shards apart) as the `view` shows it (a running row
/// of a gone instance unfinished), `histories` the newest runs of the [`streak_candidates`],
/// newest first.
pub(super) fn firing(
    rules: &AlertRules,
    now: DateTime<Utc>,
    view: &ClusterView,
    last_runs: &[RunRecord],
    histories: &HashMap<String, Vec<RunRecord>>,
) -> Vec<Firing> {
    let mut firing = Vec::new();
    let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    if rules.failed_in_a_row > 0 {
        let n = rules.failed_in_a_row as usize;
        for (job, runs) in histories {
            let streak: Vec<&RunRecord> =
                runs.iter().filter(|r| counts(r.outcome)).take(n).collect();
            if streak.len() == n && streak.iter().all(|r| is_failure(r.outcome)) {
                let newest = streak[0];
                let mut details = vec![
                    ("failures", n.to_string()),
                    ("last_outcome", newest.outcome.as_str().to_owned()),
                    ("last_run_id", newest.id.to_string()),
                    ("last_instance", newest.instance_id.clone()),
                ];
                if let Some(error) = &newest.error {
                    details.push(("last_error", error.clone()));
                }
                firing.push(Firing {
                    key: incident_key(FAILED_IN_A_ROW, job),
                    rule: FAILED_IN_A_ROW,
                    job: Some(job.clone()),
                    instance: None,
                    summary: format!("{job} failed {n} times in a row"),
                    details,
                });
            }
        }
    }
    let newest = last_runs;
    if let Some(limit) = rules.running_longer_than {
        let limit = TimeDelta::from_std(limit).unwrap_or(TimeDelta::MAX);
        for run in newest.iter().filter(|r| r.outcome == RunState::Running) {
            let running_for = now - run.started_at;
            if running_for > limit {
                firing.push(Firing {
                    key: incident_key(RUNNING_TOO_LONG, &run.job),
                    rule: RUNNING_TOO_LONG,
                    job: Some(run.job.clone()),
                    instance: Some(run.instance_id.clone()),
                    summary: format!(
                        "{} has been running for {}s (limit {}s)",
                        run.job,
                        running_for.num_seconds(),
                        limit.num_seconds()
                    ),
                    details: vec![
                        ("run_id", run.id.to_string()),
                        ("started_at", at(run.started_at)),
                        ("running_for_ms", running_for.num_milliseconds().to_string()),
                    ],
                });
            }
        }
    }
    if let Some(limit) = rules.lock_wait_above {
        let limit = TimeDelta::from_std(limit).unwrap_or(TimeDelta::MAX);
        for run in newest {
            let Some(slot) = run.slot.filter(|_| run.fire_kind == FireKind::Scheduled) else {
                continue;
            };
            let wait = run.started_at - slot;
            if wait > limit {
                firing.push(Firing {
                    key: incident_key(LOCK_WAIT, &run.job),
                    rule: LOCK_WAIT,
                    job: Some(run.job.clone()),
                    instance: Some(run.instance_id.clone()),
                    summary: format!(
                        "{} started {}ms after its slot (limit {}ms)",
                        run.job,
                        wait.num_milliseconds(),
                        limit.num_milliseconds()
                    ),
                    details: vec![
                        ("slot", at(slot)),
                        ("started_at", at(run.started_at)),
                        ("run_id", run.id.to_string()),
                    ],
                });
            }
        }
    }
    if rules.missed_slots {
        for job in view.jobs.iter().filter(|j| j.missed) {
            let mut details = Vec::new();
            if let Some(next) = job.next_fire {
                details.push(("slot", at(next)));
            }
            if let Some(success) = job.last_success {
                details.push(("last_success", at(success)));
            }
            details.push(("live_instances", job.live_instances.len().to_string()));
            firing.push(Firing {
                key: incident_key(MISSED_SLOT, &job.name),
                rule: MISSED_SLOT,
                job: Some(job.name.clone()),
                instance: None,
                summary: match job.next_fire {
                    Some(next) => format!("{} did not run at {}", job.name, at(next)),
                    None => format!("{} did not run at its slot", job.name),
                },
                details,
            });
        }
    }
    if rules.instances_gone {
        // An instance that shut down gracefully left with a zero interval (`leave`).
        for gone in view
            .instances
            .iter()
            .filter(|i| !i.alive && i.info.heartbeat_ms > 0)
        {
            let silent = now - gone.last_heartbeat;
            firing.push(Firing {
                key: incident_key(INSTANCE_GONE, &gone.info.instance_id),
                rule: INSTANCE_GONE,
                job: None,
                instance: Some(gone.info.instance_id.clone()),
                summary: format!(
                    "instance {} on {} stopped heartbeating {}s ago",
                    gone.info.instance_id,
                    gone.info.host,
                    silent.num_seconds()
                ),
                details: vec![
                    ("host", gone.info.host.clone()),
                    ("pid", gone.info.pid.to_string()),
                    ("last_heartbeat", at(gone.last_heartbeat)),
                    ("jobs", gone.jobs.len().to_string()),
                ],
            });
        }
    }
    firing
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_rule_and_subject_and_a_long_subject_is_hashed() {
        assert_eq!(incident_key("missed_slot", "report"), "missed_slot/report");
        let long = "j".repeat(300);
        let key = incident_key("failed_in_a_row", &long);
        assert_eq!(key.chars().count(), MAX_TEXT_LEN);
        let other = incident_key("failed_in_a_row", &format!("{}k", "j".repeat(299)));
        assert_ne!(key, other, "two long names, two keys");
        assert!(key.starts_with("failed_in_a_row/jjj"));
        let wide = "é".repeat(300);
        assert_eq!(
            incident_key("lock_wait", &wide).chars().count(),
            MAX_TEXT_LEN
        );
    }

    fn run(job: &str, id: i64, outcome: RunState) -> RunRecord {
        RunRecord {
            id,
            job: job.into(),
            slot: None,
            fire_kind: FireKind::Scheduled,
            instance_id: "a".into(),
            fence: id as u64,
            started_at: DateTime::UNIX_EPOCH,
            ended_at: Some(DateTime::UNIX_EPOCH),
            outcome,
            error: Some("boom".into()),
            attempt: 1,
            cancel_requested: false,
            params: Default::default(),
        }
    }

    #[test]
    fn a_streak_counts_failures_and_passes_over_what_does_not_count() {
        use RunState::*;
        let view = ClusterView::assemble(
            DateTime::UNIX_EPOCH,
            vec![],
            vec![],
            vec![],
            vec![],
            vec![],
            &Default::default(),
        );
        let rules = AlertRules::default();
        let newest_first = |outcomes: &[RunState]| {
            let n = outcomes.len() as i64;
            let runs: Vec<RunRecord> = outcomes
                .iter()
                .enumerate()
                .map(|(i, &o)| run("billing", n - i as i64, o))
                .collect();
            HashMap::from([("billing".to_owned(), runs)])
        };
        let fires = |outcomes: &[RunState]| {
            !firing(
                &rules,
                DateTime::UNIX_EPOCH,
                &view,
                &[],
                &newest_first(outcomes),
            )
            .is_empty()
        };
        assert!(fires(&[Failed, Panicked, TimedOut]));
        assert!(fires(&[
            Running, Failed, Skipped, Failed, Cancelled, Failed, Succeeded
        ]));
        assert!(!fires(&[Failed, Failed]), "two are not three");
        assert!(!fires(&[Failed, Failed, Succeeded, Failed]));
        assert!(
            !fires(&[Succeeded, Failed, Failed, Failed]),
            "resolved by a success"
        );
        assert!(!fires(&[LockLost, Unfinished, Missed, Failed, Failed]));
    }
}
