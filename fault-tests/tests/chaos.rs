//! The chaos suite: the lock server itself breaks under three running service instances.
//!
//! Each scenario starts a server of its own (a private PostgreSQL cluster or a private
//! `redis-server` with `appendonly yes`; the shared servers are never touched), three
//! `fault-service` instances on it with a 2 s operation timeout, and breaks the server once:
//!
//! | scenario | fault |
//! |---|---|
//! | `pg_frozen` | every process of the PostgreSQL cluster `SIGSTOP`ped for 30 s |
//! | `pg_stalled` | the same from 300 ms before a slot to 1.5 s after it: shorter than the operation timeout, so that slot's acquires are answered, late |
//! | `pg_restarted` | `pg_ctl -m immediate stop` (a crash), started again 1 s later |
//! | `pg_stopped` | `pg_ctl -m fast stop`, started again 90 s later |
//! | `redis_frozen` | `redis-server` `SIGSTOP`ped for 30 s |
//! | `redis_restarted` | `redis-server` `SIGKILL`ed, started again 1 s later (its AOF kept) |
//!
//! The jobs (`fault-service --chaos-jobs --pulse`): `chaos_once` (every second, `fire_once`),
//! `chaos_keep` (every 6 s, a 4 s body on a 3 s lease kept alive) and each instance's own
//! `pulse_<instance>` (every second). The runs table is on the shared PostgreSQL test
//! database, which the fault does not touch, so runs are recorded while the lock server is
//! down. Every scenario asserts:
//!
//! 1. no (job, slot) ran twice;
//! 2. per job, in slot order, fences strictly increase;
//! 3. every job (each instance's own pulse too) fires again at most the operation timeout plus
//!    one period (plus [`RECORD_MARGIN_MS`]) after the server answers again, or after a body
//!    that ran across the fault ended, whichever is later. "Answers again" is the runs
//!    database's clock when a probe query (`SELECT 1`, `PING`) on the broken server first
//!    succeeded after the thaw or start;
//! 4. no body started later than its misfire grace after its slot (the default grace: one
//!    period), plus [`RECORD_MARGIN_MS`];
//! 5. a job that could not fire for more than two periods (from the first slot it missed,
//!    or the end of a longer body, to the next run's start; plus [`RECORD_MARGIN_MS`]) was named by a WARN event of an instance while it could not (`WARN job=<name>
//!    at=<ms>` on the service's stdout, `at` by the service's clock, which is the servers'
//!    host clock; for a pulse, by its own instance).
//!
//! The scenarios run concurrently in one test (about 2 minutes: the 90 s stop is the
//! longest); `CHAOS_SCENARIOS=pg_frozen,redis_restarted` runs only those. Each prints its
//! measurements (`CHAOS <scenario> ...` lines, shown with `-- --nocapture`), and every failed
//! assertion of every scenario is reported together at the end.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use common::{Fixture, Instance, Provider, duplicate_slots, eventually, postgres_url};
use fault_tests::{Backend, Run};
use test_support::private_postgres::PrivatePostgres;
use test_support::redis_server::{Durability, PrivateRedis};

/// `--operation-timeout-ms` of every instance: each acquire, extend and release gives up
/// after it, which keeps the suite short (the default is 10 s).
const OPERATION_TIMEOUT_MS: i64 = 2000;
/// The start of a run is the runs database's time of the body's first insert, one round trip
/// after the body started, on a loaded 2-core machine running eighteen service processes and
/// six servers: a recorded start may trail the real one by this much.
const RECORD_MARGIN_MS: i64 = 300;
/// After the server answers again, how long the runs are watched: the longest bound (the
/// operation timeout plus `chaos_keep`'s 6 s period) and as much again.
const WATCH_AFTER_MS: i64 = 16_000;
const INSTANCES: [&str; 3] = ["A", "B", "C"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    PgFrozen,
    PgStalled,
    PgRestarted,
    PgStopped,
    RedisFrozen,
    RedisRestarted,
}

const SCENARIOS: [Scenario; 6] = [
    Scenario::PgFrozen,
    Scenario::PgStalled,
    Scenario::PgRestarted,
    Scenario::PgStopped,
    Scenario::RedisFrozen,
    Scenario::RedisRestarted,
];

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::PgFrozen => "pg_frozen",
            Scenario::PgStalled => "pg_stalled",
            Scenario::PgRestarted => "pg_restarted",
            Scenario::PgStopped => "pg_stopped",
            Scenario::RedisFrozen => "redis_frozen",
            Scenario::RedisRestarted => "redis_restarted",
        }
    }

    /// The fixture's scenario tag (in table and instance names, which must stay short).
    fn tag(self) -> &'static str {
        match self {
            Scenario::PgFrozen => "cpgfreeze",
            Scenario::PgStalled => "cpgstall",
            Scenario::PgRestarted => "cpgcrash",
            Scenario::PgStopped => "cpgstop",
            Scenario::RedisFrozen => "crdfreeze",
            Scenario::RedisRestarted => "crdcrash",
        }
    }
}

/// One of the scenario's jobs, as the assertions see it.
struct JobSpec {
    name: String,
    period_ms: i64,
    /// The misfire grace: by default one period.
    grace_ms: i64,
    /// The instance whose own job it is (a pulse); `None`: every instance runs it.
    owner: Option<String>,
}

/// The lock server of a scenario.
enum Server {
    Postgres(PrivatePostgres),
    Redis(PrivateRedis),
}

impl Server {
    /// Whether it answers a query now (a connect and `SELECT 1`, or `PING`), within 1 s.
    async fn answers(&self) -> bool {
        match self {
            Server::Postgres(pg) => {
                let mut config: tokio_postgres::Config = pg.url().parse().expect("the URL");
                config.connect_timeout(Duration::from_secs(1));
                let probe = async {
                    let (client, connection) = config.connect(tokio_postgres::NoTls).await.ok()?;
                    tokio::spawn(connection);
                    client.simple_query("SELECT 1").await.ok()
                };
                matches!(
                    tokio::time::timeout(Duration::from_secs(1), probe).await,
                    Ok(Some(_))
                )
            }
            Server::Redis(redis) => tokio::task::block_in_place(|| {
                redis.command("PING").is_ok_and(|r| r.starts_with("+PONG"))
            }),
        }
    }
}

/// What one scenario measured and which of its assertions failed.
#[derive(Default)]
struct Report {
    lines: Vec<String>,
    failures: Vec<String>,
}

impl Report {
    fn line(&mut self, scenario: Scenario, text: String) {
        println!("CHAOS {} {text}", scenario.name());
        self.lines.push(text);
    }

    fn check(&mut self, scenario: Scenario, ok: bool, failure: impl FnOnce() -> String) {
        if !ok {
            let text = failure();
            println!("CHAOS {} FAILED {text}", scenario.name());
            self.failures.push(format!("{}: {text}", scenario.name()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chaos() {
    let chosen: Vec<Scenario> = match std::env::var("CHAOS_SCENARIOS") {
        Ok(list) => list
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|name| {
                SCENARIOS
                    .into_iter()
                    .find(|s| s.name() == name)
                    .unwrap_or_else(|| {
                        let known: Vec<&str> = SCENARIOS.iter().map(|s| s.name()).collect();
                        panic!("CHAOS_SCENARIOS: unknown scenario {name:?} (known: {known:?})")
                    })
            })
            .collect(),
        Err(_) => SCENARIOS.to_vec(),
    };
    let tasks: Vec<_> = chosen
        .iter()
        .map(|&scenario| (scenario, tokio::spawn(run_scenario(scenario))))
        .collect();
    let mut failures = Vec::new();
    let mut summary = String::new();
    for (scenario, task) in tasks {
        match task.await {
            Ok(Some(report)) => {
                for line in &report.lines {
                    let _ = writeln!(summary, "{:<16} {line}", scenario.name());
                }
                failures.extend(report.failures);
            }
            Ok(None) => {}
            Err(e) => failures.push(format!("{}: the scenario panicked: {e}", scenario.name())),
        }
    }
    println!("CHAOS summary:\n{summary}");
    assert!(
        failures.is_empty(),
        "{} chaos assertion(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Starts the server, the fixture and three instances, breaks the server once, and checks
/// the runs; `None` when the server or the runs database is not available (skipped).
async fn run_scenario(scenario: Scenario) -> Option<Report> {
    let (mut server, fx) = match scenario {
        Scenario::PgFrozen | Scenario::PgStalled | Scenario::PgRestarted | Scenario::PgStopped => {
            let pg = tokio::task::block_in_place(PrivatePostgres::start)?;
            let fx = Fixture::with_runs_in(
                Provider::Postgres,
                scenario.tag(),
                Backend::Postgres(pg.url()),
                Backend::Postgres(postgres_url()),
                None,
            )
            .await?;
            (Server::Postgres(pg), fx)
        }
        Scenario::RedisFrozen | Scenario::RedisRestarted => {
            let redis =
                tokio::task::block_in_place(|| PrivateRedis::start(Durability::AppendOnly))?;
            let fx = Fixture::on(
                Provider::Redis,
                scenario.tag(),
                Backend::Redis(redis.url()),
                None,
            )
            .await?;
            (Server::Redis(redis), fx)
        }
    };
    let mut instances: Vec<Instance> = INSTANCES
        .iter()
        .map(|letter| {
            fx.service(letter)
                .arg("--chaos-jobs")
                .arg("--pulse")
                .arg("--operation-timeout-ms")
                .arg(&OPERATION_TIMEOUT_MS.to_string())
                .spawn()
        })
        .collect();
    for instance in &mut instances {
        instance.ready().await;
    }
    let mut jobs = vec![
        JobSpec {
            name: "chaos_once".into(),
            period_ms: 1000,
            grace_ms: 1000,
            owner: None,
        },
        JobSpec {
            name: "chaos_keep".into(),
            period_ms: 6000,
            grace_ms: 6000,
            owner: None,
        },
    ];
    for instance in &instances {
        jobs.push(JobSpec {
            name: format!("pulse_{}", instance.name),
            period_ms: 1000,
            grace_ms: 1000,
            owner: Some(instance.name.clone()),
        });
    }

    // Every job has run, and the fault comes 1 s into a `chaos_keep` body, so its
    // keep-alive meets the broken server.
    let ready_at = fx.now().await;
    let keep = eventually(
        Duration::from_secs(30),
        "every job running, and a new chaos_keep body",
        || async {
            let runs = fx.all_runs().await;
            let all_ran = jobs.iter().all(|j| runs.iter().any(|r| r.job == j.name));
            let keep = runs
                .iter()
                .filter(|r| r.job == "chaos_keep" && r.started > ready_at + 1000)
                .max_by_key(|r| r.started)
                .cloned();
            keep.filter(|_| all_ran)
        },
    )
    .await;
    common::sleep_until_db(&fx, keep.started + 1000).await;

    let (fault_at, back_at) = break_server(scenario, &mut server, &fx).await;
    eventually(
        Duration::from_secs(60),
        "the broken server answering again",
        || async { server.answers().await.then_some(()) },
    )
    .await;
    let answered_at = fx.now().await;
    common::sleep_until_db(&fx, answered_at + WATCH_AFTER_MS).await;

    let mut report = Report::default();
    report.line(
        scenario,
        format!(
            "fault at {fault_at}, server back at +{} ms, answered at +{} ms (runs-database clock)",
            back_at - fault_at,
            answered_at - fault_at
        ),
    );
    // Stopped before the runs are read, so nothing is still writing; each stop must be clean.
    for instance in &mut instances {
        instance.signal("TERM");
        let status = instance.wait_exit(Duration::from_secs(20)).await;
        report.check(scenario, status.is_some_and(|s| s.success()), || {
            format!(
                "{} did not stop cleanly after SIGTERM ({status:?}):\n{}",
                instance.name,
                instance.stderr.text()
            )
        });
        report.check(scenario, instance.stderr.count("panicked") == 0, || {
            format!("{} panicked:\n{}", instance.name, instance.stderr.text())
        });
    }
    let runs = fx.all_runs().await;
    let warned: BTreeMap<String, Vec<String>> = instances
        .iter()
        .map(|instance| {
            let lines = instance
                .stdout
                .all()
                .into_iter()
                .filter(|l| l.starts_with("WARN job="))
                .collect();
            (instance.name.clone(), lines)
        })
        .collect();
    check_runs(
        scenario,
        &mut report,
        &jobs,
        &runs,
        &warned,
        back_at,
        answered_at,
    );
    if !report.failures.is_empty() {
        let log = match &server {
            Server::Postgres(pg) => pg.log(),
            Server::Redis(_) => String::new(),
        };
        println!("CHAOS {} server log:\n{log}", scenario.name());
    }
    fx.cleanup().await;
    drop(instances);
    drop(server);
    Some(report)
}

/// Breaks the server as the scenario says and brings it back; returns the runs database's
/// time just before the fault and just before the thaw or start (the server was down, or
/// frozen, in between: nothing it granted before the fault starts a body after it, since a grant comes at
/// most `acquire_ahead`, 100 ms, before its body starts and the server was down at least 1 s).
async fn break_server(scenario: Scenario, server: &mut Server, fx: &Fixture) -> (i64, i64) {
    if scenario == Scenario::PgStalled {
        // Every instance asks for slot `slot`'s locks 100 ms before it (acquire ahead), into
        // the frozen server, and is answered at the thaw, 1.6 s later: within the 2 s
        // operation timeout, 1.5 s after the slot, beyond the 1 s grace of the every-second
        // jobs.
        let slot = (fx.now().await / 1000 + 2) * 1000;
        common::sleep_until_db(fx, slot - 300).await;
    }
    let fault_at = fx.now().await;
    let back_at = match (scenario, server) {
        (Scenario::PgStalled, Server::Postgres(pg)) => {
            tokio::task::block_in_place(|| pg.freeze());
            common::sleep_until_db(fx, fault_at + 1800).await;
            let back_at = fx.now().await;
            tokio::task::block_in_place(|| pg.thaw());
            back_at
        }
        (Scenario::PgFrozen, Server::Postgres(pg)) => {
            tokio::task::block_in_place(|| pg.freeze());
            tokio::time::sleep(Duration::from_secs(30)).await;
            let back_at = fx.now().await;
            tokio::task::block_in_place(|| pg.thaw());
            back_at
        }
        (Scenario::PgRestarted, Server::Postgres(pg)) => {
            tokio::task::block_in_place(|| pg.crash());
            tokio::time::sleep(Duration::from_secs(1)).await;
            let back_at = fx.now().await;
            tokio::task::block_in_place(|| pg.start_again());
            back_at
        }
        (Scenario::PgStopped, Server::Postgres(pg)) => {
            tokio::task::block_in_place(|| pg.stop());
            tokio::time::sleep(Duration::from_secs(90)).await;
            let back_at = fx.now().await;
            tokio::task::block_in_place(|| pg.start_again());
            back_at
        }
        (Scenario::RedisFrozen, Server::Redis(redis)) => {
            redis.freeze();
            tokio::time::sleep(Duration::from_secs(30)).await;
            let back_at = fx.now().await;
            redis.thaw();
            back_at
        }
        (Scenario::RedisRestarted, Server::Redis(redis)) => {
            redis.kill();
            tokio::time::sleep(Duration::from_secs(1)).await;
            let back_at = fx.now().await;
            tokio::task::block_in_place(|| redis.restart());
            back_at
        }
        (scenario, _) => unreachable!("{scenario:?} on the wrong server"),
    };
    (fault_at, back_at)
}

/// The five assertions of the module's docs, on the runs of every job.
fn check_runs(
    scenario: Scenario,
    report: &mut Report,
    jobs: &[JobSpec],
    runs: &[Run],
    warned: &BTreeMap<String, Vec<String>>,
    back_at: i64,
    answered_at: i64,
) {
    let ours: Vec<Run> = runs
        .iter()
        .filter(|r| jobs.iter().any(|j| j.name == r.job))
        .cloned()
        .collect();
    let duplicates = duplicate_slots(&ours);
    report.check(scenario, duplicates.is_empty(), || {
        format!("no duplicate (job, slot): {duplicates:?}")
    });
    for job in jobs {
        let mut of_job: Vec<&Run> = ours.iter().filter(|r| r.job == job.name).collect();
        let label = job.owner.as_ref().map_or(job.name.as_str(), |_| "pulse");

        // 2. Fences strictly increase in slot order.
        of_job.sort_by_key(|r| (r.slot, r.fence));
        let back = of_job
            .windows(2)
            .find(|pair| pair[1].fence <= pair[0].fence)
            .map(|pair| format!("{:?} then {:?}", pair[0], pair[1]));
        report.check(scenario, back.is_none(), || {
            format!(
                "{}: fences strictly increasing in slot order: {back:?}",
                job.name
            )
        });

        // 3. Firing again within the operation timeout plus one period.
        of_job.sort_by_key(|r| r.started);
        let across_end = of_job
            .iter()
            .filter(|r| r.started < back_at)
            .map(|r| r.ended.unwrap_or(r.started))
            .max()
            .unwrap_or(answered_at);
        let from = answered_at.max(across_end);
        let bound = OPERATION_TIMEOUT_MS + job.period_ms + RECORD_MARGIN_MS;
        let first = of_job.iter().find(|r| r.started >= back_at);
        match first {
            Some(run) => {
                let recovery = run.started - from;
                report.line(
                    scenario,
                    format!(
                        "{label:<10} {:<28} fired again {recovery:>6} ms after the server \
                         answered{} (bound {bound} ms), on {}",
                        job.name,
                        match from > answered_at {
                            true => " and the body across the fault ended",
                            false => "",
                        },
                        run.instance
                    ),
                );
                report.check(scenario, recovery <= bound, || {
                    format!(
                        "{}: fired again {recovery} ms after the server answered, more than \
                         the operation timeout plus one period ({bound} ms with the margin): {run:?}",
                        job.name
                    )
                });
            }
            None => {
                report.line(
                    scenario,
                    format!("{label:<10} {:<28} never fired again", job.name),
                );
                report.check(scenario, false, || {
                    format!(
                        "{}: never fired again in the {WATCH_AFTER_MS} ms after the server \
                         answered (bound {bound} ms)",
                        job.name
                    )
                });
            }
        }

        // 4. No body started later than its grace after its slot.
        let late: Vec<String> = of_job
            .iter()
            .filter_map(|r| {
                let lag = r.started - r.slot?;
                (lag > job.grace_ms + RECORD_MARGIN_MS).then(|| {
                    format!(
                        "slot {:?} started {lag} ms after it on {}",
                        r.slot, r.instance
                    )
                })
            })
            .collect();
        let worst = of_job
            .iter()
            .filter_map(|r| Some(r.started - r.slot?))
            .max()
            .unwrap_or(0);
        report.line(
            scenario,
            format!(
                "{label:<10} {:<28} latest body start {worst} ms after its slot (grace {} ms)",
                job.name, job.grace_ms
            ),
        );
        report.check(scenario, late.is_empty(), || {
            format!(
                "{}: bodies started later than the grace ({} ms + {RECORD_MARGIN_MS} ms) \
                 after their slots: {late:?}",
                job.name, job.grace_ms
            )
        });

        // 5. A WARN naming a job that could not fire for more than two periods, while it
        // could not.
        let warnings: Vec<(i64, &str)> = warned
            .iter()
            .filter(|(instance, _)| job.owner.as_ref().is_none_or(|owner| owner == *instance))
            .flat_map(|(_, lines)| lines)
            .filter_map(|line| {
                let rest = line.strip_prefix("WARN job=")?;
                let (name, rest) = rest.split_once(" at=")?;
                let (at, message) = rest.split_once(' ').unwrap_or((rest, ""));
                (name == job.name).then_some((at.parse().ok()?, message))
            })
            .collect();
        for pair in of_job.windows(2) {
            // From the first slot it missed (one period after the last run's slot, or that
            // run's end if later) to the next run's start.
            let (last, next) = (pair[0], pair[1]);
            let due = last.slot.unwrap_or(last.started) + job.period_ms;
            let (idle_from, idle_to) = (due.max(last.ended.unwrap_or(last.started)), next.started);
            if idle_to - idle_from <= 2 * job.period_ms + RECORD_MARGIN_MS {
                continue;
            }
            let during: Vec<&(i64, &str)> = warnings
                .iter()
                .filter(|(at, _)| (idle_from..=idle_to + RECORD_MARGIN_MS).contains(at))
                .collect();
            report.line(
                scenario,
                format!(
                    "{label:<10} {:<28} could not fire for {} ms; {} WARN naming it meanwhile{}",
                    job.name,
                    idle_to - idle_from,
                    during.len(),
                    during
                        .first()
                        .map(|(_, m)| format!(" (first: {m:?})"))
                        .unwrap_or_default()
                ),
            );
            report.check(scenario, !during.is_empty(), || {
                format!(
                    "{}: could not fire for {} ms (from {idle_from} to {idle_to}; more than two \
                     periods, {} ms) and no WARN named it meanwhile ({})",
                    job.name,
                    idle_to - idle_from,
                    2 * job.period_ms,
                    job.owner
                        .as_ref()
                        .map_or("on any instance".to_owned(), |o| format!("on {o}"))
                )
            });
        }
    }
}
