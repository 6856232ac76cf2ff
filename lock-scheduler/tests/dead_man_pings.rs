//! A job's dead-man-switch pings, through a real scheduler (in-memory provider) to a real
//! local HTTP receiver: start then success / fail, in order and paired by run id; never ahead
//! of or in the way of the body; nothing for a fire the lock refused; one pair per slot
//! across a cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lock_alerts::DeadManSwitch;
use lock_cluster::ClusterProvider;
use lock_core::{InMemoryLockProvider, JobContext};
use lock_scheduler::{Job, RunOutcome, Scheduler, Trigger};
use test_support::receiver::{Receiver, Recorded, Reply};
use tokio::sync::{Notify, mpsc};

/// A trigger that does not fire during a test: its runs are `Scheduler::trigger`'s.
fn never() -> Trigger {
    Trigger::cron("0 0 3 1 1 *").unwrap()
}

/// (path without the query, the `rid` parameter) of each request, in arrival order.
fn pings(requests: &[Recorded]) -> Vec<(String, String)> {
    requests
        .iter()
        .map(|r| {
            assert_eq!(r.method, "POST", "{}", r.path_and_query);
            let (path, query) = r
                .path_and_query
                .split_once('?')
                .unwrap_or_else(|| panic!("no run id in {}", r.path_and_query));
            let rid = query
                .strip_prefix("rid=")
                .unwrap_or_else(|| panic!("no rid in {}", r.path_and_query));
            (path.to_owned(), rid.to_owned())
        })
        .collect()
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.iter().map(|g| g.len()).eq([8, 4, 4, 4, 12])
        && groups
            .iter()
            .all(|g| g.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_succeeding_and_a_failing_run_each_ping_start_then_their_end() {
    let receiver = Receiver::start().await;
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([
            Job::new("exports", never(), || async {})
                .with_dead_man_switch(DeadManSwitch::healthchecks(&receiver.url("/ok")).unwrap()),
            Job::new("imports", never(), || async {
                Err::<(), _>(std::io::Error::other("the bucket refused the upload"))
            })
            .with_dead_man_switch(DeadManSwitch::healthchecks(&receiver.url("/bad")).unwrap()),
        ])
        .start()
        .await
        .unwrap();
    assert_eq!(
        scheduler.trigger("exports").await.unwrap(),
        RunOutcome::Succeeded
    );
    assert!(matches!(
        scheduler.trigger("imports").await.unwrap(),
        RunOutcome::Failed(_)
    ));
    // Shutdown waits for the pending end pings.
    scheduler.shutdown().await.unwrap();

    let requests = receiver.requests();
    let all = pings(&requests);
    let of = |prefix: &str| -> Vec<&(String, String)> {
        all.iter()
            .filter(|(path, _)| path.starts_with(prefix))
            .collect()
    };
    let ok = of("/ok");
    assert_eq!(ok.len(), 2, "{all:?}");
    assert_eq!((ok[0].0.as_str(), ok[1].0.as_str()), ("/ok/start", "/ok"));
    assert_eq!(ok[0].1, ok[1].1, "start and end share a run id");
    assert!(
        is_uuid(&ok[0].1),
        "healthchecks' rid is a UUID: {}",
        ok[0].1
    );

    let bad = of("/bad");
    assert_eq!(bad.len(), 2, "{all:?}");
    assert_eq!(
        (bad[0].0.as_str(), bad[1].0.as_str()),
        ("/bad/start", "/bad/fail")
    );
    assert_eq!(bad[0].1, bad[1].1);
    assert_ne!(ok[0].1, bad[0].1, "each run has its own id");
    let fail = requests
        .iter()
        .find(|r| r.path_and_query.starts_with("/bad/fail"))
        .unwrap();
    assert!(
        fail.body_text().contains("the bucket refused the upload"),
        "{}",
        fail.body_text()
    );
}

/// The start's answer takes 2 s; the body takes none: the run ends long before the start ping
/// is answered, and the end ping still comes after it. The 2 s are the margin for the run
/// itself (an in-memory lock and an empty body) on a loaded machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_faster_than_the_start_ping_still_pings_start_first_and_is_not_delayed() {
    let receiver = Receiver::start().await;
    let slow = Duration::from_secs(2);
    receiver.script([Reply::status(200).after(slow)]);
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([Job::new("quick", never(), || async {})
            .with_dead_man_switch(DeadManSwitch::healthchecks(&receiver.url("/q")).unwrap())])
        .start()
        .await
        .unwrap();
    let began = Instant::now();
    assert_eq!(
        scheduler.trigger("quick").await.unwrap(),
        RunOutcome::Succeeded
    );
    let run = began.elapsed();
    assert!(
        run < slow,
        "the run waited for the start ping: {run:?} (the monitor answers after {slow:?})"
    );
    scheduler.shutdown().await.unwrap();
    let all = pings(&receiver.requests());
    let paths: Vec<&str> = all.iter().map(|(path, _)| path.as_str()).collect();
    assert_eq!(paths, ["/q/start", "/q"]);
    assert_eq!(all[0].1, all[1].1);
}

/// While another instance's run holds the lock, a fire is refused and pings nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_refused_by_the_lock_pings_nothing() {
    let receiver = Receiver::start().await;
    let provider: Arc<dyn ClusterProvider> = Arc::new(InMemoryLockProvider::new());
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let holder = {
        let release = release.clone();
        Scheduler::builder()
            .lock_provider(provider.clone())
            .instance_id("holder")
            .jobs([Job::new("report", never(), move || {
                let (started_tx, release) = (started_tx.clone(), release.clone());
                async move {
                    started_tx.send(()).unwrap();
                    release.notified().await;
                }
            })])
            .start()
            .await
            .unwrap()
    };
    let pinger = Scheduler::builder()
        .lock_provider(provider.clone())
        .instance_id("pinger")
        .jobs([Job::new("report", never(), || async {})
            .with_dead_man_switch(DeadManSwitch::healthchecks(&receiver.url("/r")).unwrap())])
        .start()
        .await
        .unwrap();
    let holding = {
        let holder = holder.clone();
        tokio::spawn(async move { holder.trigger("report").await })
    };
    started.recv().await.unwrap();
    assert_eq!(pinger.trigger("report").await.unwrap(), RunOutcome::Skipped);
    release.notify_one();
    assert_eq!(holding.await.unwrap().unwrap(), RunOutcome::Succeeded);
    pinger.shutdown().await.unwrap();
    holder.shutdown().await.unwrap();
    assert_eq!(
        pings(&receiver.requests()),
        Vec::<(String, String)>::new(),
        "a refused fire sends no ping"
    );
}

/// Two instances on one provider, a job every second: each slot's run pings exactly one
/// start and one end, from the instance that ran it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_ping_one_pair_per_slot() {
    let receiver = Receiver::start().await;
    let provider: Arc<dyn ClusterProvider> = Arc::new(InMemoryLockProvider::new());
    let slots = Arc::new(Mutex::new(Vec::new()));
    let mut schedulers = Vec::new();
    for i in 0..2 {
        let slots = slots.clone();
        let job = Job::new(
            "every_second",
            Trigger::cron("* * * * * *").unwrap(),
            move |ctx: JobContext| {
                let slots = slots.clone();
                async move {
                    slots.lock().unwrap().push(ctx.scheduled_at().unwrap());
                }
            },
        )
        .with_dead_man_switch(DeadManSwitch::healthchecks(&receiver.url("/s")).unwrap());
        schedulers.push(
            Scheduler::builder()
                .lock_provider(provider.clone())
                .instance_id(format!("instance-{i}"))
                .jobs([job])
                .start()
                .await
                .unwrap(),
        );
    }
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    for scheduler in &schedulers {
        scheduler.shutdown().await.unwrap();
    }
    let slots = slots.lock().unwrap().clone();
    let distinct: BTreeSet<_> = slots.iter().collect();
    assert_eq!(distinct.len(), slots.len(), "a slot ran twice: {slots:?}");
    assert!(
        slots.len() >= 2,
        "expected 2 slots or more in 3.5 s: {slots:?}"
    );

    let mut by_run: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (path, rid) in pings(&receiver.requests()) {
        by_run.entry(rid).or_default().push(path);
    }
    assert_eq!(by_run.len(), slots.len(), "one run id per slot: {by_run:?}");
    for (rid, paths) in &by_run {
        assert_eq!(paths, &["/s/start", "/s"], "run {rid}");
    }
}

/// One start and one end per fire: a run whose first attempt fails and whose retry succeeds
/// pings start then success, nothing for the failed attempt; a run that times out pings fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_ping_once_per_fire_and_a_timeout_is_a_failure() {
    let receiver = Receiver::start().await;
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([
            Job::new("flaky", never(), |ctx: JobContext| async move {
                if ctx.attempt() == 1 {
                    Err("upstream busy")
                } else {
                    Ok(())
                }
            })
            .with_retries(1, Duration::from_millis(20))
            .with_dead_man_switch(DeadManSwitch::healthchecks(&receiver.url("/f")).unwrap()),
            Job::new("stuck", never(), |ctx: JobContext| async move {
                ctx.cancelled().await;
                std::future::pending::<()>().await;
            })
            .with_timeout(Duration::from_millis(100))
            .with_dead_man_switch(DeadManSwitch::healthchecks(&receiver.url("/t")).unwrap()),
        ])
        .start()
        .await
        .unwrap();
    assert_eq!(
        scheduler.trigger("flaky").await.unwrap(),
        RunOutcome::Succeeded
    );
    assert_eq!(
        scheduler.trigger("stuck").await.unwrap(),
        RunOutcome::TimedOut
    );
    scheduler.shutdown().await.unwrap();
    let requests = receiver.requests();
    let paths: Vec<String> = pings(&requests).into_iter().map(|(path, _)| path).collect();
    let of = |prefix: &str| -> Vec<&str> {
        paths
            .iter()
            .filter(|p| p.starts_with(prefix))
            .map(String::as_str)
            .collect()
    };
    assert_eq!(of("/f"), ["/f/start", "/f"]);
    assert_eq!(of("/t"), ["/t/start", "/t/fail"]);
    let fail = requests
        .iter()
        .find(|r| r.path_and_query.starts_with("/t/fail"))
        .unwrap();
    assert_eq!(fail.body_text(), "timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_url_from_configuration_replaces_the_switch_in_code() {
    let receiver = Receiver::start().await;
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([Job::new("sync-bill", never(), || async {})
            .with_dead_man_switch(DeadManSwitch::healthchecks(&receiver.url("/code")).unwrap())])
        .overrides_from_vars([("LOCK_JOB_SYNC_BILL_PING_URL", receiver.url("/configured"))])
        .start()
        .await
        .unwrap();
    assert_eq!(
        scheduler.trigger("sync-bill").await.unwrap(),
        RunOutcome::Succeeded
    );
    scheduler.shutdown().await.unwrap();
    let paths: Vec<String> = pings(&receiver.requests())
        .into_iter()
        .map(|(path, _)| path)
        .collect();
    assert_eq!(
        paths,
        ["/configured/start", "/configured"],
        "healthchecks' convention"
    );

    let refused = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .jobs([Job::new("sync-bill", never(), || async {})])
        .overrides_from_vars([(
            "LOCK_JOB_SYNC_BILL_PING_URL",
            "ftp://secret-token@example.com",
        )])
        .start()
        .await;
    let message = match refused {
        Ok(_) => panic!("an ftp URL is refused"),
        Err(error) => error.to_string(),
    };
    assert!(
        message.contains("job `sync-bill`: ping_url: invalid healthchecks URL"),
        "{message}"
    );
    assert!(!message.contains("secret-token"), "{message}");
}
