//! A heartbeat of more jobs than one SQL statement of one parameter per column can carry.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::{Cluster, ClusterProvider, ControlKind, Heartbeat, InstanceInfo, JobRegistration};
use lock_core::FireSlot;
use lock_core::testkit::unique_name;

/// The jobs of the instance: more than one statement of 13 parameters per row can carry in
/// MySQL and MariaDB (65,535 parameters: 5,041 rows) or SQLite (32,766: 2,520 rows).
const JOBS: usize = 6_000;

/// The jobs the last complete beat keeps: still more than one statement's worth, so that
/// its deletion of the others runs after a beat cut into several statements.
const KEPT_FROM: usize = 500;

/// A complete heartbeat ([`heartbeat`](crate::ClusterStore::heartbeat)) of an instance with
/// 6,000 jobs, then one of 6,000 changed rows
/// ([`heartbeat_changes`](crate::ClusterStore::heartbeat_changes)), the same with the
/// instances read in the same call
/// ([`heartbeat_changes_and_instances`](crate::ClusterStore::heartbeat_changes_and_instances),
/// which must see the beat's own row), then a complete one of
/// 5,500 of them: each succeeds and brings back the pause of one of the jobs, the registry
/// holds exactly the rows written, as written, and the rows of one beat share its
/// `heartbeat_at` (what the complete beat's deletion of the jobs it does not carry relies
/// on). What a service with thousands of jobs (or shards) beats with, on stores whose
/// statements have a parameter limit. Works on tables that hold other rows (its instance id
/// and paused job are its own).
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::heartbeat_of_many_jobs(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn heartbeat_of_many_jobs(provider: &dyn ClusterProvider) {
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let started = FireSlot::new(provider.database_time().await.expect("database time")).instant();
    let instance = InstanceInfo {
        instance_id: unique_name("many-jobs").to_string(),
        host: "testkit-host".into(),
        pid: 4343,
        version: "9.9.9".into(),
        started_at: started,
        clock_offset_ms: 7,
        heartbeat_ms: 1000,
    };
    let beat = |round: i64, jobs: std::ops::Range<usize>| Heartbeat {
        instance: instance.clone(),
        jobs: jobs.map(|i| job(i, round, started)).collect(),
    };
    // The paused job is unique to this instance: its pause is found among other rows.
    let paused = format!("{}-paused", instance.instance_id);
    let mut first = beat(1, 0..JOBS);
    first.jobs[JOBS - 1].name = paused.clone();
    assert!(store.pause(&paused, "testkit@many").await.expect("pause"));
    let pause_polled = |control: Vec<crate::ControlRequest>, what: &str| {
        assert!(
            control
                .iter()
                .any(|c| c.kind == ControlKind::Pause && c.job == paused),
            "{what} brings back the pause of {paused:?}: {control:?}"
        );
    };

    let control = store
        .heartbeat(&first)
        .await
        .expect("a complete heartbeat of 6,000 jobs");
    pause_polled(control, "the complete heartbeat of 6,000 jobs");
    let first_at = registered(store, &first, "the complete heartbeat of 6,000 jobs").await;

    // Apart by more than the stores' time resolution (a millisecond), as a scheduler's beats are.
    let pause = || tokio::time::sleep(Duration::from_millis(5));
    pause().await;
    let mut changed = beat(2, 0..JOBS);
    changed.jobs[JOBS - 1].name = paused.clone();
    let control = store
        .heartbeat_changes(&changed)
        .await
        .expect("a heartbeat of 6,000 changed jobs");
    pause_polled(control, "the heartbeat of 6,000 changed jobs");
    let changed_at = registered(store, &changed, "the heartbeat of 6,000 changed jobs").await;
    assert!(
        changed_at > first_at,
        "the changes were written at a later beat"
    );

    // The same, with the instances read in the same call: the pause again, and the
    // instance's own row among them as this beat wrote it.
    pause().await;
    let mut viewed = beat(4, 0..JOBS);
    viewed.jobs[JOBS - 1].name = paused.clone();
    let (control, instances) = store
        .heartbeat_changes_and_instances(&viewed)
        .await
        .expect("a heartbeat of 6,000 changed jobs with the instances");
    pause_polled(control, "the heartbeat of changes with the instances");
    let viewed_at = registered(
        store,
        &viewed,
        "the heartbeat of changes with the instances",
    )
    .await;
    assert!(
        instances.iter().all(|row| row.job.is_none()),
        "the instances' own rows only"
    );
    let own = instances
        .iter()
        .find(|row| row.instance.instance_id == instance.instance_id)
        .expect("the instance's own row among the instances read with its beat");
    assert_eq!(own.heartbeat_at, viewed_at, "the read sees the beat");
    assert_eq!(own.instance, instance);

    // A complete beat of fewer jobs, still cut: the rows of every statement stay, the
    // jobs it does not carry go.
    pause().await;
    let mut kept = beat(3, KEPT_FROM..JOBS);
    kept.jobs.last_mut().expect("jobs").name = paused.clone();
    let control = store
        .heartbeat(&kept)
        .await
        .expect("a complete heartbeat of 5,500 jobs");
    pause_polled(control, "the complete heartbeat of 5,500 jobs");
    registered(store, &kept, "the complete heartbeat of 5,500 of the jobs").await;

    assert!(store.resume(&paused).await.expect("resume"));
}

/// Job `i` as beat `round` registers it: every field set or not by turns, and changed by
/// each round.
fn job(i: usize, round: i64, started: DateTime<Utc>) -> JobRegistration {
    let at = |seconds: i64| Some(started + TimeDelta::seconds(seconds));
    let offset = i64::try_from(i).expect("a small index");
    JobRegistration {
        name: format!("job-{i:04}"),
        lock_name: format!("lock-{i:04}"),
        trigger: format!("fixed rate {round}s"),
        zone: i.is_multiple_of(2).then(|| "Europe/Berlin".to_owned()),
        next_fire: if i.is_multiple_of(3) {
            None
        } else {
            at(60 * round + offset)
        },
        following_fire: if i.is_multiple_of(5) {
            None
        } else {
            at(60 * round + offset + 60)
        },
    }
}

/// Asserts that the registry holds exactly `beat`'s rows of its instance, as written, all at
/// one `heartbeat_at`; returns it.
async fn registered(store: &dyn Cluster, beat: &Heartbeat, what: &str) -> DateTime<Utc> {
    let id = &beat.instance.instance_id;
    let registry = store.registry().await.expect("registry");
    let rows: Vec<_> = registry
        .into_iter()
        .filter(|r| r.instance.instance_id == *id)
        .collect();
    let own = rows
        .iter()
        .find(|r| r.job.is_none())
        .unwrap_or_else(|| panic!("{what}: the instance's own row"));
    assert_eq!(own.instance, beat.instance, "{what}: the instance's fields");
    let jobs: BTreeMap<&str, &JobRegistration> = rows
        .iter()
        .filter_map(|r| r.job.as_ref())
        .map(|j| (j.name.as_str(), j))
        .collect();
    let sent: BTreeMap<&str, &JobRegistration> =
        beat.jobs.iter().map(|j| (j.name.as_str(), j)).collect();
    assert_eq!(
        jobs.len(),
        sent.len(),
        "{what}: one registry row per job, no other"
    );
    for (name, job) in &sent {
        assert_eq!(jobs.get(name), Some(job), "{what}: the row of {name:?}");
    }
    let times: BTreeMap<DateTime<Utc>, usize> = rows.iter().fold(BTreeMap::new(), |mut n, r| {
        *n.entry(r.heartbeat_at).or_default() += 1;
        n
    });
    assert_eq!(
        times.len(),
        1,
        "{what}: every row of one beat has its heartbeat_at (rows per time: {times:?})"
    );
    own.heartbeat_at
}
