//! `Result<(), E>` in its usual spellings, with `?` and early `return` in the body. The error
//! type converts from `LockError` (a direct call whose lock could not be asked for returns it)
//! and implements `Display` (a failure is logged by its message chain): `anyhow`, `io::Error`
//! and `String` do, a project's own error implements both.

#![deny(warnings)]

use lock_core::{InMemoryLockProvider, LockError, LockingTaskExecutor};
use lock_scheduler::{scheduled, scheduler_lock};
use std::io;

#[derive(Debug)]
struct BillingError(String);

impl std::fmt::Display for BillingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "billing failed: {}", self.0)
    }
}

impl From<std::num::ParseIntError> for BillingError {
    fn from(e: std::num::ParseIntError) -> Self {
        BillingError(e.to_string())
    }
}

impl From<LockError> for BillingError {
    fn from(e: LockError) -> Self {
        BillingError(e.to_string())
    }
}

#[scheduled(cron = "0 0 * * * *", name = "with_own_error")]
async fn with_own_error() -> Result<(), BillingError> {
    let _amount: u32 = "12".parse()?;
    Ok(())
}

#[scheduled(fixed_delay = "10s", name = "with_anyhow")]
async fn with_anyhow() -> anyhow::Result<()> {
    anyhow::ensure!(1 + 1 == 2, "arithmetic broke");
    Ok(())
}

#[scheduled(fixed_rate = "1m", name = "with_io_result")]
fn with_io_result() -> io::Result<()> {
    std::fs::metadata(".")?;
    Ok(())
}

#[scheduler_lock(name = "parse-locked")]
async fn parse_locked(text: &str) -> Result<(), BillingError> {
    if text.is_empty() {
        return Ok(());
    }
    let _: u8 = text.parse()?;
    Ok(())
}

#[scheduler_lock(name = "always-returns")]
fn always_returns() -> std::result::Result<(), String> {
    return Err("explicit early return".to_owned());
}

#[tokio::main]
async fn main() {
    lock_core::install_default_executor(LockingTaskExecutor::new(InMemoryLockProvider::new()));
    with_own_error().await.unwrap();
    with_anyhow().await.unwrap();
    assert!(parse_locked("").await.is_ok());
    assert!(parse_locked("7").await.is_ok());
    assert!(parse_locked("x").await.is_err());
    tokio::task::spawn_blocking(|| {
        with_io_result().unwrap();
        assert_eq!(always_returns(), Err("explicit early return".to_owned()));
    })
    .await
    .unwrap();
}
