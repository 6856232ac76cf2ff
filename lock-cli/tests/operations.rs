//! Operating a cluster from a shell, across real processes, on PostgreSQL, MariaDB, Redis and
//! a SQLite file, the SQL ones also through lock-provider-sqlx (`sqlx+` URLs): two service
//! instances run a scheduler with history; `lockctl pause` stops the runs from the next
//! heartbeat, `resume` restarts them, `trigger` gives exactly one manual run, `history --json`
//! lists the runs the instances made (matching fences), a killed instance's run shows as
//! `unfinished` and the instance as gone, `actions --json` lists the pause, resume, trigger and
//! unlock lockctl did, and `status --json` shows the next fire and flags a job whose instances
//! were all stopped across a fire as missed.
//!
//! `harness = false`: this binary is also the service. Run as
//! `operations --service URL TABLE INSTANCE` it starts the scheduler and prints one line per
//! run; run plainly (by `cargo test`) it runs the scenarios, one thread per database.

mod common;

use std::io::Write;
use std::process::{Command, ExitCode};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use common::{assert_exit, lockctl, stdout};
use lock_core::JobContext;
use lock_providers::{OpenOptions, SchemaAction};
use lock_scheduler::{Job, Scheduler, Trigger};
use serde_json::Value;
use test_support::process::{Process, eventually};

/// Generous bounds for waiting on a state (two cores, three databases, six processes).
const WAIT: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--service") {
        return service(&args[2], &args[3], &args[4]);
    }
    if args.iter().any(|a| a == "--list") {
        println!("operations: test");
        return ExitCode::SUCCESS;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = format!("sqlite://{}", dir.path().join("ops.db").display());
    let sqlite_sqlx = format!("sqlite://{}", dir.path().join("ops-sqlx.db").display());
    let backends: Vec<(&str, String)> = vec![
        ("sqlite", sqlite),
        ("postgres", common::postgres_url()),
        ("mysql", common::mysql_url()),
        ("redis", common::redis_url()),
        // The same tables through lock-provider-sqlx, for the instances and lockctl alike.
        ("sqlx_postgres", format!("sqlx+{}", common::postgres_url())),
        ("sqlx_mysql", format!("sqlx+{}", common::mysql_url())),
        ("sqlx_sqlite", format!("sqlx+{sqlite_sqlx}")),
    ];
    let threads: Vec<_> = backends
        .into_iter()
        .map(|(backend, url)| {
            std::thread::spawn(move || {
                runtime().block_on(scenario(backend, &url));
            })
        })
        .collect();
    let mut failed = false;
    for thread in threads {
        failed |= thread.join().is_err();
    }
    if failed {
        eprintln!("operations: FAILED");
        ExitCode::FAILURE
    } else {
        println!("operations: every scenario passed");
        ExitCode::SUCCESS
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// One instance: three jobs, run history kept an hour, heartbeats every second (the default).
fn service(url: &str, table: &str, instance: &str) -> ExitCode {
    let run = async {
        let options = OpenOptions::new().table(table).schema(SchemaAction::Create);
        let opened = options.open(url).await.map_err(|e| e.to_string())?;
        let say = |line: String| {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        };
        let body = move |ctx: JobContext, pause: Duration| async move {
            say(format!(
                "RUN {} fence={} kind={}",
                ctx.lock_name(),
                ctx.fence(),
                ctx.fire_kind().as_str()
            ));
            tokio::time::sleep(pause).await;
        };
        let tick = Job::new(
            "tick",
            Trigger::fixed_rate(Duration::from_secs(1)).map_err(|e| e.to_string())?,
            move |ctx: JobContext| body(ctx, Duration::from_millis(50)),
        );
        // Once a year: runs only when triggered.
        let yearly = || Trigger::cron("0 0 3 1 1 *").expect("a valid cron");
        let on_demand = Job::new("on_demand", yearly(), move |ctx: JobContext| {
            body(ctx, Duration::from_millis(50))
        });
        let long = Job::new("long", yearly(), move |ctx: JobContext| {
            body(ctx, Duration::from_secs(600))
        });
        let scheduler = Scheduler::builder()
            .lock_provider(Arc::clone(opened.provider()))
            .instance_id(instance)
            .history(Duration::from_secs(3600))
            .jobs([tick, on_demand, long])
            .start()
            .await
            .map_err(|e| e.to_string())?;
        say("READY".to_owned());
        // A SIGTERM ends the scheduler: `long` is cut by the shutdown timeout; that is fine.
        let _ = scheduler.run_until(lock_scheduler::shutdown_signal()).await;
        opened.close().await;
        Ok::<(), String>(())
    };
    match runtime().block_on(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("service: {e}");
            ExitCode::FAILURE
        }
    }
}

fn spawn(url: &str, table: &str, instance: &str) -> Process {
    let exe = std::env::current_exe().expect("this test binary");
    Process::spawn(
        instance,
        Command::new(exe).args(["--service", url, table, instance]),
    )
}

fn json(args: &[&str]) -> Value {
    let output = lockctl(args);
    assert_exit(&output, 0, &args.join(" "));
    serde_json::from_str(&stdout(&output)).expect("JSON")
}

fn time(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .unwrap_or_else(|| panic!("a time: {value}"))
        .with_timezone(&Utc)
}

/// Drops the lock table and the operations tables at the end (also on a panic); on Redis,
/// deletes the keys of the prefix.
fn cleanup(backend: &str, table: &str) -> Option<test_support::table::Cleanup> {
    // The lock table and the operations tables next to it.
    match backend {
        "postgres" | "sqlx_postgres" => Some(test_support::table::drop_postgres_table(table)),
        "mysql" | "sqlx_mysql" => Some(test_support::table::drop_mysql_table(table)),
        "redis" => Some(delete_redis_keys(table)),
        _ => None,
    }
}

/// Deletes the locks `<prefix>:*` and the operations keys `{<prefix>:ops}:*`.
fn delete_redis_keys(prefix: &str) -> test_support::table::Cleanup {
    use lock_provider_redis::redis;
    let patterns = [format!("{prefix}:*"), format!("{{{prefix}:ops}}:*")];
    test_support::table::Cleanup::new(move || async move {
        let Ok(client) = redis::Client::open(common::redis_url()) else {
            return;
        };
        let Ok(mut conn) = client.get_multiplexed_async_connection().await else {
            return;
        };
        for pattern in patterns {
            let mut cursor: u64 = 0;
            loop {
                let Ok((next, keys)): redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut conn)
                    .await
                else {
                    break;
                };
                if !keys.is_empty() {
                    let _: redis::RedisResult<i64> =
                        redis::cmd("DEL").arg(&keys).query_async(&mut conn).await;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
    })
}

async fn scenario(backend: &str, url: &str) {
    // The servers' reachability, by the skip-unless-CI rule (SQLite is always there).
    if !backend.ends_with("sqlite") {
        let reached = lock_providers::open(url)
            .await
            .map(|p| p.provider().describe());
        if common::reachable(backend, url, reached).is_none() {
            return;
        }
    }
    let table = common::unique_table(&format!("ops_{backend}"));
    let _cleanup = cleanup(backend, &table);
    let base = ["--url", url, "--table", table.as_str()];
    let with = |args: &[&str]| -> Vec<String> {
        args.iter()
            .chain(base.iter())
            .map(|s| s.to_string())
            .collect()
    };
    let run = |args: &[&str]| {
        let args = with(args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        json(&args)
    };
    let lockctl_text = |args: &[&str]| {
        let args = with(args);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = lockctl(&args);
        assert_exit(&output, 0, &args.join(" "));
        stdout(&output)
    };
    let ids = [format!("{backend}-a"), format!("{backend}-b")];
    let mut a = spawn(url, &table, &ids[0]);
    let mut b = spawn(url, &table, &ids[1]);
    for p in [&mut a, &mut b] {
        let out = p.stdout.clone();
        p.wait_for_line(&out, WAIT, "ready", |l| l == "READY").await;
    }
    eventually(
        WAIT,
        "both instances alive in `instances --json`",
        || async {
            let instances = run(&["instances", "--json"]);
            let alive = instances
                .as_array()?
                .iter()
                .filter(|i| i["alive"] == true)
                .count();
            (alive == 2).then_some(())
        },
    )
    .await;
    eventually(WAIT, "three finished tick runs", || async {
        let runs = run(&["history", "tick", "--json"]);
        let ended = runs
            .as_array()?
            .iter()
            .filter(|r| r["outcome"] == "succeeded")
            .count();
        (ended >= 3).then_some(())
    })
    .await;

    // status: every job with its next fire, two live instances, nothing missed.
    let status = run(&["status", "--json"]);
    let tick = status
        .as_array()
        .expect("array")
        .iter()
        .find(|j| j["name"] == "tick")
        .expect("tick in status")
        .clone();
    assert_eq!(tick["trigger"], "fixed rate 1s");
    assert!(!tick["next_fire"].is_null(), "{tick}");
    assert_eq!(
        tick["live_instances"].as_array().unwrap().len(),
        2,
        "{tick}"
    );
    assert_eq!(
        (tick["paused"].clone(), tick["missed"].clone()),
        (false.into(), false.into())
    );

    // pause: in force on each instance from its first heartbeat after the pause.
    let said = lockctl_text(&["pause", "tick"]);
    assert!(said.starts_with("paused job \"tick\""), "{said}");
    let before: Vec<DateTime<Utc>> = heartbeats(&run(&["instances", "--json"]));
    let acknowledged = eventually(WAIT, "a heartbeat of each instance after the pause", || {
        let before = before.clone();
        async move {
            let now = heartbeats(&run(&["instances", "--json"]));
            now.iter()
                .zip(&before)
                .all(|(n, b)| n > b)
                .then(|| now.into_iter().max().expect("two"))
        }
    })
    .await;
    // Three more slots pass. A fire at most one slot after the acknowledging heartbeat may
    // have started before the pause set was swapped in (milliseconds); none later.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let runs = run(&["history", "tick", "--json", "--limit", "100"]);
    let late: Vec<&Value> = runs
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| time(&r["started_at"]) > acknowledged + chrono::TimeDelta::seconds(1))
        .collect();
    assert!(late.is_empty(), "paused tick ran: {late:?}");
    let status = run(&["status", "--json"]);
    assert!(
        status
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["name"] == "tick" && j["paused"] == true)
    );

    // resume: runs again.
    let said = lockctl_text(&["resume", "tick"]);
    assert!(said.starts_with("resumed job \"tick\""), "{said}");
    let resumed = heartbeats(&run(&["instances", "--json"]))
        .into_iter()
        .max()
        .unwrap();
    eventually(WAIT, "a tick run after resume", || async {
        let runs = run(&["history", "tick", "--json", "--limit", "5"]);
        runs.as_array()?
            .iter()
            .any(|r| time(&r["started_at"]) > resumed)
            .then_some(())
    })
    .await;

    // trigger: claimed by one live instance, exactly one manual run.
    let requested = std::time::Instant::now();
    let said = lockctl_text(&[
        "trigger",
        "on_demand",
        "--param",
        "day=2026-12-01",
        "--param",
        "note=a b&c=é",
    ]);
    assert!(said.contains("claimed by"), "{said}");
    let runs = eventually(WAIT, "the triggered run", || async {
        let runs = run(&["history", "on_demand", "--json"]);
        let done = runs.as_array()?.first()?["outcome"] == "succeeded";
        done.then_some(runs)
    })
    .await;
    println!(
        "{backend}: trigger to finished manual run in {:?} (goal: within 2 s)",
        requested.elapsed()
    );
    // Three more heartbeats of both instances: still one run.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let again = run(&["history", "on_demand", "--json"]);
    assert_eq!(again.as_array().unwrap().len(), 1, "{again}");
    assert_eq!(runs[0]["fire_kind"], "manual");
    // The parameters reach the run's history row, as given.
    assert_eq!(runs[0]["params"]["day"], "2026-12-01", "{runs}");
    assert_eq!(runs[0]["params"]["note"], "a b&c=é", "{runs}");
    assert!(ids.iter().any(|id| runs[0]["instance"] == id.as_str()));

    // history --json lists every run the instances printed, with the same fences.
    let printed = |p: &Process, instance: &str| -> Vec<(String, u64, String)> {
        p.stdout
            .all()
            .iter()
            .filter_map(|line| {
                let rest = line.strip_prefix("RUN ")?;
                let mut parts = rest.split(' ');
                let job = parts.next()?.to_owned();
                let fence = parts.next()?.strip_prefix("fence=")?.parse().ok()?;
                Some((job, fence, instance.to_owned()))
            })
            .collect()
    };
    let mut seen: Vec<(String, u64, String)> = printed(&a, &ids[0]);
    seen.extend(printed(&b, &ids[1]));
    let mut listed: Vec<(String, u64, String)> = Vec::new();
    for job in ["tick", "on_demand"] {
        for r in run(&["history", job, "--json", "--limit", "1000"])
            .as_array()
            .unwrap()
        {
            listed.push((
                r["name"].as_str().unwrap().to_owned(),
                r["fence"].as_u64().unwrap(),
                r["instance"].as_str().unwrap().to_owned(),
            ));
        }
    }
    for run in &seen {
        assert!(
            listed.contains(run),
            "{run:?} ran but is not in the history: {listed:?}"
        );
    }
    // Every listed run was printed, except one that started after the last printed line was
    // read (the history is read later).
    let unprinted: Vec<_> = listed.iter().filter(|r| !seen.contains(r)).collect();
    assert!(
        unprinted.len() <= 2,
        "runs in the history no instance printed: {unprinted:?}"
    );

    // A killed instance: its run stays unfinished, the instance gone.
    lockctl_text(&["trigger", "long"]);
    let holder = eventually(WAIT, "the long run started", || async {
        let runs = run(&["history", "long", "--json"]);
        let first = runs.as_array()?.first()?.clone();
        (first["outcome"] == "running").then(|| first["instance"].as_str().unwrap().to_owned())
    })
    .await;
    let (killed, survivor) = if holder == ids[0] {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    assert!(test_support::process::signal(killed.id(), "KILL"));
    killed.wait_exit(WAIT).await.expect("killed");
    eventually(WAIT, "the killed instance gone", || async {
        let instances = run(&["instances", "--json"]);
        let gone = instances
            .as_array()?
            .iter()
            .any(|i| i["instance"] == holder.as_str() && i["alive"] == false);
        gone.then_some(())
    })
    .await;
    let long = run(&["history", "long", "--json"]);
    assert_eq!(long[0]["outcome"], "unfinished", "{long}");
    assert!(long[0]["ended_at"].is_null());

    // The action log: each lockctl action, newest first, with who asked (`lockctl:<user>@`).
    lockctl_text(&["unlock", "long", "--force"]);
    let logged = |job: &str| -> Vec<(String, String, Option<String>)> {
        let log = run(&["actions", job, "--json"]);
        log.as_array()
            .expect("array")
            .iter()
            .map(|a| {
                let by = a["by"].as_str().unwrap();
                assert!(by.starts_with("lockctl:"), "{a}");
                let detail = a["detail"].as_str().map(str::to_owned);
                (
                    a["action"].as_str().unwrap().to_owned(),
                    by.to_owned(),
                    detail,
                )
            })
            .collect()
    };
    let tick_log = logged("tick");
    let kinds = |log: &[(String, String, Option<String>)]| -> Vec<String> {
        log.iter().map(|(action, _, _)| action.clone()).collect()
    };
    assert_eq!(kinds(&tick_log), ["resume", "pause"], "{tick_log:?}");
    let on_demand = logged("on_demand");
    assert_eq!(kinds(&on_demand), ["trigger"]);
    let detail = on_demand[0].2.as_deref().unwrap();
    assert!(detail.starts_with("request "), "{detail}");
    assert!(
        detail.ends_with(" with day=2026-12-01&note=a+b%26c%3D%C3%A9"),
        "{detail}"
    );
    let long_log = logged("long");
    assert_eq!(kinds(&long_log), ["unlock", "trigger"], "{long_log:?}");
    assert!(long_log[0].2.as_deref().unwrap().contains("lock long"));
    let table = lockctl_text(&["actions", "tick"]);
    assert!(
        table.starts_with("AT") && table.contains("resume"),
        "{table}"
    );

    // Every instance stopped across a fire: tick is missed (grace 2 s).
    assert!(test_support::process::signal(survivor.id(), "TERM"));
    survivor.wait_exit(WAIT).await.expect("stopped");
    // (The stopped instance counts as live until five heartbeats are missed; the flag does
    // not wait for that.)
    let status = eventually(WAIT, "tick missed, with no live instance", || async {
        let status = run(&["status", "--json", "--grace", "2s"]);
        let tick = status
            .as_array()?
            .iter()
            .find(|j| j["name"] == "tick")?
            .clone();
        let none_live = tick["live_instances"].as_array()?.is_empty();
        (tick["missed"] == true && none_live).then_some(tick)
    })
    .await;
    assert!(time(&status["next_fire"]) < Utc::now(), "{status}");
    println!("{backend}: ok");
}

/// Every instance's last heartbeat, in instance order.
fn heartbeats(instances: &Value) -> Vec<DateTime<Utc>> {
    instances
        .as_array()
        .expect("array")
        .iter()
        .filter(|i| i["alive"] == true)
        .map(|i| time(&i["last_heartbeat"]))
        .collect()
}
