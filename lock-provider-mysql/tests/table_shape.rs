//! What the provider accepts of an existing table: names compared byte by byte (a new table's
//! `name` is `VARBINARY`), time columns
//! to the millisecond, a `BIGINT` fence, and no `AUTO_INCREMENT` column whose value the server
//! would report in place of the fence. What would misbehave is refused at start-up, with the
//! `ALTER TABLE` that fixes it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use lock_core::{AcquireOutcome, LockError, LockProvider, testkit};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::prelude::Queryable;

const LONG: Duration = Duration::from_secs(300);

async fn acquire(provider: &MySqlLockProvider, name: &Arc<str>, owner: &str) -> AcquireOutcome {
    provider
        .acquire(&testkit::request(name, owner, LONG, None))
        .await
        .expect("acquire")
}

/// A table made by hand with `columns`, and a provider on it; `None` without a server.
async fn table_with(
    prefix: &str,
    columns: &str,
) -> Option<(String, test_support::table::Cleanup, MySqlLockProvider)> {
    let mut admin = common::admin().await?;
    let table = common::unique_table(prefix);
    let cleanup = common::drop_table(&table);
    admin
        .query_drop(format!("CREATE TABLE `{table}` ({columns}) ENGINE=InnoDB"))
        .await
        .expect("CREATE TABLE");
    let provider = MySqlLockProvider::new(common::pool(2))
        .with_table(&table)
        .expect("valid table");
    Some((table, cleanup, provider))
}

fn refusal(result: Result<(), LockError>) -> String {
    match result {
        Err(LockError::InvalidConfiguration(message)) => message,
        other => panic!("expected the table to be refused, got {other:?}"),
    }
}

/// The columns `ensure_schema` makes. With a byte-compared `name`, no test but the one meant to
/// hits the collation warning: `tracing` caches whether a log call site is wanted, and a hit on
/// another thread, where no capture is installed, can race the capturing test.
const SIX_COLUMNS: &str = "name VARBINARY(64) NOT NULL PRIMARY KEY, \
    lock_until DATETIME(3) NOT NULL, locked_at DATETIME(3) NOT NULL, \
    locked_by VARCHAR(255) NOT NULL, fence BIGINT NOT NULL DEFAULT 0, last_fire DATETIME(3) NULL";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_differ_only_in_case_are_two_locks() {
    if common::admin().await.is_none() {
        return;
    }
    let table = common::unique_table("case");
    let _drop = common::drop_table(&table);
    let provider = MySqlLockProvider::new(common::pool(2))
        .with_table(&table)
        .unwrap();
    provider.ensure_schema().await.expect("ensure_schema");
    let upper: Arc<str> = Arc::from("Report");
    let lower: Arc<str> = Arc::from("report");
    let accented: Arc<str> = Arc::from("répôrt");
    for (name, owner) in [(&upper, "a"), (&lower, "b"), (&accented, "c")] {
        assert!(
            matches!(
                acquire(&provider, name, owner).await,
                AcquireOutcome::Acquired(_)
            ),
            "{name:?} shares a lock with another name: the name column is not compared by bytes"
        );
    }
    let mut names: Vec<String> = provider
        .list_locks()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name.to_string())
        .collect();
    names.sort();
    // (A trailing space, equal under PAD SPACE collations, is refused by the name rule.)
    assert_eq!(names, ["Report", "report", "répôrt"]);
}

// Current-thread runtime: the log capture is a thread-local default subscriber.
#[tokio::test]
async fn ensure_schema_warns_about_a_case_insensitive_name_column() {
    let columns = SIX_COLUMNS.replace(
        "name VARBINARY(64) NOT NULL",
        "name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci NOT NULL",
    );
    let Some((table, _drop, provider)) = table_with("ci", &columns).await else {
        return;
    };
    let (logs, guard) = test_support::logs::capture();
    provider.ensure_schema().await.expect("a usable table");
    drop(guard);
    let text = logs.text();
    assert!(text.contains("utf8mb4_general_ci"), "{text}");
    assert!(
        text.contains(&format!(
            "ALTER TABLE `{table}` MODIFY `name` VARBINARY(64) NOT NULL"
        )),
        "{text}"
    );

    // A table the provider creates compares bytes: nothing to warn about.
    let fresh = common::unique_table("bin");
    let _drop_fresh = common::drop_table(&fresh);
    let provider = MySqlLockProvider::new(common::pool(2))
        .with_table(&fresh)
        .unwrap();
    let (logs, guard) = test_support::logs::capture();
    provider.ensure_schema().await.expect("ensure_schema");
    drop(guard);
    assert!(!logs.text().contains("collation"), "{}", logs.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_columns_without_milliseconds_are_refused() {
    let columns = SIX_COLUMNS.replace("lock_until DATETIME(3)", "lock_until DATETIME");
    let Some((table, _drop, provider)) = table_with("secs", &columns).await else {
        return;
    };
    let message = refusal(provider.ensure_schema().await);
    assert!(
        message.contains(&format!(
            "ALTER TABLE `{table}` MODIFY `lock_until` DATETIME(3) NOT NULL"
        )),
        "{message}"
    );
    let name = testkit::unique_name("secs");
    assert!(matches!(
        provider
            .acquire(&testkit::request(&name, "a", LONG, None))
            .await,
        Err(LockError::InvalidConfiguration(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_narrower_than_bigint_is_refused() {
    let columns = SIX_COLUMNS.replace("fence BIGINT", "fence INT");
    let Some((table, _drop, provider)) = table_with("intfence", &columns).await else {
        return;
    };
    let message = refusal(provider.ensure_schema().await);
    assert!(
        message.contains(&format!(
            "ALTER TABLE `{table}` MODIFY `fence` BIGINT NOT NULL DEFAULT 0"
        )),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_increment_surrogate_key_is_not_read_as_the_fence() {
    let columns = SIX_COLUMNS.replace(" PRIMARY KEY", " UNIQUE").replace(
        "name VARBINARY",
        "id BIGINT AUTO_INCREMENT PRIMARY KEY, name VARBINARY",
    );
    let Some((table, _drop, provider)) = table_with("autoinc", &columns).await else {
        return;
    };
    let mut admin = common::admin().await.unwrap();
    // Push the surrogate key well away from any fence value.
    admin
        .query_drop(format!("ALTER TABLE `{table}` AUTO_INCREMENT = 1000"))
        .await
        .unwrap();
    let message = refusal(provider.ensure_schema().await);
    assert!(message.contains("AUTO_INCREMENT"), "{message}");
    assert!(
        message.contains(&format!(
            "ALTER TABLE `{table}` DROP COLUMN `id`, ADD PRIMARY KEY (`name`)"
        )),
        "{message}"
    );
    // Fixed as the message says, the table works and fences start at 1.
    admin
        .query_drop(format!(
            "ALTER TABLE `{table}` DROP COLUMN `id`, ADD PRIMARY KEY (`name`)"
        ))
        .await
        .unwrap();
    provider.ensure_schema().await.expect("the fixed table");
    let name = testkit::unique_name("autoinc");
    match acquire(&provider, &name, "a").await {
        AcquireOutcome::Acquired(lease) => assert_eq!(lease.fence(), 1),
        refused => panic!("{refused:?}"),
    }
}

/// A table with ShedLock's four columns only cannot keep run_once's done marker (a
/// `last_fire`): run_once would run the task at every call. It fails before the task runs,
/// naming the table and the `ALTER TABLE` that adds the columns; after the migration it runs
/// once. (The name is byte-compared here, see [`SIX_COLUMNS`].)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_once_on_a_shedlock_table_fails_before_the_task_runs() {
    let columns = "name VARBINARY(64) NOT NULL PRIMARY KEY, lock_until TIMESTAMP(3) NOT NULL, \
        locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
        locked_by VARCHAR(255) NOT NULL";
    let Some((table, _drop, provider)) = table_with("run_once", columns).await else {
        return;
    };
    let provider = Arc::new(provider);
    let executor = lock_core::LockingTaskExecutor::from_shared(provider.clone());
    let runs = std::sync::atomic::AtomicUsize::new(0);
    let task = || async {
        runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok::<_, String>(())
    };
    for _ in 0..2 {
        let error = executor
            .run_once("migrate", "v1")
            .run(task)
            .await
            .expect_err("a table without last_fire cannot keep the done marker");
        let message = error.to_string();
        assert!(message.contains(&table), "{message}");
        assert!(
            message.contains(&format!("ALTER TABLE `{table}` ADD COLUMN")),
            "{message}"
        );
    }
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the task ran"
    );

    provider.ensure_schema().await.unwrap();
    let first = executor.run_once("migrate", "v1").run(task).await.unwrap();
    assert_eq!(first, lock_core::RunOnceOutcome::Ran(()));
    let again = executor.run_once("migrate", "v1").run(task).await.unwrap();
    assert_eq!(again, lock_core::RunOnceOutcome::AlreadyDone);
    assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
}
