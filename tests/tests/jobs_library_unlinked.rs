//! A binary that depends on a library crate of jobs but never names it does not link it, so
//! the scheduler starts with no jobs: it says so with a WARN that gives the reason and the fix.

use std::io::Write;
use std::sync::{Arc, Mutex};

use lock_core::InMemoryLockProvider;
use lock_scheduler::Scheduler;

/// Collects the formatted log lines.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn starting_with_no_jobs_warns_why_and_how_to_fix_it() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    // `jobs-lib` is a dependency of this crate, but this binary does not name it.
    assert!(lock_scheduler::registered_jobs().unwrap().is_empty());
    let scheduler = Scheduler::builder()
        .lock_provider(InMemoryLockProvider::new())
        .start()
        .await
        .unwrap();
    scheduler.shutdown().await.unwrap();

    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    let warning = logs
        .lines()
        .find(|line| line.contains("WARN"))
        .unwrap_or_else(|| panic!("no WARN line in:\n{logs}"));
    assert!(
        warning.contains("scheduler started with no jobs"),
        "{warning}"
    );
    assert!(warning.contains("library crate"), "{warning}");
    assert!(warning.contains("`use my_jobs as _;`"), "{warning}");
}
