//! The alert rules evaluated by the scheduler, through real schedulers sharing one in-memory
//! provider (a cluster in one process): each incident told once across the instances, its
//! resolution once, and a graceful stop is not an instance gone. The multi-process tests with
//! real receivers (webhook, SMTP) and a killed instance are in `fault-tests`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lock_alerts::{Notice, NoticeState, Notifier, NotifyError};
use lock_core::InMemoryLockProvider;
use lock_scheduler::{ALERT_RULES_JOB, AlertRules, Job, Scheduler, Trigger};
use tokio::sync::mpsc;

/// Hands every notice to the test, as a user's own notifier would hand it on.
struct Recorder {
    name: String,
    notices: mpsc::UnboundedSender<(String, Notice)>,
}

#[async_trait]
impl Notifier for Recorder {
    fn name(&self) -> &str {
        &self.name
    }

    async fn notify(&self, notice: &Notice) -> Result<(), NotifyError> {
        let _ = self.notices.send((self.name.clone(), notice.clone()));
        Ok(())
    }
}

fn rules() -> AlertRules {
    AlertRules::default()
        .every(Duration::from_secs(1))
        .cluster("test")
}

/// The next notice of `key`, within `within`; others (another rule's) are passed over.
async fn next_of(
    notices: &mut mpsc::UnboundedReceiver<(String, Notice)>,
    key: &str,
    within: Duration,
) -> (String, Notice) {
    tokio::time::timeout(within, async {
        loop {
            let (by, notice) = notices.recv().await.expect("the notifiers are alive");
            if notice.incident_key == key {
                return (by, notice);
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no notice of {key} within {within:?}"))
}

/// Every notice received within `within` (a quiet period: nothing more is expected).
async fn drain(
    notices: &mut mpsc::UnboundedReceiver<(String, Notice)>,
    within: Duration,
) -> Vec<Notice> {
    let mut seen = Vec::new();
    let _ = tokio::time::timeout(within, async {
        while let Some((_, notice)) = notices.recv().await {
            seen.push(notice);
        }
    })
    .await;
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_failures_across_three_instances_fire_once_and_resolve_once() {
    let provider = Arc::new(InMemoryLockProvider::new());
    let (tx, mut notices) = mpsc::unbounded_channel();
    let failing = Arc::new(AtomicBool::new(true));
    let mut instances = Vec::new();
    for i in 0..3 {
        let failing = failing.clone();
        let job = Job::new(
            "flaky",
            Trigger::fixed_rate(Duration::from_millis(700)).unwrap(),
            move || {
                let failing = failing.load(Ordering::SeqCst);
                async move {
                    match failing {
                        true => Err(std::io::Error::other("the bank said no")),
                        false => Ok(()),
                    }
                }
            },
        );
        let scheduler = Scheduler::builder()
            .lock_provider(provider.clone())
            .instance_id(format!("instance-{i}"))
            .notifier(Recorder {
                name: format!("recorder-{i}"),
                notices: tx.clone(),
            })
            .alert_rules(rules())
            .jobs([job])
            .start()
            .await
            .unwrap();
        instances.push(scheduler);
    }
    drop(tx);
    let key = "failed_in_a_row/flaky";
    let (_, fired) = next_of(&mut notices, key, Duration::from_secs(30)).await;
    assert_eq!(fired.state, NoticeState::Firing);
    assert_eq!(fired.rule, "failed_in_a_row");
    assert_eq!(fired.job.as_deref(), Some("flaky"));
    assert_eq!(fired.cluster, "test");
    assert_eq!(fired.details["failures"], "3");
    assert_eq!(fired.details["last_error"], "the bank said no");
    assert_eq!(fired.summary, "flaky failed 3 times in a row");

    failing.store(false, Ordering::SeqCst);
    let (_, resolved) = next_of(&mut notices, key, Duration::from_secs(30)).await;
    assert_eq!(resolved.state, NoticeState::Resolved, "{resolved:?}");
    assert_eq!(resolved.summary, "flaky succeeded again");
    assert_eq!(resolved.details["was"], "flaky failed 3 times in a row");

    // A graceful stop leaves the registry: with the others evaluating for longer than an
    // instance takes to count as gone (5 heartbeats), nothing fires for it.
    instances.remove(2).shutdown().await.unwrap();
    let later = drain(&mut notices, Duration::from_secs(8)).await;
    assert!(
        later.is_empty(),
        "one firing and one resolved notice, nothing for a graceful stop: {later:#?}"
    );
    for scheduler in instances {
        scheduler.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_over_its_limit_fires_once_and_resolves_when_it_ends() {
    let (tx, mut notices) = mpsc::unbounded_channel();
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .notifier(Recorder {
            name: "recorder".into(),
            notices: tx,
        })
        .alert_rules(rules().running_longer_than(Duration::from_secs(1)))
        .jobs([Job::new(
            "slow",
            Trigger::cron("0 0 3 1 1 *").unwrap(),
            || async { tokio::time::sleep(Duration::from_secs(5)).await },
        )])
        .start()
        .await
        .unwrap();
    let scheduler = Arc::new(scheduler);
    let run = tokio::spawn({
        let scheduler = scheduler.clone();
        async move { scheduler.trigger("slow").await }
    });
    let key = "running_too_long/slow";
    let (_, fired) = next_of(&mut notices, key, Duration::from_secs(10)).await;
    assert_eq!(fired.state, NoticeState::Firing);
    assert_eq!(
        fired.instance.as_deref(),
        Some(scheduler.executor().instance_id())
    );
    assert!(
        fired.summary.starts_with("slow has been running for "),
        "{}",
        fired.summary
    );
    run.await.unwrap().unwrap();
    let (_, resolved) = next_of(&mut notices, key, Duration::from_secs(10)).await;
    assert_eq!(resolved.state, NoticeState::Resolved);
    let later = drain(&mut notices, Duration::from_secs(3)).await;
    assert!(later.is_empty(), "{later:#?}");
    Arc::into_inner(scheduler)
        .unwrap()
        .shutdown()
        .await
        .unwrap();
}

#[tokio::test]
async fn rules_that_cannot_be_evaluated_are_refused_at_start() {
    let (tx, _notices) = mpsc::unbounded_channel();
    let recorder = || Recorder {
        name: "recorder".into(),
        notices: tx.clone(),
    };
    let refused = |result: Result<Scheduler, lock_core::LockError>| match result {
        Ok(_) => panic!("started"),
        Err(error) => error.to_string(),
    };
    let no_history = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .notifier(recorder())
        .no_history()
        .jobs([])
        .start()
        .await;
    assert!(refused(no_history).contains("read the run history"));
    let too_often = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .notifier(recorder())
        .alert_rules(AlertRules::default().every(Duration::from_millis(100)))
        .jobs([])
        .start()
        .await;
    assert!(refused(too_often).contains("every(100ms)"));
    let clash = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .notifier(recorder())
        .jobs([Job::new(
            ALERT_RULES_JOB,
            Trigger::fixed_rate(Duration::from_secs(5)).unwrap(),
            || async {},
        )])
        .start()
        .await;
    assert!(refused(clash).contains(ALERT_RULES_JOB));
}
