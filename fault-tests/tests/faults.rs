//! Scenarios 1, 2 and 4 to 7 of the fault tests (3 is `clock_skew.rs`): real service processes, broken on purpose, against
//! PostgreSQL, MariaDB, a shared SQLite file and Redis (holder killed, holder paused, link cut;
//! Redis restarts are `redis_restart.rs`). Every time compared is the database's clock.
//!
//! Tests are named `<scenario>::<provider>`; `cargo test -p fault-tests --test faults
//! holder_killed` runs one scenario for every provider. See RELIABILITY.md.

#[macro_use]
mod common;

use std::time::{Duration, Instant};

use common::proxy::{Proxy, proxied, upstream_of};
use common::{Fixture, Instance, Provider, duplicate_slots, eventually, seconds_between};
use fault_tests::Run;

const SECOND: Duration = Duration::from_secs(1);

scenario!(holder_killed: postgres => Postgres, mysql => MySql, sqlite => Sqlite, redis => Redis,
    sqlx_postgres => SqlxPostgres, sqlx_mysql => SqlxMySql, sqlx_sqlite => SqlxSqlite);
scenario!(holder_paused: postgres => Postgres, mysql => MySql, sqlite => Sqlite, redis => Redis);
scenario!(partition: postgres => Postgres, mysql => MySql, redis => Redis,
    sqlx_postgres => SqlxPostgres, sqlx_mysql => SqlxMySql);
scenario!(partition_dark: postgres => Postgres, mysql => MySql, redis => Redis);
scenario!(rolling_restart: postgres => Postgres, mysql => MySql, sqlite => Sqlite);
scenario!(graceful_stop: postgres => Postgres, mysql => MySql, sqlite => Sqlite);
scenario!(bad_configuration: postgres => Postgres, mysql => MySql, sqlite => Sqlite);

/// Starts instances `letters` of the fixture's service with `configure` applied, waits until
/// every one is ready.
async fn start(
    fx: &Fixture,
    letters: &[&str],
    configure: impl Fn(common::Service) -> common::Service,
) -> Vec<Instance> {
    let mut instances: Vec<Instance> = letters
        .iter()
        .map(|l| configure(fx.service(l)).spawn())
        .collect();
    for instance in &mut instances {
        instance.ready().await;
    }
    instances
}

/// Splits `instances` into the one named `name` and the others.
fn take(instances: Vec<Instance>, name: &str) -> (Instance, Vec<Instance>) {
    let (mine, others): (Vec<Instance>, Vec<Instance>) =
        instances.into_iter().partition(|i| i.name == name);
    let mine = mine
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no instance {name}"));
    (mine, others)
}

fn first_run_of(job: &'static str) -> impl Fn(&[Run]) -> Option<Run> {
    move |runs| runs.iter().find(|r| r.job == job).cloned()
}

fn run_after(job: &'static str, fence: i64) -> impl Fn(&[Run]) -> Option<Run> {
    move |runs| {
        runs.iter()
            .find(|r| r.job == job && r.fence > fence)
            .cloned()
    }
}

/// Scenario 1: `SIGKILL` to the holder mid-run: nobody runs the job until `lock_at_most_for`
/// has passed by the database's clock, then the next slot runs once.
async fn holder_killed(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "kill").await else {
        return;
    };
    // `long`: every second, runs 20 s, lease 4 s.
    let instances = start(&fx, &["A", "B"], |s| s.jobs("long")).await;
    let first = fx
        .wait_for_run(5 * SECOND, "the first run of `long`", first_run_of("long"))
        .await;
    let (mut holder, mut others) = take(instances, &first.instance);
    tokio::time::sleep(Duration::from_millis(500)).await;
    holder.signal("KILL");
    holder
        .wait_exit(5 * SECOND)
        .await
        .expect("the killed holder is gone");

    let lease = fx.lock_row("long").await.expect("the lock row");
    assert_eq!(
        (lease.locked_by.as_str(), lease.fence as i64),
        (first.instance.as_str(), first.fence)
    );
    let expiry = lease.lock_until.timestamp_millis();
    assert_eq!(
        expiry - lease.locked_at.timestamp_millis(),
        4000,
        "lease = lock_at_most_for"
    );

    let wait = Duration::from_millis((expiry - fx.now().await).max(0) as u64) + 4 * SECOND;
    let next = fx
        .wait_for_run(
            wait,
            "a run after the lease expired",
            run_after("long", first.fence),
        )
        .await;
    // Two more slots' worth of time: nothing else may start (the new holder runs 20 s).
    tokio::time::sleep(2 * SECOND).await;
    let runs = fx.runs_of("long").await;

    let survivor = &mut others[0];
    let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
    assert_eq!(
        ids,
        [first.id, next.id],
        "exactly one run after the kill: {runs:?}"
    );
    assert_eq!(next.instance, survivor.name);
    assert_eq!(
        next.fence,
        first.fence + 1,
        "no grant between the kill and the takeover"
    );
    assert!(first.ended.is_none(), "the holder died mid-run: {first:?}");
    assert!(
        next.started >= expiry,
        "takeover at {} before the lease ended at {expiry} (database clock)",
        next.started
    );
    let slot = next.slot.expect("a cron run has a slot");
    assert!(
        slot > first.slot.unwrap() && slot <= expiry + 2000,
        "the takeover ran slot {slot}, expected the first slot at or after the expiry {expiry}"
    );
    let (errors, _) = survivor.stop(10 * SECOND).await;
    assert_eq!(errors, 0, "{}", survivor.stderr.text());
    fx.cleanup().await;
}

/// Scenario 2: `SIGSTOP` to the holder past its lease: another instance takes over with a
/// higher fence; after `SIGCONT` the paused instance's extend and release are refused, its
/// `cancelled()` resolves and its fenced write changes nothing.
async fn holder_paused(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "pause").await else {
        return;
    };
    // `guarded`: every second, lease 3 s kept alive, fenced write at start and end, runs until
    // cancelled (30 s at most).
    let instances = start(&fx, &["A", "B"], |s| s.jobs("guarded")).await;
    let first = fx
        .wait_for_run(
            5 * SECOND,
            "the first run of `guarded`",
            first_run_of("guarded"),
        )
        .await;
    let (mut paused, mut others) = take(instances, &first.instance);
    // The body records its start, then makes its first fenced write: pause it after that write
    // (pausing between the two would make the write a late one).
    eventually(3 * SECOND, "the first run's fenced write", || async {
        (fx.runs.guarded().await.unwrap().0 == first.fence).then_some(())
    })
    .await;
    paused.signal("STOP");
    // Let an extension already on the wire land, then read the lease the paused holder has.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let lease = fx.lock_row("guarded").await.expect("the lock row");
    assert_eq!(lease.locked_by, paused.name);
    let expiry = lease.lock_until.timestamp_millis();

    let wait = Duration::from_millis((expiry - fx.now().await).max(0) as u64) + 4 * SECOND;
    let taker = fx
        .wait_for_run(
            wait,
            "a takeover while the holder is paused",
            run_after("guarded", first.fence),
        )
        .await;
    let other = &mut others[0];
    assert_eq!(taker.instance, other.name);
    assert!(taker.fence > first.fence);
    assert!(
        taker.started >= expiry,
        "takeover at {} before the paused holder's lease ended at {expiry}",
        taker.started
    );
    // The taker's fenced write is in before the paused holder wakes up.
    eventually(3 * SECOND, "the taker's fenced write", || async {
        (fx.runs.guarded().await.unwrap().0 == taker.fence).then_some(())
    })
    .await;

    tokio::time::sleep(SECOND).await;
    paused.signal("CONT");
    let late = fx
        .wait_for_run(5 * SECOND, "the paused run to end", |runs| {
            runs.iter()
                .find(|r| r.id == first.id && r.ended.is_some())
                .cloned()
        })
        .await;
    assert!(
        late.cancelled,
        "cancelled() did not resolve for the paused holder: {late:?}"
    );
    assert_eq!(
        late.first_write,
        Some(1),
        "its fenced write before the pause went in"
    );
    assert_eq!(
        late.late_write,
        Some(0),
        "its fenced write after the pause must be refused"
    );
    paused
        .wait_for_log(3 * SECOND, "lock lost: the lease expired or was taken over")
        .await;
    paused
        .wait_for_log(
            3 * SECOND,
            "lock release found the lease already expired and taken over",
        )
        .await;
    assert_eq!(
        fx.runs.guarded().await.unwrap(),
        (taker.fence, Some(other.name.clone()))
    );
    let row = fx.lock_row("guarded").await.expect("the lock row");
    assert_eq!(
        (row.locked_by.as_str(), row.fence as i64, row.held),
        (other.name.as_str(), taker.fence, true),
        "the paused holder's release left the new owner's lease alone"
    );

    let (errors, warnings) = paused.stop(10 * SECOND).await;
    assert_eq!(errors, 0, "{}", paused.stderr.text());
    assert!(warnings >= 2, "lock lost and release refused are warnings");
    let (errors, _) = other.stop(10 * SECOND).await;
    assert_eq!(errors, 0, "{}", other.stderr.text());
    let taker_run = fx.runs_of("guarded").await;
    let taker_run = taker_run.iter().find(|r| r.id == taker.id).unwrap();
    assert_eq!(
        taker_run.late_write,
        Some(1),
        "the owner's own later write goes in"
    );
    fx.cleanup().await;
}

/// Scenario 4: The holder's link to the database is cut mid-run: takeover after the lease;
/// the cut instance runs no fire while cut and logs the errors; after healing its release
/// leaves the new owner's row alone; nobody panics or stops scheduling.
async fn partition(provider: Provider) {
    partition_with(provider, Break::Cut).await;
}

/// Scenario 4b: The same with a dark link (nothing delivered, nothing closed, as when packets
/// are dropped): exclusion, fencing of the release and recovery hold, and the holder's
/// keep-alive gives up when its lease would end (its extension is bounded by the lease, not
/// by TCP), so `cancelled()` resolves before the takeover even though no call ever fails.
async fn partition_dark(provider: Provider) {
    partition_with(provider, Break::Dark).await;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Break {
    Cut,
    Dark,
}

async fn partition_with(provider: Provider, how: Break) {
    let scenario = match how {
        Break::Cut => "part",
        Break::Dark => "dark",
    };
    let Some(fx) = Fixture::new(provider, scenario).await else {
        return;
    };
    let url = fx.backend.location();
    let default_port = match provider {
        Provider::Postgres | Provider::SqlxPostgres => 5432,
        Provider::Redis => 6379,
        _ => 3306,
    };
    let upstream = upstream_of(&url, default_port).await;
    let proxies = [Proxy::start(upstream).await, Proxy::start(upstream).await];
    // `partitioned`: every second, lease 3 s kept alive, runs 6 s even when cancelled; plus a
    // per-instance `pulse_<instance>` every second that shows whether an instance fires.
    let mut instances = Vec::new();
    for (letter, proxy) in ["A", "B"].iter().zip(&proxies) {
        let mut instance = fx
            .service(letter)
            .jobs("partitioned")
            .arg("--pulse")
            .lock_url(&proxied(&url, proxy.port()))
            .spawn();
        instance.ready().await;
        instances.push(instance);
    }
    let first = fx
        .wait_for_run(
            5 * SECOND,
            "the first run of `partitioned`",
            first_run_of("partitioned"),
        )
        .await;
    let holder_index = instances
        .iter()
        .position(|i| i.name == first.instance)
        .unwrap();
    match how {
        Break::Cut => proxies[holder_index].cut(),
        Break::Dark => proxies[holder_index].darken(),
    }
    let cut_at = fx.now().await;
    let (mut holder, mut others) = take(instances, &first.instance);
    let other = &mut others[0];

    let lease = fx.lock_row("partitioned").await.expect("the lock row");
    assert_eq!(lease.locked_by, holder.name);
    let expiry = lease.lock_until.timestamp_millis();
    let wait = Duration::from_millis((expiry - fx.now().await).max(0) as u64) + 4 * SECOND;
    let taker = fx
        .wait_for_run(
            wait,
            "a takeover while the holder is cut off",
            run_after("partitioned", first.fence),
        )
        .await;
    assert_eq!(taker.instance, other.name);
    assert!(
        taker.started >= expiry && taker.started <= expiry + 2_500,
        "takeover at {} for a lease ending at {expiry}",
        taker.started
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let heal_at = fx.now().await;
    proxies[holder_index].heal();

    // The holder's body ends 6 s after it started, after the heal; then it releases.
    let ended = fx
        .wait_for_run(8 * SECOND, "the cut holder's run to end", |runs| {
            runs.iter()
                .find(|r| r.id == first.id && r.ended.is_some())
                .cloned()
        })
        .await;
    assert!(
        ended.ended.unwrap() > heal_at,
        "the holder's run outlasts the cut"
    );
    assert!(
        ended.cancelled,
        "keep-alive failed during the cut: cancelled() resolves"
    );
    holder
        .wait_for_log(3 * SECOND, "lock lost: extending the lease failed")
        .await;
    holder
        .wait_for_log(
            3 * SECOND,
            "lock release found the lease already expired and taken over",
        )
        .await;
    let row = fx.lock_row("partitioned").await.expect("the lock row");
    assert_eq!(
        (row.locked_by.as_str(), row.fence as i64, row.held),
        (other.name.as_str(), taker.fence, true),
        "the healed holder's release left the new owner's lease alone"
    );

    // While cut, the holder ran no fire (a fire whose lock it took just before the cut may
    // record its start a moment later: 500 ms of grace).
    let pulse = format!("pulse_{}", holder.name);
    let during: Vec<Run> = fx
        .all_runs()
        .await
        .into_iter()
        .filter(|r| r.instance == holder.name && r.started >= cut_at + 500 && r.started <= heal_at)
        .collect();
    assert!(
        during.is_empty(),
        "the cut instance ran fires while cut: {during:?}"
    );
    if how == Break::Cut {
        let failed = holder.stderr.count("lock acquire failed; body not run");
        assert!(
            failed >= 2,
            "the cut instance logs its failed fires (found {failed}):\n{}",
            holder.stderr.text()
        );
    }
    // After the heal it fires again.
    fx.wait_for_run(
        6 * SECOND,
        "the healed instance's pulse to run again",
        |runs| {
            runs.iter()
                .find(|r| r.job == pulse && r.started > heal_at)
                .cloned()
        },
    )
    .await;

    let (errors, _) = holder.stop(10 * SECOND).await;
    if how == Break::Cut {
        assert!(errors >= 2, "the cut instance counted its errors");
    }
    let (errors, _) = other.stop(10 * SECOND).await;
    assert_eq!(errors, 0, "{}", other.stderr.text());
    let other_pulse = fx.runs_of(&format!("pulse_{}", other.name)).await;
    let while_cut = other_pulse
        .iter()
        .filter(|r| r.started >= cut_at && r.started <= heal_at)
        .count();
    assert!(
        while_cut >= 2,
        "the instance that was not cut kept firing during the cut: {other_pulse:?}"
    );
    fx.cleanup().await;
}

/// Scenario 5: Instances replaced one by one, each new one started before an old one stops,
/// while an every-second job runs: no slot runs twice, and none is missed.
async fn rolling_restart(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "roll").await else {
        return;
    };
    let mut old = start(&fx, &["A", "B", "C"], |s| s.jobs("tick")).await;
    let from = fx.now().await;
    let mut new = Vec::new();
    for letter in ["D", "E", "F"] {
        let mut instance = fx.service(letter).jobs("tick").spawn();
        instance.ready().await;
        new.push(instance);
        tokio::time::sleep(SECOND).await;
        let mut leaving = old.remove(0);
        let (errors, _) = leaving.stop(10 * SECOND).await;
        assert_eq!(errors, 0, "{}", leaving.stderr.text());
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    tokio::time::sleep(SECOND).await;
    let to = fx.now().await;
    for instance in &mut new {
        let (errors, _) = instance.stop(10 * SECOND).await;
        assert_eq!(errors, 0, "{}", instance.stderr.text());
    }

    let ticks = fx.runs_of("tick").await;
    let duplicates = duplicate_slots(&ticks);
    assert!(duplicates.is_empty(), "slots run twice: {duplicates:?}");
    // Every slot of the rollout (a second of margin at both ends) ran.
    let missed: Vec<i64> = seconds_between(from + 1000, to - 1000)
        .filter(|slot| !ticks.iter().any(|r| r.slot == Some(*slot)))
        .collect();
    assert!(missed.is_empty(), "slots missed: {missed:?} in {ticks:?}");
    let instances: std::collections::BTreeSet<&str> =
        ticks.iter().map(|r| r.instance.as_str()).collect();
    eprintln!(
        "rolling restart ({provider:?}): {} slots, run by {instances:?}",
        ticks.len()
    );
    fx.cleanup().await;
}

/// Scenario 6: `SIGTERM` during a run: `cancelled()` resolves, the process exits 0 within
/// `shutdown_timeout`, and the lease is released respecting `lock_at_least_for`.
async fn graceful_stop(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "term").await else {
        return;
    };
    // `graceful`: every second, lease 20 s, at least 5 s; waits for cancellation, then needs
    // 1 s to finish.
    let shutdown_timeout = 5 * SECOND;
    let instances = start(&fx, &["A", "B"], |s| {
        s.jobs("graceful").arg("--shutdown-timeout-ms").arg("5000")
    })
    .await;
    let first = fx
        .wait_for_run(
            5 * SECOND,
            "the first run of `graceful`",
            first_run_of("graceful"),
        )
        .await;
    let (mut holder, mut others) = take(instances, &first.instance);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let sent = Instant::now();
    holder.signal("TERM");
    let status = holder.wait_exit(shutdown_timeout + 2 * SECOND).await;
    let took = sent.elapsed();
    let lease = fx.lock_row("graceful").await.expect("the lock row");
    let status = status.expect("the holder exits after SIGTERM");
    assert!(status.success(), "exit {status}:\n{}", holder.stderr.text());
    holder.assert_no_panic();
    assert!(
        took < shutdown_timeout,
        "took {took:?}, more than shutdown_timeout"
    );
    assert!(
        took >= SECOND,
        "took {took:?}: the scheduler did not wait for the body to finish"
    );
    assert_eq!(holder.exit_counts().map(|c| c.0), Some(0));

    let run = fx
        .runs_of("graceful")
        .await
        .into_iter()
        .find(|r| r.id == first.id)
        .unwrap();
    assert!(
        run.cancelled && run.ended.is_some(),
        "cancelled() resolved and the body finished: {run:?}"
    );
    assert_eq!(
        (lease.locked_by.as_str(), lease.fence as i64),
        (holder.name.as_str(), first.fence)
    );
    assert_eq!(
        lease.lock_until.timestamp_millis() - lease.locked_at.timestamp_millis(),
        5000,
        "released, and kept until locked_at + lock_at_least_for (not lock_at_most_for): {lease:?}"
    );

    let expiry = lease.lock_until.timestamp_millis();
    let other = &mut others[0];
    let next = fx
        .wait_for_run(
            6 * SECOND,
            "the other instance to run next",
            run_after("graceful", first.fence),
        )
        .await;
    assert_eq!(next.instance, other.name);
    assert!(
        next.started >= expiry && next.started <= expiry + 2_500,
        "next run at {}, lease released to {expiry}",
        next.started
    );
    let sent = Instant::now();
    let (errors, _) = other.stop(shutdown_timeout + 2 * SECOND).await;
    assert!(sent.elapsed() < shutdown_timeout);
    assert_eq!(errors, 0, "{}", other.stderr.text());
    fx.cleanup().await;
}

/// Scenario 7: Bad configuration at start: a clear message and exit code 2, promptly; never
/// READY, no panic.
async fn bad_configuration(provider: Provider) {
    let Some(fx) = Fixture::new(provider, "conf").await else {
        return;
    };
    let url = fx.backend.location();
    let mut cases: Vec<(&str, Vec<String>, Vec<&str>)> = Vec::new();
    let set = |flag: &str, value: &str| vec![flag.to_owned(), value.to_owned()];
    match provider {
        Provider::Postgres | Provider::SqlxPostgres => {
            cases.push((
                "unknown user",
                set("--lock-url", &with_user(&url, "ft_no_such_user")),
                vec!["role \"ft_no_such_user\" does not exist"],
            ));
            cases.push((
                "unknown database",
                set("--lock-url", &with_database(&url, "ft_no_such_db")),
                vec!["database \"ft_no_such_db\" does not exist"],
            ));
        }
        Provider::MySql | Provider::SqlxMySql => {
            cases.push((
                "wrong password",
                set("--lock-url", &with_password(&url, "ft-wrong-password")),
                vec!["Access denied"],
            ));
            cases.push((
                "unknown database",
                set("--lock-url", &with_database(&url, "ft_no_such_db")),
                vec!["Unknown database", "ft_no_such_db"],
            ));
        }
        Provider::Sqlite | Provider::SqlxSqlite => {
            cases.push((
                "unknown database (missing directory)",
                set("--lock-url", "/nonexistent-ft-dir/locks.db"),
                vec![
                    "/nonexistent-ft-dir/locks.db",
                    "unable to open database file",
                ],
            ));
        }
        // Not in this scenario's list: Redis has no table to miss; its bad URLs and prefixes
        // are refused by the provider's own tests.
        Provider::Redis => unreachable!("bad_configuration does not run against Redis"),
    }
    let mut missing = set("--lock-table", "ft_no_such_table");
    missing.extend(set("--schema", "check"));
    cases.push((
        "missing table",
        missing,
        vec!["ft_no_such_table does not exist", "CREATE TABLE"],
    ));
    cases.push((
        "SQL in the table name",
        set("--lock-table", "locks; DROP TABLE users"),
        vec!["locks; DROP TABLE users", "invalid configuration"],
    ));

    // All at once: each is an independent process.
    let mut running: Vec<(&str, Vec<&str>, Instance)> = cases
        .into_iter()
        .enumerate()
        .map(|(i, (case, args, expected))| {
            let mut service = fx.service(&i.to_string()).jobs("tick");
            // Later flags win: the bad value replaces the fixture's good one.
            for arg in &args {
                service = service.arg(arg);
            }
            (case, expected, service.spawn())
        })
        .collect();
    for (case, expected, instance) in &mut running {
        let status = instance
            .wait_exit(15 * SECOND)
            .await
            .unwrap_or_else(|| panic!("{case}: still running after 15 s (a silent idle process)"));
        let stderr = instance.stderr.text();
        assert_eq!(
            status.code(),
            Some(2),
            "{case}: expected exit code 2, got {status}:\n{stderr}"
        );
        instance.assert_no_panic();
        assert!(
            !instance.stdout.text().contains("READY"),
            "{case}: the scheduler started"
        );
        // The message and what follows it (a missing table's DDL spans several lines).
        let message = stderr
            .find("fault-service: ")
            .map(|at| &stderr[at..])
            .unwrap_or_else(|| panic!("{case}: no error message:\n{stderr}"));
        for needle in expected.iter() {
            assert!(
                message.contains(needle),
                "{case}: the message should contain {needle:?}: {message}"
            );
        }
        eprintln!("{case} ({provider:?}): {message}");
    }
    fx.cleanup().await;
}

/// `url` with `user` as the user name.
fn with_user(url: &str, user: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{user}@{host}")
}

/// `url` with `password` for its user.
fn with_password(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (user, host) = rest.rsplit_once('@').unwrap_or(("root", rest));
    let user = user.split(':').next().unwrap();
    format!("{scheme}://{user}:{password}@{host}")
}

/// `url` naming `database` (parameters dropped).
fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let authority = rest.split(['/', '?']).next().unwrap();
    format!("{scheme}://{authority}/{database}")
}
