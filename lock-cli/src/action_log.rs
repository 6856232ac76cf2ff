//! The action log from the command line: what `pause`, `resume`, `trigger` and `unlock --force`
//! write there (as `lockctl:<user>@<host>`, after the action succeeded, also when it changed
//! nothing), and `actions JOB`, which reads it back (the dashboard's actions too).
//!
//! An action whose log row cannot be written still stands: lockctl says so on stderr and exits
//! 0 (the action was done).

use lock_cluster::ClusterProvider;
use lock_cluster::{Action, ActionRecord, Cluster};
use serde::Serialize;

use crate::Failure;
use crate::output::{instant, or_dash, pretty_json, text_table};
use crate::tables::{failed, store};

/// Who asked, as the control table and the action log keep it: `lockctl:<user>@<host>`, the
/// user from `$USER` (`$USERNAME` on Windows).
pub(crate) fn requester() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("USERNAME"))
        .unwrap_or_else(|_| "unknown".to_owned());
    let host = gethostname::gethostname();
    format!("lockctl:{user}@{}", host.to_string_lossy())
}

/// Writes `action` on each of `jobs` to the action log; on failure, says on stderr that the
/// action (which stands) was not recorded.
pub(crate) async fn record(
    store: &dyn Cluster,
    jobs: &[String],
    action: Action,
    detail: Option<String>,
) {
    let by = requester();
    for job in jobs {
        let entry =
            ActionRecord::new(job.as_str(), action, by.as_str()).with_detail(detail.clone());
        if let Err(error) = store.record_action(&entry).await {
            let message = format!(
                "lockctl: the {action} of {job:?} was done, but not recorded in the action log \
                 ({}): {error}",
                store.tables()
            );
            eprintln!("{}", crate::terminal::lines(&message));
            return;
        }
    }
}

/// After `unlock --force`: the release of lock `name` (the row as it was: `held`, `locked_by`,
/// `lock_until`, `fence`), logged under each registered job that runs under it, or under the
/// lock's name when none does. A provider without operations tables has no log to write.
pub(crate) async fn record_unlock(provider: &dyn ClusterProvider, before: &lock_core::LockRecord) {
    let Some(store) = provider.cluster() else {
        return;
    };
    let name = &before.name;
    let mut jobs: Vec<String> = match store.registry().await {
        Ok(rows) => rows
            .into_iter()
            .filter_map(|row| row.job)
            .filter(|job| job.lock_name == *name)
            .map(|job| job.name)
            .collect(),
        // The unlock is recorded all the same, under the lock's name.
        Err(_) => Vec::new(),
    };
    jobs.sort();
    jobs.dedup();
    if jobs.is_empty() {
        jobs.push(name.clone());
    }
    let detail = if before.held {
        format!(
            "released lock {name}: it was held by {} until {}, fence {}",
            before.locked_by,
            instant(before.lock_until),
            before.fence
        )
    } else {
        format!("lock {name} was not held; nothing changed")
    };
    record(store, &jobs, Action::Unlock, Some(detail)).await;
}

/// One action log row as printed: the fields of `actions --json`.
#[derive(Debug, Serialize)]
struct ActionRow {
    id: i64,
    at: String,
    job: String,
    action: &'static str,
    by: String,
    detail: Option<String>,
}

/// `actions NAME [--limit N] [--json]`: the job's action log, newest first.
pub(crate) async fn actions(
    provider: &dyn ClusterProvider,
    name: &str,
    limit: u32,
    json_out: bool,
) -> Result<String, Failure> {
    let log = store(provider)?
        .actions(name, limit)
        .await
        .map_err(|e| failed(format!("cannot read the action log of job {name:?}"), e))?;
    let rows: Vec<ActionRow> = log
        .iter()
        .map(|a| ActionRow {
            id: a.id,
            at: instant(a.at),
            job: a.job.clone(),
            action: a.action.as_str(),
            by: a.requested_by.clone(),
            detail: a.detail.clone(),
        })
        .collect();
    if json_out {
        return Ok(pretty_json(&rows));
    }
    let cells = rows
        .into_iter()
        .map(|r| {
            vec![
                r.at,
                r.action.to_owned(),
                r.by,
                or_dash(r.detail.map(|d| d.replace('\n', " "))),
            ]
        })
        .collect();
    Ok(text_table(&["AT", "ACTION", "BY", "DETAIL"], cells))
}
