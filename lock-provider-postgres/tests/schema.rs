//! The lock table: creation, migration of a ShedLock table, a missing table, names, columns.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use lock_core::{AcquireOutcome, FireSlot, LockError, LockProvider, testkit};
use lock_provider_postgres::ColumnNames;
use lock_provider_postgres::{LockTableConfig, PostgresLockProvider, TableShape};

/// ShedLock's own PostgreSQL DDL, from its README: four columns, no extension.
fn shedlock_ddl(table: &str) -> String {
    format!(
        "CREATE TABLE {table}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, \
         locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
    )
}

use test_support::logs::capture as capture_logs;

async fn acquire(
    provider: &PostgresLockProvider,
    name: &Arc<str>,
    owner: &str,
    slot: Option<FireSlot>,
) -> Option<lock_core::Lease> {
    let request = testkit::request(name, owner, Duration::from_secs(300), slot);
    match provider.acquire(&request).await.expect("acquire") {
        AcquireOutcome::Acquired(lease) => Some(lease),
        AcquireOutcome::Refused(_) => None,
    }
}

// Current-thread runtime: the log capture is a thread-local default subscriber.
#[tokio::test]
async fn shedlock_table_gives_exclusion_then_ensure_schema_migrates_it() {
    let table = common::unique_table("shedlock_only");
    let _guard = common::drop_table(&table);
    let Some(pool) = common::pool().await else {
        return;
    };
    let client = common::raw_client().await;
    client.batch_execute(&shedlock_ddl(&table)).await.unwrap();
    let provider = PostgresLockProvider::new(pool).with_table(&table).unwrap();

    let (logs, log_guard) = capture_logs();
    assert_eq!(
        provider.check_schema().await.unwrap(),
        TableShape::ShedLockOnly
    );
    let name = testkit::unique_name("legacy");
    let slot = Some(FireSlot::new(Utc::now()));
    let lease = acquire(&provider, &name, "a", slot)
        .await
        .expect("free lock");
    assert_eq!(lease.fence(), 0, "no fence column: fence 0");
    assert!(
        acquire(&provider, &name, "b", None).await.is_none(),
        "not exclusive"
    );
    assert!(
        !provider
            .release(&lease_of(&lease, "b"), Duration::ZERO)
            .await
            .unwrap()
    );
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    // Without last_fire a slot cannot be remembered: the same slot is granted again.
    let again = acquire(&provider, &name, "b", slot)
        .await
        .expect("slot ignored");
    assert!(
        provider
            .extend(&again, Duration::from_secs(60))
            .await
            .unwrap()
    );
    let records = provider.list_locks().await.unwrap();
    let record = records.iter().find(|r| *r.name == *name).unwrap();
    assert_eq!(
        (record.fence, record.last_fire, record.held),
        (0, None, true)
    );
    assert!(provider.release(&again, Duration::ZERO).await.unwrap());
    let unlocked = provider.force_unlock(&name).await.unwrap().unwrap();
    assert_eq!(unlocked.locked_by, "b");

    // A second look does not warn again.
    provider.check_schema().await.unwrap();
    drop(log_guard);
    let text = logs.text();
    assert_eq!(
        text.matches("fencing tokens are 0").count(),
        1,
        "expected exactly one start-up warning, got:\n{text}"
    );
    assert!(
        text.contains("ADD COLUMN IF NOT EXISTS \"fence\""),
        "{text}"
    );
    assert!(
        text.contains("ADD COLUMN IF NOT EXISTS \"last_fire\""),
        "{text}"
    );

    provider.ensure_schema().await.unwrap();
    assert_eq!(provider.check_schema().await.unwrap(), TableShape::Full);
    // The existing row starts at fence 0, so the first fenced grant is 1.
    let lease = acquire(&provider, &name, "a", slot)
        .await
        .expect("after migration");
    assert_eq!(lease.fence(), 1);
    provider.release(&lease, Duration::ZERO).await.unwrap();
    assert!(
        acquire(&provider, &name, "b", slot).await.is_none(),
        "after migration a slot runs once"
    );
    // ShedLock's own INSERT still works on the migrated table (the new columns have defaults).
    client
        .execute(
            &format!(
                "INSERT INTO {table}(name, lock_until, locked_at, locked_by) \
                 VALUES($1, timezone('utc', CURRENT_TIMESTAMP), timezone('utc', CURRENT_TIMESTAMP), 'java')"
            ),
            &[&"from-shedlock"],
        )
        .await
        .unwrap();
}

fn lease_of(lease: &lock_core::Lease, owner: &str) -> lock_core::Lease {
    let request = testkit::request(
        &Arc::from(lease.name()),
        owner,
        Duration::from_secs(1),
        None,
    );
    lock_core::Lease::granted(&request, lease.fence())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensure_schema_creates_is_idempotent_and_survives_a_stampede() {
    let table = common::unique_table("ensure");
    let _guard = common::drop_table(&table);
    let Some(pool) = common::pool().await else {
        return;
    };
    let provider = PostgresLockProvider::new(pool).with_table(&table).unwrap();
    // Many instances starting at once against a database without the table.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let provider = provider.clone();
            tokio::spawn(async move { provider.ensure_schema().await })
        })
        .collect();
    for task in tasks {
        task.await
            .expect("ensure_schema task")
            .expect("ensure_schema");
    }
    provider.ensure_schema().await.unwrap();
    assert_eq!(provider.check_schema().await.unwrap(), TableShape::Full);
    let client = common::raw_client().await;
    let columns: Vec<String> = client
        .query(
            "SELECT column_name || ' ' || data_type FROM information_schema.columns \
             WHERE table_name = $1 ORDER BY ordinal_position",
            &[&table],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        columns,
        [
            "name character varying",
            "lock_until timestamp without time zone",
            "locked_at timestamp without time zone",
            "locked_by character varying",
            "fence bigint",
            "last_fire timestamp without time zone",
        ]
    );
    testkit::exclusion(&provider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_table_error_carries_the_ddl() {
    let table = common::unique_table("missing");
    let _guard = common::drop_table(&table);
    let Some(pool) = common::pool().await else {
        return;
    };
    let provider = PostgresLockProvider::new(pool).with_table(&table).unwrap();
    let name = testkit::unique_name("missing");
    let request = testkit::request(&name, "a", Duration::from_secs(60), None);
    let err = provider.acquire(&request).await.unwrap_err();
    let LockError::TableMissing { table: t, ddl, .. } = &err else {
        panic!("expected TableMissing, got {err:?}");
    };
    assert_eq!(*t, table);
    assert_eq!(*ddl, provider.create_table_sql());
    let message = err.to_string();
    assert!(
        message.contains(&format!("CREATE TABLE IF NOT EXISTS \"{table}\"")),
        "{message}"
    );
    assert!(
        message.contains("\"fence\" BIGINT NOT NULL DEFAULT 0"),
        "{message}"
    );
    assert!(matches!(
        provider.list_locks().await,
        Err(LockError::TableMissing { .. })
    ));
    assert!(matches!(
        provider.check_schema().await,
        Err(LockError::TableMissing { .. })
    ));

    // The DDL in the message is what it takes: run it, and the same provider works.
    let client = common::raw_client().await;
    client.batch_execute(ddl).await.unwrap();
    let lease = acquire(&provider, &name, "a", None)
        .await
        .expect("after the DDL");

    // Dropped at run time: the database's own error, as the source, still with the DDL.
    client
        .batch_execute(&format!("DROP TABLE {table}"))
        .await
        .unwrap();
    let err = provider.release(&lease, Duration::ZERO).await.unwrap_err();
    let LockError::TableMissing { source, .. } = &err else {
        panic!("expected TableMissing, got {err:?}");
    };
    let source = source.as_ref().expect("the database's error as source");
    let db_error = source
        .downcast_ref::<tokio_postgres::Error>()
        .and_then(|e| e.as_db_error())
        .expect("a database error");
    assert!(db_error.message().contains("does not exist"), "{db_error}");
    // ensure_schema puts it back, and the provider finds it again.
    provider.ensure_schema().await.unwrap();
    assert!(acquire(&provider, &name, "a", None).await.is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_columns_reserved_words_and_a_schema_qualified_table() {
    let schema = common::unique_table("schema");
    let Some(pool) = common::pool().await else {
        return;
    };
    let client = common::raw_client().await;
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .unwrap();
    let _guard = common::cleanup(format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));

    let columns = ColumnNames {
        name: "Lock_Name".into(),
        lock_until: "until".into(),
        locked_at: "at".into(),
        locked_by: "user".into(),
        fence: "order".into(),
        last_fire: "select".into(),
    };
    let config = LockTableConfig {
        table: format!("{schema}.Job_Locks"),
        columns,
    };
    let provider = PostgresLockProvider::with_config(pool, config).unwrap();
    assert_eq!(
        provider.describe(),
        format!("postgres table {schema}.job_locks")
    );
    provider.ensure_schema().await.unwrap();
    assert_eq!(provider.check_schema().await.unwrap(), TableShape::Full);
    let found: i64 = client
        .query_one(
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = $1 \
             AND table_name = 'job_locks' AND column_name IN ('lock_name', 'until', 'at', 'user', 'order', 'select')",
            &[&schema],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(found, 6);
    testkit::exclusion(&provider).await;
    testkit::fence_strictly_increasing(&provider).await;
    testkit::once_per_slot(&provider).await;
    testkit::stale_lease_cannot_release_new_one(&provider).await;
    testkit::list_and_force_unlock(&provider).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_column_that_is_not_there_is_named() {
    let table = common::unique_table("wrongcols");
    let _guard = common::drop_table(&table);
    let Some(pool) = common::pool().await else {
        return;
    };
    common::raw_client()
        .await
        .batch_execute(&shedlock_ddl(&table))
        .await
        .unwrap();
    let provider = PostgresLockProvider::new(pool)
        .with_table(&table)
        .unwrap()
        .with_columns(ColumnNames {
            locked_by: "owner".into(),
            ..ColumnNames::default()
        })
        .unwrap();
    let err = provider.check_schema().await.unwrap_err();
    let message = err.to_string();
    assert!(matches!(err, LockError::InvalidConfiguration(_)), "{err:?}");
    assert!(message.contains("no column \"owner\""), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timestamptz_table_is_refused_with_the_reason() {
    let table = common::unique_table("tz");
    let _guard = common::drop_table(&table);
    let Some(pool) = common::pool().await else {
        return;
    };
    common::raw_client()
        .await
        .batch_execute(&format!(
            "CREATE TABLE {table}(name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMPTZ NOT NULL, \
             locked_at TIMESTAMPTZ NOT NULL, locked_by VARCHAR(255) NOT NULL)"
        ))
        .await
        .unwrap();
    let provider = PostgresLockProvider::new(pool).with_table(&table).unwrap();
    let err = provider.check_schema().await.unwrap_err();
    assert!(err.to_string().contains("without time"), "{err}");
}

/// A table whose columns differ from ShedLock's six by `change`, and a provider on it.
async fn provider_on_altered_table(
    prefix: &str,
    change: (&str, &str),
) -> Option<(String, test_support::table::Cleanup, PostgresLockProvider)> {
    let table = common::unique_table(prefix);
    let guard = common::drop_table(&table);
    let pool = common::pool().await?;
    let ddl = format!(
        "CREATE TABLE {table}(name VARCHAR(64) PRIMARY KEY, lock_until TIMESTAMP(3) NOT NULL, \
         locked_at TIMESTAMP(3) NOT NULL, locked_by VARCHAR(255) NOT NULL, \
         fence BIGINT NOT NULL DEFAULT 0, last_fire TIMESTAMP(3) NULL)"
    );
    assert!(ddl.contains(change.0), "{ddl}");
    common::raw_client()
        .await
        .batch_execute(&ddl.replace(change.0, change.1))
        .await
        .unwrap();
    let provider = PostgresLockProvider::new(pool).with_table(&table).unwrap();
    Some((table, guard, provider))
}

fn refusal(result: Result<(), LockError>) -> String {
    match result {
        Err(LockError::InvalidConfiguration(message)) => message,
        other => panic!("expected the table to be refused, got {other:?}"),
    }
}

/// `timestamp(0)` rounds to the second: two slots within a second collide, and a lease may
/// end up to half a second early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timestamps_without_milliseconds_are_refused_with_the_alter() {
    let change = ("lock_until TIMESTAMP(3)", "lock_until TIMESTAMP(0)");
    let Some((table, _guard, provider)) = provider_on_altered_table("ts0", change).await else {
        return;
    };
    let message = refusal(provider.ensure_schema().await);
    assert!(
        message.contains(&format!(
            "ALTER TABLE \"{table}\" ALTER COLUMN \"lock_until\" TYPE TIMESTAMP(3)"
        )),
        "{message}"
    );
    let name = testkit::unique_name("ts0");
    assert!(matches!(
        provider
            .acquire(&testkit::request(&name, "a", Duration::from_secs(60), None))
            .await,
        Err(LockError::InvalidConfiguration(_))
    ));
}

/// An `INTEGER` fence fails only after the grant committed (the fence does not fit the
/// provider's `i64`), so every fire would take the lock and run nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fence_narrower_than_bigint_is_refused_with_the_alter() {
    let change = ("fence BIGINT", "fence INTEGER");
    let Some((table, _guard, provider)) = provider_on_altered_table("intfence", change).await
    else {
        return;
    };
    let message = refusal(provider.check_schema().await.map(drop));
    assert!(
        message.contains(&format!(
            "ALTER TABLE \"{table}\" ALTER COLUMN \"fence\" TYPE BIGINT"
        )),
        "{message}"
    );
}

#[tokio::test]
async fn invalid_names_are_refused_before_any_sql() {
    // A pool that points nowhere: construction must fail without touching it.
    let config: tokio_postgres::Config = "postgres://nobody@127.0.0.1:1/none".parse().unwrap();
    let pool = lock_provider_postgres::deadpool_postgres::Pool::builder(
        lock_provider_postgres::deadpool_postgres::Manager::new(config, tokio_postgres::NoTls),
    )
    .build()
    .unwrap();
    for table in [
        "shedlock; DROP TABLE users",
        "a.b.c",
        "\"quoted\"",
        "",
        "x".repeat(64).as_str(),
        "public.",
        "9lives",
    ] {
        let err = PostgresLockProvider::new(pool.clone())
            .with_table(table)
            .unwrap_err();
        assert!(
            matches!(err, LockError::InvalidConfiguration(_)),
            "{table:?}: {err:?}"
        );
        assert!(err.to_string().contains("table name"), "{err}");
    }
    let err = PostgresLockProvider::new(pool.clone())
        .with_columns(ColumnNames {
            lock_until: "lock_until = now(); --".into(),
            ..ColumnNames::default()
        })
        .unwrap_err();
    assert!(err.to_string().contains("lock_until"), "{err}");
    let err = PostgresLockProvider::with_config(
        pool.clone(),
        LockTableConfig {
            columns: ColumnNames {
                fence: "NAME".into(),
                ..ColumnNames::default()
            },
            ..LockTableConfig::default()
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("both named"), "{err}");
    assert_eq!(pool.status().size, 0, "a connection was opened");
}

#[tokio::test]
async fn an_unreachable_database_is_a_provider_error_with_its_source() {
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    let err = PostgresLockProvider::connect("postgres://postgres@127.0.0.1:1/test")
        .await
        .unwrap_err();
    let LockError::Provider { operation, .. } = &err else {
        panic!("expected LockError::Provider, got {err:?}");
    };
    assert_eq!(*operation, "connect");
    assert!(std::error::Error::source(&err).is_some());

    let config: tokio_postgres::Config = "postgres://postgres@127.0.0.1:1/test".parse().unwrap();
    let pool = lock_provider_postgres::deadpool_postgres::Pool::builder(
        lock_provider_postgres::deadpool_postgres::Manager::new(config, tokio_postgres::NoTls),
    )
    .build()
    .unwrap();
    let provider = PostgresLockProvider::new(pool);
    let name = testkit::unique_name("unreachable");
    let err = provider
        .acquire(&testkit::request(&name, "a", Duration::from_secs(1), None))
        .await
        .unwrap_err();
    let LockError::Provider {
        operation, lock, ..
    } = &err
    else {
        panic!("expected LockError::Provider, got {err:?}");
    };
    assert_eq!((*operation, lock.as_str()), ("acquire", &*name));
    let mut chain = String::new();
    let mut source = std::error::Error::source(&err);
    while let Some(e) = source {
        chain.push_str(&format!(" <- {e}"));
        source = e.source();
    }
    assert!(
        chain.to_lowercase().contains("refused") || chain.to_lowercase().contains("connect"),
        "source chain: {chain}"
    );

    let err = PostgresLockProvider::connect("postgres://[bad")
        .await
        .unwrap_err();
    assert!(matches!(err, LockError::InvalidConfiguration(_)), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_recreated_under_a_running_provider_costs_no_fire() {
    let table = common::unique_table("recreated");
    let _guard = common::drop_table(&table);
    let Some(pool) = common::pool().await else {
        return;
    };
    // One connection, so the statements cached on it are the ones that go stale.
    pool.resize(1);
    let provider = PostgresLockProvider::new(pool).with_table(&table).unwrap();
    provider.ensure_schema().await.unwrap();
    let name = testkit::unique_name("recreated");
    for _ in 0..3 {
        let lease = acquire(&provider, &name, "a", None).await.expect("free");
        provider.release(&lease, Duration::ZERO).await.unwrap();
    }
    let client = common::raw_client().await;

    // Recreated with other column types (ShedLock's plain TIMESTAMP) plus our two columns:
    // the prepared statements' result types changed.
    client
        .batch_execute(&format!(
            "DROP TABLE {table}; {}; ALTER TABLE {table} ADD COLUMN fence BIGINT NOT NULL DEFAULT 0, \
             ADD COLUMN last_fire TIMESTAMP NULL",
            shedlock_ddl(&table)
        ))
        .await
        .unwrap();
    let lease = acquire(&provider, &name, "a", None)
        .await
        .expect("the first fire after the table was recreated");
    assert_eq!(lease.fence(), 1, "a new table starts a new fence sequence");
    provider.release(&lease, Duration::ZERO).await.unwrap();

    // Recreated by ShedLock's DDL alone: the statements name columns that are gone.
    client
        .batch_execute(&format!("DROP TABLE {table}; {}", shedlock_ddl(&table)))
        .await
        .unwrap();
    let lease = acquire(&provider, &name, "a", None)
        .await
        .expect("the first fire after the table lost its extension columns");
    assert_eq!(lease.fence(), 0);
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    assert_eq!(
        provider.check_schema().await.unwrap(),
        TableShape::ShedLockOnly
    );
}

/// A table with ShedLock's four columns only cannot keep run_once's done marker (a
/// `last_fire`): run_once would run the task at every call. It fails before the task runs,
/// naming the table and the statement that adds the column; after the migration it runs once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_once_on_a_shedlock_table_fails_before_the_task_runs() {
    let table = common::unique_table("run_once_shedlock");
    let _guard = common::drop_table(&table);
    let Some(pool) = common::pool().await else {
        return;
    };
    let client = common::raw_client().await;
    client.batch_execute(&shedlock_ddl(&table)).await.unwrap();
    let provider = PostgresLockProvider::new(pool).with_table(&table).unwrap();
    let executor = lock_core::LockingTaskExecutor::new(provider.clone());
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
        assert!(message.contains("ADD COLUMN IF NOT EXISTS"), "{message}");
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
