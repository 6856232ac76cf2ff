//! Tables of a test's own: names no other call or run uses, and a guard that removes them when
//! the test ends, also when it panics.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};

/// A table name unique to this call: `<prefix>_<pid>_<n>_<salt>`, identifier characters only.
///
/// The process id and a counter keep concurrent tests and processes apart; the salt (from the
/// clock) keeps a name away from a table a killed earlier run left behind with the same pid.
/// With a prefix of up to 30 characters the name stays under MySQL's 64 and PostgreSQL's 63.
///
/// ```
/// let (a, b) = (test_support::table::unique_table("t"), test_support::table::unique_table("t"));
/// assert_ne!(a, b);
/// assert!(a.starts_with("t_") && a.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
/// ```
pub fn unique_table(prefix: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let salt = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{prefix}_{}_{}_{salt:08x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Runs `work` to completion on a thread of its own with a runtime of its own, and waits for
/// it. For clean-up in `Drop`, which cannot await and may run inside (or after) the test's
/// runtime.
///
/// ```
/// let answer = test_support::table::block_on_own_thread(|| async { 6 * 7 });
/// assert_eq!(answer, 42);
/// ```
pub fn block_on_own_thread<T, F, Fut>(work: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = T>,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime for clean-up")
            .block_on(work())
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

type Work = Box<dyn FnOnce() + Send>;

/// Runs a clean-up when dropped, even when the test panics. Errors of the clean-up are the
/// clean-up's to ignore: a test must not fail (or double-panic) because a table was gone.
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// static DONE: AtomicBool = AtomicBool::new(false);
/// {
///     let _cleanup = test_support::table::Cleanup::new(|| async { DONE.store(true, Ordering::SeqCst) });
/// }
/// assert!(DONE.load(Ordering::SeqCst));
/// ```
#[must_use = "the clean-up runs when the guard is dropped: bind it to a variable"]
pub struct Cleanup(Option<Work>);

impl Cleanup {
    /// A guard that runs `work` (on a runtime of its own) when dropped.
    pub fn new<F, Fut>(work: F) -> Self
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = ()>,
    {
        Cleanup(Some(Box::new(move || block_on_own_thread(work))))
    }

    /// Runs the clean-up now instead of at the end of the scope.
    pub fn run_now(mut self) {
        self.run();
    }

    fn run(&mut self) {
        if let Some(work) = self.0.take() {
            // The work's own panic (a clean-up that could not connect, say) is not the test's.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        self.run();
    }
}

impl std::fmt::Debug for Cleanup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cleanup")
    }
}

/// Runs `statement` (any SQL, e.g. `DROP SCHEMA .. CASCADE`) on the PostgreSQL test database
/// ([`crate::db::postgres_url`]) when dropped.
///
/// ```no_run
/// let _guard = test_support::table::postgres_cleanup("DROP FUNCTION IF EXISTS f()");
/// ```
#[cfg(feature = "postgres")]
pub fn postgres_cleanup(statement: impl Into<String>) -> Cleanup {
    let statement = statement.into();
    Cleanup::new(move || async move {
        let url = crate::db::postgres_url();
        if let Ok((client, connection)) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await
        {
            tokio::spawn(connection);
            let _ = client.batch_execute(&statement).await;
        }
    })
}

/// Drops `table` (`DROP TABLE IF EXISTS`, the name as written: it may carry a schema) and the
/// operations tables `ensure_schema()` creates next to it (`<table>_instances`, `_runs`,
/// `_control`, `_actions`, `_incidents`) on the PostgreSQL test database when dropped.
///
/// ```no_run
/// let table = test_support::table::unique_table("lockpg_test");
/// let _guard = test_support::table::drop_postgres_table(&table);
/// ```
#[cfg(feature = "postgres")]
pub fn drop_postgres_table(table: &str) -> Cleanup {
    postgres_cleanup(format!(
        "DROP TABLE IF EXISTS {table}, {table}_instances, {table}_runs, {table}_control, \
         {table}_actions, {table}_incidents"
    ))
}

/// Drops `table` (quoted with backticks) and the operations tables `ensure_schema()` creates
/// next to it (`<table>_instances`, `_runs`, `_control`, `_actions`, `_incidents`) on the
/// MySQL/MariaDB test database ([`crate::db::mysql_url`]) when dropped.
///
/// ```no_run
/// let table = test_support::table::unique_table("custom");
/// let _guard = test_support::table::drop_mysql_table(&table);
/// ```
#[cfg(feature = "mysql")]
pub fn drop_mysql_table(table: &str) -> Cleanup {
    use mysql_async::prelude::Queryable;
    let statement = format!(
        "DROP TABLE IF EXISTS `{table}`, `{table}_instances`, `{table}_runs`, `{table}_control`, \
         `{table}_actions`, `{table}_incidents`"
    );
    Cleanup::new(move || async move {
        if let Ok(opts) = mysql_async::Opts::from_url(&crate::db::mysql_url())
            && let Ok(mut conn) = mysql_async::Conn::new(opts).await
        {
            let _ = conn.query_drop(statement).await;
            let _ = conn.disconnect().await;
        }
    })
}
