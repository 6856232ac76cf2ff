//! Reproduction: keep-alive does not notice a lease lost behind a dark link.
//!
//! ```text
//! cargo run -p fault-tests --example dark_link_keep_alive            # PostgreSQL
//! cargo run -p fault-tests --example dark_link_keep_alive -- mysql   # MariaDB / MySQL
//! ```
//!
//! Instance A holds a 2 s lease with keep-alive, reaching the database through a proxy that
//! then goes dark (delivers nothing, closes nothing, as when a network drops packets).
//! Instance B, on a direct link, takes the lock as soon as A's lease ends by the database's
//! clock. The book (`book/how-it-works.md`, keep-alive) says A's `JobContext::cancelled()` resolves when an extension
//! fails or finds the lease gone; here A's extension neither fails nor returns, so A's body
//! runs on, uncancelled, next to B's, until TCP gives up (about 15 minutes with Linux
//! defaults) or the link heals. An acquire through the dark link hangs the same way, so a
//! job loop stalls without logging anything.
//!
//! Exits 1 while the behaviour reproduces, 0 once A is cancelled in time.

#[path = "../tests/common/proxy.rs"]
#[allow(dead_code)]
mod proxy;

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fault_tests::{Backend, RunsTable, SchemaAction};
use lock_core::{
    AcquireOutcome, BoxError, JobContext, LockConfiguration, LockRequest, LockingTaskExecutor,
};

const LEASE: Duration = Duration::from_secs(2);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(true) => ExitCode::FAILURE,
        Ok(false) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dark_link_keep_alive: {e}");
            ExitCode::from(2)
        }
    }
}

/// True when the bug reproduced.
async fn run() -> Result<bool, BoxError> {
    let mysql = std::env::args().any(|a| a == "mysql");
    let (url, port, backend): (String, u16, fn(String) -> Backend) = if mysql {
        (test_support::db::mysql_url(), 3306, Backend::MySql)
    } else {
        (test_support::db::postgres_url(), 5432, Backend::Postgres)
    };
    let table = format!("ft_repro_{}", std::process::id());
    let direct = backend(url.clone());
    let b = direct.lock_provider(&table, SchemaAction::Create).await?;

    let proxy = proxy::Proxy::start(proxy::upstream_of(&url, port).await).await;
    let mut proxied = proxy::via_port(&url, proxy.port());
    if mysql {
        // Otherwise mysql_async switches to the server's Unix socket, around the proxy.
        proxied.push_str("?prefer_socket=false");
    }
    let a = backend(proxied)
        .lock_provider(&table, SchemaAction::Check)
        .await?;
    let a = LockingTaskExecutor::new(a).with_instance_id("repro-A")?;
    let config = LockConfiguration::new("repro", LEASE, Duration::ZERO)?.with_keep_alive(true);

    let start = Instant::now();
    let a_cancelled: Arc<Mutex<Option<Duration>>> = Arc::default();
    let seen = a_cancelled.clone();
    let holder = a.clone();
    let body_config = config.clone();
    tokio::spawn(async move {
        holder
            .execute_with_lock(&body_config, async move {
                let ctx = JobContext::current().expect("inside the locked body");
                tokio::select! {
                    _ = ctx.cancelled() => *seen.lock().unwrap() = Some(start.elapsed()),
                    _ = tokio::time::sleep(Duration::from_secs(30)) => {}
                }
            })
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    proxy.darken();
    println!(
        "{:>5} ms  A holds a {LEASE:?} lease with keep-alive; its link goes dark",
        start.elapsed().as_millis()
    );

    let request = LockRequest {
        name: "repro".into(),
        locked_by: "repro-B".into(),
        lock_at_most_for: Duration::from_secs(10),
        slot: None,
        max_slot_lead: lock_core::DEFAULT_MAX_SLOT_LEAD,
        give_up_at: None,
    };
    let taken = loop {
        if let AcquireOutcome::Acquired(lease) = b.acquire(&request).await? {
            break lease;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        if start.elapsed() > Duration::from_secs(10) {
            return Err("B never got the lock".into());
        }
    };
    println!(
        "{:>5} ms  B takes the lock over (fence {}): A's lease ended by the database's clock",
        start.elapsed().as_millis(),
        taken.fence()
    );
    // Keep-alive extends every lease/2; give it two more periods.
    tokio::time::sleep(LEASE).await;
    let cancelled = *a_cancelled.lock().unwrap();
    let reproduced = match cancelled {
        Some(at) => {
            println!(
                "{:>5} ms  A's cancelled() resolved: not reproduced",
                at.as_millis()
            );
            false
        }
        None => {
            println!(
                "{:>5} ms  REPRODUCED: A's cancelled() has not resolved; A's body still runs \
                 next to B's",
                start.elapsed().as_millis()
            );
            true
        }
    };
    let other = LockConfiguration::new("repro_other", LEASE, Duration::ZERO)?;
    let acquire = tokio::time::timeout(
        Duration::from_secs(3),
        a.execute_with_lock(&other, async {}),
    )
    .await;
    println!(
        "{:>5} ms  an acquire by A through the dark link: {}",
        start.elapsed().as_millis(),
        match acquire {
            Err(_) =>
                "no answer and no error after 3 s (the job loop would stall silently)".to_owned(),
            Ok(outcome) => format!("{outcome:?}"),
        }
    );
    proxy.heal();
    let cleanup = RunsTable::open(&direct, &format!("{table}_r")).await?;
    cleanup.drop_tables(&[&table]).await?;
    cleanup.close().await?;
    Ok(reproduced)
}
