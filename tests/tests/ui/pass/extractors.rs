//! The parameter shapes a #[scheduled] function accepts: `State<T>` (destructured or not),
//! `JobContext`, custom `FromJob` extractors; async and sync, either attribute order, `()` and
//! `Result` returns, inside an `impl` block.

#![deny(warnings)]

use std::sync::Arc;

use lock_scheduler::__private::{ScheduledJob, inventory};
use lock_core::{JobContext, LockError};
use lock_scheduler::{ExtractError, FromJob, State, StateMap, scheduled, scheduler_lock};

#[derive(Clone)]
struct Pool;

struct Service;

struct Shard(u64);

impl FromJob for Shard {
    fn from_job(ctx: &JobContext, _: &StateMap) -> Result<Self, ExtractError> {
        Ok(Shard(ctx.fence() % 4))
    }
}

#[derive(Debug)]
struct SyncError;

impl std::fmt::Display for SyncError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the bill could not be synced")
    }
}

impl From<LockError> for SyncError {
    fn from(_: LockError) -> Self {
        SyncError
    }
}

#[scheduled(cron = "0 5 1 * * *")]
#[scheduler_lock(name = "sync_bill")]
async fn sync_bill(State(_pool): State<Pool>, ctx: JobContext) -> Result<(), SyncError> {
    let _ = ctx.fence();
    Ok(())
}

#[scheduler_lock(name = "export")]
#[scheduled(fixed_rate = "1m")]
fn export(mut ctx: JobContext, service: State<Arc<Service>>, Shard(shard): Shard) -> anyhow::Result<()> {
    let _: &Service = &service.0;
    ctx = ctx.clone();
    anyhow::ensure!(shard < 4 && !ctx.lock_name().is_empty(), "out of range");
    Ok(())
}

#[scheduled(fixed_delay = "10s", name = "untyped_patterns")]
async fn untyped_patterns(_: JobContext, State(_): State<Pool>) {}

struct Billing;

impl Billing {
    #[scheduled(fixed_rate = "1h", name = "on_the_service")]
    async fn on_the_service(State(service): State<Arc<Service>>) -> std::io::Result<()> {
        let _: &Service = &service;
        Ok(())
    }
}

fn main() {
    let jobs = inventory::iter::<ScheduledJob>.into_iter().count();
    assert_eq!(jobs, 4);
    // Direct calls take the arguments as given.
    let _ = sync_bill;
    let _ = export;
    let _ = untyped_patterns;
    let _ = Billing::on_the_service;
}
