//! A service process that runs one start-up task once across the cluster
//! (`LockingTaskExecutor::run_once`), for the run-once test's three processes.
//!
//! ```text
//! run-once-service --backend postgres|mysql|sqlite --lock-url URL_OR_PATH --lock-table T
//!                  --instance ID --task NAME --version V --start-at UNIX_MS
//!                  --effects FILE --fail-marker FILE [--work-ms MS]
//! ```
//!
//! At `--start-at` (so that processes started one after another call at the same instant) it
//! calls `run_once(NAME, V)` with a task that works `--work-ms` (default 1000) and then fails if
//! it can create `--fail-marker` (so the first run anywhere fails, once), else appends the
//! instance id to `--effects` and succeeds. After a failure it calls once more, as a service
//! retrying its start-up would. Each call prints `OUTCOME <instance> ran|failed|already_done|timed_out`
//! on stdout; the process exits 0, or 2 with the error on stderr.

#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use fault_tests::{Backend, SchemaAction};
use lock_core::{LockingTaskExecutor, RunOnceOutcome};
use test_support::skip::chain;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("run-once-service: {error}");
            ExitCode::from(2)
        }
    }
}

async fn run() -> Result<(), String> {
    let args = parse_args()?;
    let arg = |key: &str| {
        args.get(key)
            .cloned()
            .ok_or_else(|| format!("missing --{key}"))
    };
    let backend = Backend::parse(&arg("backend")?, &arg("lock-url")?)?;
    let instance = arg("instance")?;
    let (task, version) = (arg("task")?, arg("version")?);
    let effects = arg("effects")?;
    let fail_marker = arg("fail-marker")?;
    let work = Duration::from_millis(parse(&args, "work-ms", 1000)?);
    let start_at: i64 = arg("start-at")?
        .parse()
        .map_err(|e| format!("--start-at: {e}"))?;

    let provider = backend
        .lock_provider(&arg("lock-table")?, SchemaAction::Check)
        .await
        .map_err(|e| chain(&e))?;
    let executor = LockingTaskExecutor::from_shared(provider)
        .with_instance_id(instance.clone())
        .map_err(|e| chain(&e))?;
    let wait = (start_at - chrono::Utc::now().timestamp_millis()).max(0);
    tokio::time::sleep(Duration::from_millis(wait as u64)).await;

    for _attempt in 0..2 {
        let outcome = executor
            .run_once(task.as_str(), version.as_str())
            .wait_at_most(Duration::from_secs(30))
            .run(|| async {
                tokio::time::sleep(work).await;
                if std::fs::File::create_new(&fail_marker).is_ok() {
                    return Err(format!("{instance}: the first run fails"));
                }
                let mut file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&effects)
                    .map_err(|e| format!("open {effects}: {e}"))?;
                writeln!(file, "{instance}").map_err(|e| format!("write {effects}: {e}"))?;
                Ok(())
            })
            .await
            .map_err(|e| chain(&e))?;
        let word = match outcome {
            RunOnceOutcome::Ran(()) => "ran",
            RunOnceOutcome::Failed(_) => "failed",
            RunOnceOutcome::AlreadyDone => "already_done",
            RunOnceOutcome::TimedOut => "timed_out",
        };
        println!("OUTCOME {instance} {word}");
        if word != "failed" {
            break;
        }
    }
    Ok(())
}

fn parse_args() -> Result<HashMap<String, String>, String> {
    let mut args = HashMap::new();
    let mut it = std::env::args().skip(1);
    while let Some(key) = it.next() {
        let key = key
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected argument {key:?}"))?
            .to_owned();
        let value = it.next().ok_or_else(|| format!("--{key} needs a value"))?;
        args.insert(key, value);
    }
    Ok(args)
}

fn parse(args: &HashMap<String, String>, key: &str, default: u64) -> Result<u64, String> {
    args.get(key).map_or(Ok(default), |v| {
        v.parse().map_err(|e| format!("--{key}: {e}"))
    })
}
