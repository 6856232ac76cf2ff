//! The evaluation job's body: reads the cluster's tables, evaluates the rules
//! (`evaluate.rs`), records each incident that begins or ends (the store's
//! [`open_incident`](lock_cluster::ClusterStore::open_incident) and
//! [`resolve_incident`](lock_cluster::ClusterStore::resolve_incident)) and, where this
//! evaluation's write was the one that changed it, tells every notifier.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use lock_alerts::{Notice, NoticeState, Notifier};
use lock_cluster::{ClusterOptions, ClusterProvider, ClusterView, Incident, RunRecord};
use lock_core::LockError;

use super::AlertRules;
use super::evaluate::{self, Firing};

/// Histories read at once for `failed_in_a_row`: failing jobs are few, and a pool must keep
/// connections for the jobs' own work.
const HISTORY_READS_AT_ONCE: usize = 4;

/// What one evaluation needs: the provider, the notifiers and the rules.
pub(super) struct Evaluator {
    pub(super) provider: Arc<dyn ClusterProvider>,
    pub(super) notifiers: Vec<Arc<dyn Notifier>>,
    pub(super) rules: AlertRules,
    pub(super) cluster: String,
}

impl Evaluator {
    /// One evaluation. An error (a table missing, the database away) fails this run of the
    /// job, which its history shows; the next one starts afresh, and an incident already
    /// recorded is not sent again.
    pub(super) async fn evaluate(&self) -> Result<(), LockError> {
        let store = self.provider.cluster().ok_or_else(|| {
            LockError::InvalidConfiguration(
                "alert rules: the provider keeps no cluster tables".into(),
            )
        })?;
        let open = store.open_incidents().await?;
        let now = self.provider.database_time().await?;
        let last_runs = store.last_runs().await?;
        let view = ClusterView::assemble(
            now,
            store.registry().await?,
            store.control().await?,
            last_runs.clone(),
            store.last_successes().await?,
            self.provider.list_locks().await?,
            &ClusterOptions {
                missed_grace: self.rules.missed_grace,
            },
        );
        // A running row of an instance that is gone shows as unfinished: it is the instance's
        // incident, not the job's.
        let newest = view.resolve_runs(last_runs);
        let open_keys: HashSet<&str> = open.iter().map(|i| i.key.as_str()).collect();
        let candidates =
            evaluate::streak_candidates(&self.rules, &newest, &|key| open_keys.contains(key));
        let window = evaluate::streak_window(&self.rules);
        let reads = candidates
            .into_iter()
            .map(str::to_owned)
            .map(|job| async move {
                let runs = store.history(&job, window).await?;
                Ok::<_, LockError>((job, runs))
            });
        let histories: HashMap<String, Vec<RunRecord>> = futures_util::stream::iter(reads)
            .buffer_unordered(HISTORY_READS_AT_ONCE)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<_, _>>()?;
        let firing = evaluate::firing(&self.rules, now, &view, &newest, &histories);

        let firing_keys: HashSet<&str> = firing.iter().map(|f| f.key.as_str()).collect();
        for incident in firing
            .iter()
            .filter(|f| !open_keys.contains(f.key.as_str()))
        {
            if store
                .open_incident(&incident.key, &incident.summary)
                .await?
            {
                self.tell(&self.firing_notice(incident, now)).await;
            }
        }
        for incident in open
            .iter()
            .filter(|i| !firing_keys.contains(i.key.as_str()))
        {
            if store.resolve_incident(&incident.key).await? {
                self.tell(&self.resolved_notice(incident, &view, now)).await;
            }
        }
        Ok(())
    }

    fn firing_notice(&self, firing: &Firing, now: DateTime<Utc>) -> Notice {
        let mut notice = Notice::new(
            firing.key.clone(),
            firing.rule,
            NoticeState::Firing,
            firing.summary.clone(),
            now,
            self.cluster.clone(),
        );
        if let Some(job) = &firing.job {
            notice = notice.job(job.clone());
        }
        if let Some(instance) = &firing.instance {
            notice = notice.instance(instance.clone());
        }
        for (name, value) in &firing.details {
            notice = notice.detail(*name, value.clone());
        }
        notice
    }

    /// The resolved notice of `incident`: its rule and subject from its key
    /// (`<rule>/<subject>`), a summary saying what ended.
    fn resolved_notice(
        &self,
        incident: &Incident,
        view: &ClusterView,
        now: DateTime<Utc>,
    ) -> Notice {
        let (rule, subject) = incident.key.split_once('/').unwrap_or((&incident.key, ""));
        let summary = match rule {
            evaluate::FAILED_IN_A_ROW => format!("{subject} succeeded again"),
            evaluate::RUNNING_TOO_LONG => format!("{subject} is no longer running too long"),
            evaluate::MISSED_SLOT => format!("{subject} runs at its slots again"),
            evaluate::LOCK_WAIT => format!("{subject} starts within the lock-wait limit again"),
            evaluate::INSTANCE_GONE => {
                let back = view
                    .instances
                    .iter()
                    .any(|i| i.info.instance_id == subject && i.alive);
                if back {
                    format!("instance {subject} is heartbeating again")
                } else {
                    format!("instance {subject} left the registry (it did not come back)")
                }
            }
            _ => format!("{}: resolved", incident.key),
        };
        let at = incident
            .opened_at
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let notice = Notice::new(
            incident.key.clone(),
            rule,
            NoticeState::Resolved,
            summary,
            now,
            self.cluster.clone(),
        )
        .detail("opened_at", at)
        .detail("was", incident.summary.clone());
        match rule {
            evaluate::INSTANCE_GONE => notice.instance(subject),
            _ => notice.job(subject),
        }
    }

    /// Sends `notice` to every notifier at once; a notifier that fails (after its own
    /// retries) is logged, and the others are not held up by it.
    async fn tell(&self, notice: &Notice) {
        let sends = self.notifiers.iter().map(|notifier| async move {
            match notifier.notify(notice).await {
                Ok(()) => tracing::info!(
                    notifier = notifier.name(),
                    incident = %notice.incident_key,
                    state = %notice.state,
                    "alert sent"
                ),
                Err(error) => tracing::warn!(
                    notifier = notifier.name(),
                    incident = %notice.incident_key,
                    state = %notice.state,
                    error = &error as &dyn std::error::Error,
                    "alert not delivered; it is not sent again"
                ),
            }
        });
        futures_util::future::join_all(sends).await;
    }
}
