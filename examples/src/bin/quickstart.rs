//! The README's quickstart: one annotated job, a SQLite lock table, graceful shutdown.
//!
//! ```text
//! cargo run -p examples --bin quickstart            # until Ctrl-C or SIGTERM
//! cargo run -p examples --bin quickstart -- 5       # for 5 seconds
//! ```
//! Start it in two terminals at once: each slot runs in only one of them.

use std::time::Duration;

use scheduled_locks::sqlite::SqliteLockProvider;
use scheduled_locks::{JobContext, Scheduler, scheduled, scheduler_lock};

#[scheduled(cron = "*/2 * * * * *", zone = "Asia/Shanghai")]
// A lease of 5 periods: a crashed holder stops the job for 10 s at most.
#[scheduler_lock(name = "sync_bill", lock_at_most_for = "10s", lock_at_least_for = "1s")]
async fn sync_bill() {
    let ctx = JobContext::current().expect("inside a locked job");
    tracing::info!(
        fence = ctx.fence(),
        slot = %ctx.scheduled_at().expect("a cron fire has a slot"),
        instance = ctx.instance_id(),
        "generating bills"
    );
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let seconds: Option<u64> = std::env::args().nth(1).map(|s| s.parse()).transpose()?;

    let path = std::env::temp_dir().join("lock-core-quickstart.db");
    let provider = SqliteLockProvider::open(&path)?;
    provider.ensure_schema().await?;
    let scheduler = Scheduler::builder().lock_provider(provider).start().await?;
    match seconds {
        Some(seconds) => {
            scheduler
                .run_until(tokio::time::sleep(Duration::from_secs(seconds)))
                .await?
        }
        // Graceful: stops firing, cancels and awaits running jobs, releases their locks.
        None => {
            scheduler
                .run_until(scheduled_locks::shutdown_signal())
                .await?
        }
    }
    Ok(())
}
