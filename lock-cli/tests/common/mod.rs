//! What every lockctl test needs: running the binary, reaching the test databases, and one
//! held lock to look at.

#![allow(dead_code)] // Each test file uses its own part of this module.

use std::process::{Command, Output};
use std::time::Duration;

use chrono::Utc;
use lock_core::{AcquireOutcome, FireSlot, Lease, LockProvider, LockRequest};

/// The lock every scenario takes, and who takes it.
pub const LOCK: &str = "nightly_report";
pub const HOLDER: &str = "lockctl-test-host:4242:c0ffee";

pub fn postgres_url() -> String {
    std::env::var("LOCK_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

pub fn mysql_url() -> String {
    std::env::var("LOCK_TEST_MYSQL_URL")
        .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306/test".to_owned())
}

/// The connected provider, or `None` after a loud SKIPPED line when the database cannot be
/// reached. With `CI` set an unreachable database fails the test instead: CI must never pass
/// by testing nothing.
pub fn reachable<T, E: std::fmt::Display>(
    db: &str,
    url: &str,
    connected: Result<T, E>,
) -> Option<T> {
    match connected {
        Ok(value) => Some(value),
        Err(error) if std::env::var_os("CI").is_some() => {
            panic!("{db} unreachable at {url} and CI is set, so this is a failure: {error}")
        }
        Err(error) => {
            eprintln!("SKIPPED: {db} unreachable at {url}: {error}");
            None
        }
    }
}

/// A table name no other test run uses (identifier characters only, under 64 bytes).
pub fn unique_table(backend: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .subsec_nanos();
    format!("lockctl_{backend}_{}_{nanos}", std::process::id())
}

/// Takes [`LOCK`] for ten minutes as [`HOLDER`], for the current slot, as a scheduler would.
pub async fn hold_lock(provider: &dyn LockProvider) -> Lease {
    let request = LockRequest {
        name: LOCK.into(),
        locked_by: HOLDER.into(),
        lock_at_most_for: Duration::from_secs(600),
        slot: Some(FireSlot::new(Utc::now())),
    };
    match provider.acquire(&request).await.expect("acquire") {
        AcquireOutcome::Acquired(lease) => lease,
        AcquireOutcome::Refused(refusal) => panic!("a fresh table refused the lock: {refusal:?}"),
    }
}

/// Runs the built `lockctl` with `args`, ignoring any LOCKCTL_* variables of the caller.
pub fn lockctl(args: &[&str]) -> Output {
    lockctl_with_env(args, &[])
}

pub fn lockctl_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lockctl"));
    command
        .args(args)
        .env_remove("LOCKCTL_URL")
        .env_remove("LOCKCTL_TABLE");
    for (key, value) in env {
        command.env(key, value);
    }
    command.output().expect("run lockctl")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the exit code, showing both streams when it is not the expected one.
pub fn assert_exit(output: &Output, code: i32, what: &str) {
    assert_eq!(
        output.status.code(),
        Some(code),
        "{what}: expected exit code {code}\n--- stdout\n{}--- stderr\n{}",
        stdout(output),
        stderr(output)
    );
}
