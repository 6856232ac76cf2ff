//! `#[scheduler_lock]` alone: parameters (owned, borrowed, `mut`, patterns), generics,
//! `impl Trait` arguments and public functions; nothing is registered with the scheduler.

#![deny(warnings)]

use lock_scheduler::__private::{ScheduledJob, inventory};
use lock_core::{InMemoryLockProvider, JobContext, LockingTaskExecutor, scheduler_lock};
use std::fmt::Display;

#[scheduler_lock(name = "public")]
pub async fn public() {
    let ctx = JobContext::current().unwrap();
    assert_eq!(ctx.lock_name(), "public");
}

#[scheduler_lock(name = "export")]
async fn export(day: u32, label: &str, mut rows: Vec<u32>, (a, b): (u8, u8)) {
    rows.push(day);
    assert_eq!(rows, [1, 7]);
    assert_eq!((label, a, b), ("daily", 1, 2));
}

#[scheduler_lock(name = "generic")]
async fn generic<T: Display + Send>(value: T, also: impl Display + Send) -> Result<(), String> {
    let text = format!("{value}{also}");
    if text.is_empty() { Err(text) } else { Ok(()) }
}

#[scheduler_lock(name = "where-clause")]
fn where_clause<I>(items: I) -> Result<(), String>
where
    I: IntoIterator<Item = u8>,
{
    let sum: u32 = items.into_iter().map(u32::from).sum();
    if sum == 6 { Ok(()) } else { Err(format!("sum {sum}")) }
}

#[tokio::main]
async fn main() {
    lock_core::install_default_executor(LockingTaskExecutor::new(InMemoryLockProvider::new()));
    public().await;
    export(7, "daily", vec![1], (1, 2)).await;
    generic(1, "x").await.unwrap();
    generic::<&str>("", "").await.unwrap_err();
    tokio::task::spawn_blocking(|| where_clause([1, 2, 3]).unwrap()).await.unwrap();
    assert_eq!(inventory::iter::<ScheduledJob>.into_iter().count(), 0);
    // The futures of locked functions can be spawned.
    tokio::spawn(public()).await.unwrap();
}
