//! The operations keys (registry, history, control) on the real Redis: the store's contract
//! (`lock_cluster::testkit::operations_store`, `heartbeat_of_many_jobs`) under a prefix of the
//! test's own, and what is particular to Redis: the key layout (one hash tag, outside the lock
//! listing), a heartbeat that is one script call, exactly one winner among concurrent claims,
//! housekeeping that keeps each job's last run and last success right, a key of another type
//! refused, a dependent job's after requests indexed per child and slot and deleted with their
//! index entries, and stored parameters that do not decode refused naming the row.

mod common;

use lock_cluster::ClusterProvider;
use std::collections::HashMap;
use std::sync::Arc;

use chrono::TimeDelta;
use lock_cluster::{
    Cluster, Expired, Heartbeat, InstanceInfo, JobRegistration, RunEnd, RunStart, RunState,
};
use lock_core::{FireKind, FireSlot, LockError, LockProvider, testkit};
use lock_provider_redis::{RedisLockProvider, redis};
use test_support::redis_server::{Durability, PrivateRedis};

fn store(provider: &RedisLockProvider) -> &dyn Cluster {
    provider.cluster().expect("Redis keeps operations")
}

async fn own_connection(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("a valid URL")
        .get_multiplexed_async_connection()
        .await
        .expect("connect")
}

fn beat(instance: &str, jobs: &[&str], now: chrono::DateTime<chrono::Utc>) -> Heartbeat {
    Heartbeat {
        instance: InstanceInfo {
            instance_id: instance.to_owned(),
            host: "test-host".to_owned(),
            pid: 7,
            version: "0.1.0".to_owned(),
            started_at: FireSlot::new(now).instant(),
            clock_offset_ms: 0,
            heartbeat_ms: 1000,
        },
        jobs: jobs
            .iter()
            .map(|name| JobRegistration {
                name: (*name).to_owned(),
                lock_name: (*name).to_owned(),
                trigger: "fixed rate 1s".to_owned(),
                zone: None,
                next_fire: Some(FireSlot::new(now).instant()),
                following_fire: None,
            })
            .collect(),
    }
}

fn start(job: &str, fence: u64) -> RunStart {
    RunStart {
        job: job.to_owned(),
        slot: None,
        fire_kind: FireKind::Manual,
        instance_id: "test:1:a".to_owned(),
        fence,
        attempt: 1,
        params: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_keys_keep_the_store_contract() {
    let prefix = common::unique_prefix("ops");
    let _cleanup = common::delete_keys(&prefix);
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    lock_cluster::testkit::operations_store(&provider).await;
}

/// A beat of 6,000 jobs: one script call, as every beat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_of_many_jobs() {
    let prefix = common::unique_prefix("ops-beat");
    let _cleanup = common::delete_keys(&prefix);
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    lock_cluster::testkit::heartbeat_of_many_jobs(&provider).await;
}

/// `instances()` picks the instances' own rows out on the server (`READ_INSTANCES`): no job
/// row, whatever quotes and commas its name has, and every instance's row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_are_the_instances_own_rows_whatever_the_job_names() {
    let prefix = common::unique_prefix("ops-inst");
    let _cleanup = common::delete_keys(&prefix);
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    let now = provider.database_time().await.expect("TIME");
    let ops = store(&provider);
    let tricky = ["report", "a,\"\"]", "\"\"", ",\"\"]", "\\"];
    for instance in ["test:1:a", "test:1:b"] {
        ops.heartbeat(&beat(instance, &tricky, now))
            .await
            .expect("heartbeat");
    }
    let rows = ops.instances().await.expect("instances");
    let ids: Vec<&str> = rows
        .iter()
        .map(|r| r.instance.instance_id.as_str())
        .collect();
    assert_eq!(ids, ["test:1:a", "test:1:b"], "{rows:?}");
    assert!(rows.iter().all(|r| r.job.is_none()), "{rows:?}");
    let registry = lock_cluster::OperatorStore::registry(&provider)
        .await
        .expect("registry");
    assert_eq!(registry.len(), 2 * (1 + tricky.len()), "{registry:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operations_keys_share_one_hash_tag_outside_the_lock_listing() {
    let prefix = common::unique_prefix("ops_layout");
    let _cleanup = common::delete_keys(&prefix);
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    let now = provider.database_time().await.expect("TIME");
    let ops = store(&provider);
    ops.heartbeat(&beat("test:1:a", &["report"], now))
        .await
        .expect("heartbeat");
    let run = ops.run_started(&start("report", 1)).await.expect("start");
    // With log lines, so that runs:logs exists too.
    let mut logs = lock_cluster::RunLogWriter::new(10, 4096);
    logs.line(now, "INFO", "report", |m| m.push_str("done"));
    let mut end = RunEnd::new(run, RunState::Succeeded, None);
    end.logs = logs.finish();
    ops.run_ended(&end).await.expect("end");
    ops.pause("report", "op").await.expect("pause");
    let request = ops.request_trigger("report", "op").await.expect("trigger");
    assert!(ops.claim_trigger(request, "test:1:a").await.expect("claim"));
    let action = lock_cluster::ActionRecord::new("report", lock_cluster::Action::Pause, "op");
    ops.record_action(&action).await.expect("action");
    ops.request_after("report", FireSlot::new(now).instant(), "import")
        .await
        .expect("after request");
    // An incident resolved (so in incidents:resolved too) and one open.
    for key in ["failed_in_a_row/report", "instance_gone/web-2"] {
        assert!(ops.open_incident(key, "firing").await.expect("open"));
    }
    assert!(
        ops.resolve_incident("failed_in_a_row/report")
            .await
            .expect("resolve")
    );
    let name = testkit::unique_name("layout");
    let request = testkit::request(&name, "test:1:a", std::time::Duration::from_secs(30), None);
    match provider.acquire(&request).await.expect("acquire") {
        lock_core::AcquireOutcome::Acquired(_) => {}
        refused => panic!("a fresh lock was refused: {refused:?}"),
    }

    let mut conn = own_connection(&common::url()).await;
    let ops_keys = common::scan(&mut conn, &format!("{{{prefix}:ops}}:*")).await;
    // Every kind of row was written, so every key of the layout exists: the eighteen fixed
    // ones and the job's action list.
    assert_eq!(ops_keys.len(), 19, "{ops_keys:?}");
    for key in ["incidents", "incidents:resolved"] {
        assert!(
            ops_keys.contains(&format!("{{{prefix}:ops}}:{key}")),
            "{ops_keys:?}"
        );
    }
    assert!(
        ops_keys.contains(&format!("{{{prefix}:ops}}:actions:job:6:report")),
        "{ops_keys:?}"
    );
    let tag = format!("{{{prefix}:ops}}");
    assert!(ops_keys.iter().all(|k| k.starts_with(&tag)), "{ops_keys:?}");
    // The lock listing (`SCAN <prefix>:*`) sees the lock alone.
    let locks = provider.list_locks().await.expect("list");
    assert_eq!(
        locks.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(),
        [&*name]
    );
    assert_eq!(ops.tables(), format!("redis keys {tag}:*"));
}

/// `INFO commandstats` of a server: command name to calls.
async fn command_calls(conn: &mut redis::aio::MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_is_one_script_call_that_brings_back_pauses_and_triggers() {
    // A server of the test's own: its command statistics are this test's alone.
    let Some(server) = PrivateRedis::start(Durability::Nothing) else {
        return;
    };
    let provider = RedisLockProvider::connect(&server.url())
        .await
        .expect("connect");
    let ops = store(&provider);
    ops.pause("report", "op").await.expect("pause");
    let request = ops.request_trigger("poll", "op").await.expect("trigger");
    let now = provider.database_time().await.expect("TIME");
    let slot = FireSlot::new(now).instant();
    let after = ops
        .request_after("cleanup", slot, "poll")
        .await
        .expect("after request");
    let mut conn = own_connection(&server.url()).await;
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .expect("CONFIG RESETSTAT");

    let control = ops
        .heartbeat(&beat("test:1:a", &["report", "poll", "cleanup"], now))
        .await
        .expect("heartbeat");

    let calls = command_calls(&mut conn).await;
    // Scripts loaded at connect: the heartbeat is one EVALSHA, never EVAL or SCRIPT LOAD
    // (commands the script runs are counted too, under their own names).
    assert_eq!(calls.get("evalsha"), Some(&1), "{calls:?}");
    for other in ["eval", "script|load", "script", "multi", "exec"] {
        assert!(!calls.contains_key(other), "{other}: {calls:?}");
    }
    assert_eq!(
        control
            .iter()
            .map(|c| (c.job.as_str(), c.kind.as_str()))
            .collect::<Vec<_>>(),
        [
            ("report", "pause"),
            ("poll", "trigger"),
            ("cleanup", "after")
        ]
    );
    assert_eq!(control[1].id, request);
    assert_eq!((control[2].id, control[2].slot), (after, Some(slot)));
    assert_eq!(ops.registry().await.expect("registry").len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_of_concurrent_claims_wins() {
    let prefix = common::unique_prefix("ops_claim");
    let _cleanup = common::delete_keys(&prefix);
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    let provider = Arc::new(provider);
    for round in 0..5 {
        let request = store(&provider)
            .request_trigger("report", "op")
            .await
            .expect("trigger");
        let claims: Vec<_> = (0..8)
            .map(|i| {
                let provider = provider.clone();
                tokio::spawn(async move {
                    store(&provider)
                        .claim_trigger(request, &format!("instance-{i}"))
                        .await
                        .expect("claim")
                })
            })
            .collect();
        let mut won = 0;
        for claim in claims {
            won += usize::from(claim.await.expect("claim task"));
        }
        assert_eq!(
            won, 1,
            "round {round}: {won} instances claimed request {request}"
        );
    }
    let control = store(&provider).control().await.expect("control");
    assert_eq!(control.len(), 5);
    assert!(
        control
            .iter()
            .all(|c| c.claimed_by.is_some() && c.claimed_at.is_some())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn housekeeping_keeps_each_jobs_last_run_and_last_success() {
    let prefix = common::unique_prefix("ops_housekeeping");
    let _cleanup = common::delete_keys(&prefix);
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    let ops = store(&provider);
    // Names built to confuse a per-job index: a prefix of another, one with the separator
    // and digits in it.
    let jobs = ["report", "report:1", "6:report", "r"];
    let mut ids: HashMap<&str, Vec<i64>> = HashMap::new();
    for (fence, job) in jobs.iter().enumerate() {
        for outcome in [RunState::Succeeded, RunState::Failed] {
            let id = ops
                .run_started(&start(job, fence as u64 + 1))
                .await
                .expect("start");
            ops.run_ended(&RunEnd::new(
                id,
                outcome,
                Some("boom").filter(|_| outcome == RunState::Failed),
            ))
            .await
            .expect("end");
            ids.entry(job).or_default().push(id);
        }
    }
    for job in jobs {
        let history = ops.history(job, 10).await.expect("history");
        let listed: Vec<i64> = history.iter().map(|r| r.id).collect();
        let mut expected = ids[job].clone();
        expected.reverse();
        assert_eq!(listed, expected, "{job}: its own runs, newest first");
        assert!(history.iter().all(|r| r.job == job));
    }
    assert_eq!(ops.history("report", 0).await.expect("history"), []);

    // The first five runs (all of `report`, `report:1`'s success and failure, and the
    // success of `6:report`) go: a later cut-off, five at most.
    let future = provider.database_time().await.expect("TIME") + TimeDelta::seconds(60);
    assert_eq!(
        ops.delete_expired(Expired::Runs, future, 5)
            .await
            .expect("delete"),
        5
    );
    let last: HashMap<String, i64> = ops
        .last_runs()
        .await
        .expect("last runs")
        .into_iter()
        .map(|r| (r.job, r.id))
        .collect();
    assert_eq!(
        last,
        HashMap::from([
            ("6:report".to_owned(), ids["6:report"][1]),
            ("r".to_owned(), ids["r"][1]),
        ]),
        "a job whose runs are all gone has no last run"
    );
    let successes: Vec<String> = ops
        .last_successes()
        .await
        .expect("successes")
        .into_iter()
        .map(|(job, _)| job)
        .collect();
    assert_eq!(
        successes,
        ["r"],
        "a job whose successful runs are gone has no last success"
    );
    assert_eq!(ops.history("6:report", 10).await.expect("history").len(), 1);
    assert_eq!(
        ops.delete_expired(Expired::Runs, future, 100)
            .await
            .expect("delete"),
        3
    );
    assert!(ops.last_runs().await.expect("last runs").is_empty());
    assert!(ops.last_successes().await.expect("successes").is_empty());
    // Nothing of the history is left behind: the ids counter alone stays.
    let mut conn = own_connection(&common::url()).await;
    let left = common::scan(&mut conn, &format!("{{{prefix}:ops}}:*")).await;
    assert_eq!(left, [format!("{{{prefix}:ops}}:ids")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_of_another_type_where_an_operations_key_goes_is_refused() {
    let prefix = common::unique_prefix("ops_clash");
    let _cleanup = common::delete_keys(&prefix);
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    let ops = store(&provider);
    ops.check().await.expect("no keys yet: nothing to create");
    let key = format!("{{{prefix}:ops}}:runs");
    let mut conn = own_connection(&common::url()).await;
    let () = redis::cmd("SET")
        .arg(&key)
        .arg("someone else's")
        .query_async(&mut conn)
        .await
        .expect("SET");
    match ops.check().await {
        Err(LockError::InvalidConfiguration(message)) => {
            assert!(
                message.contains(&key) && message.contains("string") && message.contains("hash"),
                "{message}"
            );
        }
        other => panic!("expected InvalidConfiguration, got {other:?}"),
    }
    // An operation on it fails with the provider's context, not silently.
    let error = ops
        .run_started(&start("report", 1))
        .await
        .expect_err("WRONGTYPE");
    let tag = format!("{{{prefix}:ops}}");
    assert!(error.to_string().contains(&tag), "{error}");
}

/// A job's action list keeps its newest `ACTIONS_PER_JOB` rows; housekeeping then deletes by
/// time from what is left, and forgets the job once its list is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_action_list_is_capped_and_housekeeping_empties_it() {
    use lock_cluster::{Action, ActionRecord, Expired};
    let prefix = common::unique_prefix("ops_actions");
    let _cleanup = common::delete_keys(&prefix);
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    let ops = store(&provider);
    let cap = lock_provider_redis::ACTIONS_PER_JOB;
    for n in 0..cap + 5 {
        let action = ActionRecord::new("report", Action::Trigger, "op")
            .with_detail(Some(format!("request {n}")));
        ops.record_action(&action).await.expect("record");
    }
    let log = ops.actions("report", u32::MAX).await.expect("read");
    assert_eq!(log.len(), cap, "the cap holds");
    assert_eq!(
        log[0].detail.as_deref(),
        Some(&*format!("request {}", cap + 4))
    );
    assert_eq!(
        log[cap - 1].detail.as_deref(),
        Some("request 5"),
        "the oldest five went"
    );
    let future = provider.database_time().await.expect("TIME") + TimeDelta::seconds(60);
    let first = ops
        .delete_expired(Expired::Actions, future, 600)
        .await
        .expect("delete");
    assert_eq!(first, 600);
    assert_eq!(
        ops.actions("report", 1).await.expect("read")[0].id,
        log[0].id
    );
    let rest = ops
        .delete_expired(Expired::Actions, future, 600)
        .await
        .expect("delete");
    assert_eq!(rest as usize, cap - 600);
    assert!(ops.actions("report", 10).await.expect("read").is_empty());
    let mut conn = own_connection(&common::url()).await;
    let jobs: u64 = redis::cmd("ZCARD")
        .arg(format!("{{{prefix}:ops}}:actions:jobs"))
        .query_async(&mut conn)
        .await
        .expect("ZCARD");
    assert_eq!(jobs, 0, "a job without actions is forgotten");
}

/// The after requests of children whose names confuse a per-child index (a prefix of
/// another, one holding the separator and digits) are read and deleted per child; a
/// `delete_after` of more rows than one script deletes gets them all; housekeeping takes
/// their index entries with them, so nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_requests_are_indexed_per_child_and_leave_nothing_behind() {
    let prefix = common::unique_prefix("ops_after");
    let _cleanup = common::delete_keys(&prefix);
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    let ops = store(&provider);
    let now = provider.database_time().await.expect("TIME");
    let slot = FireSlot::new(now).instant();
    let children = ["report", "report:1", "6:report", "r"];
    for child in children {
        for (n, parent) in ["import", "refunds#1"].into_iter().enumerate() {
            ops.request_after(child, slot + TimeDelta::seconds(n as i64), parent)
                .await
                .expect("after request");
        }
    }
    for child in children {
        assert_eq!(
            ops.after_requests(child, slot).await.expect("read"),
            ["import"],
            "{child}: its own rows alone"
        );
    }
    assert_eq!(
        ops.delete_after("report", slot + TimeDelta::seconds(1))
            .await
            .expect("delete"),
        2
    );
    assert_eq!(
        ops.after_requests("report:1", slot + TimeDelta::seconds(1))
            .await
            .expect("read"),
        ["refunds#1"],
        "another child's rows are kept"
    );

    // More rows than one script deletes: every one goes, counted.
    let many = 1_003;
    for n in 0..many {
        ops.request_after("bulk", slot + TimeDelta::milliseconds(n), "import")
            .await
            .expect("after request");
    }
    let through = slot + TimeDelta::milliseconds(many);
    assert_eq!(
        ops.delete_after("bulk", through).await.expect("delete"),
        many as u64
    );
    assert!(
        ops.after_requests("bulk", slot)
            .await
            .expect("read")
            .is_empty()
    );

    assert!(
        ops.request_after(
            "old",
            chrono::DateTime::UNIX_EPOCH - TimeDelta::seconds(1),
            "x"
        )
        .await
        .is_err(),
        "a slot before 1970 is refused, not stored out of order"
    );

    let future = provider.database_time().await.expect("TIME") + TimeDelta::seconds(60);
    assert_eq!(
        ops.delete_expired(Expired::ClaimedTriggers, future, 5)
            .await
            .expect("housekeeping"),
        5,
        "bounded by the limit"
    );
    assert_eq!(
        ops.delete_expired(Expired::ClaimedTriggers, future, 100)
            .await
            .expect("housekeeping"),
        1
    );
    assert!(ops.control().await.expect("control").is_empty());
    let mut conn = own_connection(&common::url()).await;
    let left = common::scan(&mut conn, &format!("{{{prefix}:ops}}:*")).await;
    assert_eq!(left, [format!("{{{prefix}:ops}}:ids")]);
}

/// A parameters text written by hand that breaks the rule is refused by every read, with the
/// row named, rather than read as "no parameters".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_parameters_that_do_not_decode_are_an_error_naming_the_row() {
    let prefix = common::unique_prefix("ops_params");
    let _cleanup = common::delete_keys(&prefix);
    let Some(provider) = common::provider_with_prefix(&prefix).await else {
        return;
    };
    let ops = store(&provider);
    let params = lock_core::Params::parse_pairs(["day=2026-12-01"]).expect("params");
    let request = ops
        .request_trigger_with_params("report", "op", &params)
        .await
        .expect("trigger");
    let mut run = start("report", 1);
    run.params = params;
    let run = ops.run_started(&run).await.expect("start");
    let mut conn = own_connection(&common::url()).await;
    // The same rows with a key no `--param` accepts.
    for (hash, id) in [("control", request), ("runs", run)] {
        let key = format!("{{{prefix}:ops}}:{hash}");
        let raw: String = redis::cmd("HGET")
            .arg(&key)
            .arg(id)
            .query_async(&mut conn)
            .await
            .expect("HGET");
        let bad = raw.replace("day=2026-12-01", "bad key=1");
        assert_ne!(raw, bad, "{raw}");
        let () = redis::cmd("HSET")
            .arg(&key)
            .arg(id)
            .arg(bad)
            .query_async(&mut conn)
            .await
            .map(|_: i64| ())
            .expect("HSET");
    }
    let chain = |error: LockError| test_support::skip::chain(&error);
    let error = chain(ops.control().await.expect_err("control"));
    assert!(
        error.contains(&format!("control request {request} of job `report`")),
        "{error}"
    );
    let now = provider.database_time().await.expect("TIME");
    let error = chain(
        ops.heartbeat(&beat("test:1:a", &[], now))
            .await
            .expect_err("heartbeat"),
    );
    assert!(
        error.contains(&format!("control request {request}")),
        "{error}"
    );
    let error = chain(ops.history("report", 10).await.expect_err("history"));
    assert!(
        error.contains(&format!("run {run} of job `report`")),
        "{error}"
    );
    // Withdrawing the request ends it.
    assert!(ops.withdraw_trigger(request).await.expect("withdraw"));
    ops.heartbeat(&beat("test:1:a", &[], now))
        .await
        .expect("heartbeat");
}
