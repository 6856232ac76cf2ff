//! The release, and only the release, commits asynchronously.
//!
//! A trigger on the lock table records `synchronous_commit` as it stands inside the
//! transaction that writes each row version. `set_config(..., true)` lasts until that
//! transaction ends, which is after its commit record is written, so what the trigger sees is
//! what the commit uses.

mod common;

use std::time::Duration;

use lock_core::{AcquireOutcome, LockProvider, testkit};
use lock_provider_postgres::PostgresLockProvider;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_commits_asynchronously_and_nothing_else_does() {
    let table = common::unique_table("asyncrel");
    let log = format!("{table}_log");
    let function = format!("{table}_fn");
    // Dropped in reverse order: tables (and so the trigger) first, then the function.
    let _function_guard = common::cleanup(format!("DROP FUNCTION IF EXISTS {function}()"));
    let _log_guard = common::drop_table(&log);
    let _table_guard = common::drop_table(&table);
    let Some(pool) = common::pool().await else {
        return;
    };
    // One connection, so the check below also shows the setting does not leak into the
    // session that the next statement uses.
    pool.resize(1);
    let provider = PostgresLockProvider::new(pool).with_table(&table).unwrap();
    provider.ensure_schema().await.unwrap();
    let client = common::raw_client().await;
    client
        .batch_execute(&format!(
            "CREATE TABLE {log} (seq serial PRIMARY KEY, op text, sync text);
             CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               INSERT INTO {log} (op, sync) VALUES (TG_OP, current_setting('synchronous_commit'));
               RETURN NEW;
             END $$;
             CREATE TRIGGER {table}_trg BEFORE INSERT OR UPDATE ON {table}
               FOR EACH ROW EXECUTE FUNCTION {function}();"
        ))
        .await
        .unwrap();

    let name = testkit::unique_name("asyncrel");
    let request = testkit::request(&name, "a", Duration::from_secs(60), None);
    let AcquireOutcome::Acquired(lease) = provider.acquire(&request).await.unwrap() else {
        panic!("refused");
    };
    assert!(
        provider
            .extend(&lease, Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    let AcquireOutcome::Acquired(lease) = provider.acquire(&request).await.unwrap() else {
        panic!("refused after release");
    };
    assert!(provider.release(&lease, Duration::ZERO).await.unwrap());
    provider.force_unlock(&name).await.unwrap();

    let seen: Vec<(String, String)> = client
        .query(&format!("SELECT op, sync FROM {log} ORDER BY seq"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let expected = [
        ("INSERT", "on"),  // first acquire creates the row: durable
        ("UPDATE", "on"),  // extend: durable
        ("UPDATE", "off"), // release: asynchronous
        ("UPDATE", "on"),  // acquire again: durable, the release's setting did not leak
        ("UPDATE", "off"), // release
        ("UPDATE", "on"),  // force_unlock: durable
    ];
    let seen: Vec<(&str, &str)> = seen.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    assert_eq!(seen, expected);
}
