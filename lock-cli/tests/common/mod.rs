//! What every lockctl test needs: running the binary and one held lock to look at. Where the
//! test databases are, the skip-unless-CI rule and unique tables come from `test-support`.

#![allow(dead_code, unused_imports)] // Each test file uses its own part of this module.

use std::process::{Command, Output};
use std::time::Duration;

use chrono::Utc;
use lock_core::{AcquireOutcome, FireSlot, Lease, LockProvider, testkit};

/// The lock every scenario takes, and who takes it.
pub const LOCK: &str = "nightly_report";
pub const HOLDER: &str = "lockctl-test-host:4242:c0ffee";

pub use test_support::db::{mysql_url, postgres_url, redis_url};
pub use test_support::process::{stderr, stdout};
/// The connected provider, or `None` after the skip-unless-CI rule (a loud SKIPPED line, or a
/// failure when `CI` is set: CI must never pass by testing nothing).
pub use test_support::skip::or_unreachable as reachable;

/// A table name no other test run uses (identifier characters only, under 64 bytes).
pub fn unique_table(backend: &str) -> String {
    test_support::table::unique_table(&format!("lockctl_{backend}"))
}

/// Takes [`LOCK`] for ten minutes as [`HOLDER`], for the current slot, as a scheduler would.
pub async fn hold_lock(provider: &dyn LockProvider) -> Lease {
    let slot = Some(FireSlot::new(Utc::now()));
    let request = testkit::request(&LOCK.into(), HOLDER, Duration::from_secs(600), slot);
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
