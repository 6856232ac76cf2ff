//! Configuration overrides: a cron, zone or lease from configuration replaces a job's own at
//! `start()`, checked with the macros' messages; unknown job names are refused.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use lock_cluster::ClusterProvider;
use lock_core::{InMemoryLockProvider, JobContext, LockConfiguration, LockError, LockProvider};
use lock_scheduler::{Job, JobOverride, Scheduler, SchedulerBuilder, Trigger};

/// A job that never fires on its own schedule during a test (03:00 on 29 February).
fn rare_job(name: &str, runs: Arc<AtomicUsize>) -> Job {
    Job::new(name, Trigger::cron("0 0 3 29 2 *").unwrap(), move || {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
        }
    })
}

fn builder(provider: Arc<dyn ClusterProvider>) -> SchedulerBuilder {
    Scheduler::builder()
        .lock_provider(provider)
        .shutdown_timeout(Duration::from_secs(5))
}

fn refused(result: Result<Scheduler, LockError>) -> String {
    match result {
        Ok(_) => panic!("start() should have refused the overrides"),
        Err(error) => error.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overridden_cron_and_zone_decide_when_the_job_fires() {
    let runs = Arc::new(AtomicUsize::new(0));
    let scheduler = builder(Arc::new(InMemoryLockProvider::new()))
        .jobs([rare_job("override-cron", runs.clone())])
        .override_job(
            "override-cron",
            JobOverride::new().cron("* * * * * *").zone("Europe/Berlin"),
        )
        .start()
        .await
        .unwrap();
    assert_eq!(
        scheduler.jobs()[0].trigger,
        "cron `* * * * * *` in Europe/Berlin"
    );
    // Every second now, instead of once in four years: the first fire comes within 1 s of
    // start; 10 s bounds the wait on a loaded machine.
    tokio::time::timeout(Duration::from_secs(10), async {
        while runs.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the job did not fire on its overridden cron within 10 s");
    scheduler.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overridden_lease_bounds_are_the_ones_the_lock_holds() {
    let provider: Arc<dyn ClusterProvider> = Arc::new(InMemoryLockProvider::new());
    let leases = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = leases.clone();
    let reader = provider.clone();
    let job = Job::new(
        "override-lease",
        Trigger::fixed_rate(Duration::from_millis(200)).unwrap(),
        move || {
            let (seen, reader) = (seen.clone(), reader.clone());
            async move {
                let ctx = JobContext::current().expect("inside the lock");
                let row = reader
                    .list_locks()
                    .await
                    .unwrap()
                    .into_iter()
                    .find(|row| row.name == ctx.lock_name())
                    .expect("the held lock is listed");
                seen.lock().unwrap().push(row.lock_until - row.locked_at);
            }
        },
    )
    .with_lock(
        LockConfiguration::new("override-lease", Duration::from_secs(60), Duration::ZERO).unwrap(),
    );
    let scheduler = builder(provider.clone())
        .jobs([job])
        // From variables, as a deployment sets them: both bounds replaced.
        .overrides_from_vars([
            ("LOCK_JOB_OVERRIDE_LEASE_LOCK_AT_MOST_FOR", "7s"),
            ("LOCK_JOB_OVERRIDE_LEASE_LOCK_AT_LEAST_FOR", "3s"),
            ("UNRELATED_VARIABLE", "ignored"),
        ])
        .start()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), async {
        while leases.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the job did not run within 10 s");
    scheduler.shutdown().await.unwrap();
    // While the body runs the lease lasts lock_at_most_for (7 s, not the job's 60 s); after
    // release it is kept until lock_at_least_for (3 s).
    assert_eq!(leases.lock().unwrap()[0], chrono::Duration::seconds(7));
    let row = provider
        .list_locks()
        .await
        .unwrap()
        .into_iter()
        .find(|row| row.name == "override-lease")
        .unwrap();
    assert_eq!(row.lock_until - row.locked_at, chrono::Duration::seconds(3));
}

#[tokio::test]
async fn invalid_overrides_are_refused_at_start_with_the_macros_messages() {
    let runs = Arc::new(AtomicUsize::new(0));
    let message = refused(
        builder(Arc::new(InMemoryLockProvider::new()))
            .jobs([rare_job("billing", runs.clone())])
            .override_job(
                "billing",
                JobOverride::new()
                    .cron("0 60 * * * *")
                    .zone("Mars/Olympus_Mons")
                    .lock_at_most_for("30m")
                    .lock_at_least_for("1h"),
            )
            .start()
            .await,
    );
    // The texts of tests/tests/ui/fail/bad-cron-syntax.stderr, unknown-zone.stderr and
    // at-least-exceeds-at-most.stderr, every mistake at once.
    assert_eq!(
        message,
        "invalid configuration: configuration overrides refused: \
         job `billing`: cron \"0 60 * * * *\": invalid cron expression: Component error: Number \
         out of bounds, in the minute field `60` (it accepts 0-59); \
         job `billing`: unknown time zone `Mars/Olympus_Mons`; use an IANA name such as `UTC`, \
         `Europe/Berlin` or `Asia/Shanghai`; \
         job `billing`: `lock_at_least_for = \"1h\"` is longer than `lock_at_most_for = \"30m\"`: \
         a lease cannot be kept longer than it may last at most; lower `lock_at_least_for` or \
         raise `lock_at_most_for`"
    );

    let fixed = Job::new(
        "rate",
        Trigger::fixed_rate(Duration::from_secs(60)).unwrap(),
        || async {},
    );
    let message = refused(
        builder(Arc::new(InMemoryLockProvider::new()))
            .jobs([fixed])
            .overrides_from_vars([
                ("LOCK_JOB_RATE_ZONE", "UTC"),
                ("LOCK_JOB_RATE_LOCK_AT_MOST_FOR", "1s 1ns"),
            ])
            .start()
            .await,
    );
    assert_eq!(
        message,
        "invalid configuration: configuration overrides refused: \
         job `rate`: `zone` applies to `cron` only: `fixed_rate` and `fixed_delay` count elapsed \
         time, not wall-clock time; remove `zone`, or override `cron` too; \
         job `rate`: `lock_at_most_for = \"1s 1ns\"` is finer than a millisecond: lock and \
         trigger durations have millisecond precision; use whole milliseconds (`1ms` at least)"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_override_for_an_unknown_job_names_the_known_ones() {
    let runs = Arc::new(AtomicUsize::new(0));
    let message = refused(
        builder(Arc::new(InMemoryLockProvider::new()))
            .jobs([
                rare_job("sync-bill", runs.clone()),
                rare_job("report", runs.clone()),
            ])
            .override_job("sync_bill", JobOverride::new().cron("@hourly"))
            .overrides_from_vars([("LOCK_JOB_SYNC_BIL_CRON", "@daily")])
            .start()
            .await,
    );
    assert_eq!(
        message,
        "invalid configuration: configuration overrides refused: \
         an override for the unknown job `sync_bill`; the jobs are `sync-bill`, `report`; \
         the variable LOCK_JOB_SYNC_BIL_CRON names no job and setting: it is \
         LOCK_JOB_<JOB>_<CRON|ZONE|LOCK_AT_MOST_FOR|LOCK_AT_LEAST_FOR|PING_URL>, with <JOB> one of \
         SYNC_BILL, REPORT; the jobs are `sync-bill`, `report`"
    );
}

#[tokio::test]
async fn two_jobs_with_one_variable_name_are_refused_when_variables_are_read() {
    let runs = Arc::new(AtomicUsize::new(0));
    let jobs = || {
        [
            rare_job("sync-bill", runs.clone()),
            rare_job("sync_bill", runs.clone()),
        ]
    };
    let message = refused(
        builder(Arc::new(InMemoryLockProvider::new()))
            .jobs(jobs())
            .overrides_from_vars([("LOCK_JOB_SYNC_BILL_CRON", "@daily")])
            .start()
            .await,
    );
    assert_eq!(
        message,
        "invalid configuration: configuration overrides refused: the jobs `sync-bill` and \
         `sync_bill` share the variable name LOCK_JOB_SYNC_BILL_..; rename one of them, or \
         override them with override_job"
    );
    // Without variables, the builder's overrides tell them apart.
    let scheduler = builder(Arc::new(InMemoryLockProvider::new()))
        .jobs(jobs())
        .override_job("sync_bill", JobOverride::new().cron("@hourly"))
        .start()
        .await
        .unwrap();
    let triggers: Vec<(String, String)> = scheduler
        .jobs()
        .into_iter()
        .map(|job| (job.name.to_string(), job.trigger))
        .collect();
    scheduler.shutdown().await.unwrap();
    assert!(
        triggers.contains(&("sync_bill".into(), "cron `@hourly` in UTC".into())),
        "{triggers:?}"
    );
    assert!(
        triggers.contains(&("sync-bill".into(), "cron `0 0 3 29 2 *` in UTC".into())),
        "{triggers:?}"
    );
}

#[test]
fn the_duration_parser_is_the_macros() {
    assert_eq!(
        lock_scheduler::parse_duration("1h 30m").unwrap(),
        Duration::from_secs(5400)
    );
    assert_eq!(
        lock_scheduler::parse_duration("1s 1ns")
            .unwrap_err()
            .to_string(),
        "invalid configuration: `duration = \"1s 1ns\"` is finer than a millisecond: lock and \
         trigger durations have millisecond precision; use whole milliseconds (`1ms` at least)"
    );
}
