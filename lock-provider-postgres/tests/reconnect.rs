//! A killed database connection costs no fire: the next fire gets a fresh connection and runs.

mod common;

use std::time::Duration;

use chrono::{TimeDelta, Utc};
use lock_core::{FireSlot, LockConfiguration, LockOutcome, LockingTaskExecutor};
use lock_provider_postgres::PostgresLockProvider;
use lock_provider_postgres::deadpool_postgres::{Manager, Pool};
use tokio_postgres::NoTls;

/// A provider whose connections carry `application_name`, so the test can find and kill them.
async fn tagged_provider(application_name: &str) -> Option<PostgresLockProvider> {
    common::pool().await?; // reachability, with the CI rule
    let mut config: tokio_postgres::Config = common::url().parse().unwrap();
    config.application_name(application_name);
    let pool = Pool::builder(Manager::new(config, NoTls))
        .max_size(4)
        .build()
        .unwrap();
    let provider = PostgresLockProvider::new(pool)
        .with_table(common::CONFORMANCE_TABLE)
        .unwrap();
    provider.ensure_schema().await.unwrap();
    Some(provider)
}

async fn backends(client: &tokio_postgres::Client, application_name: &str) -> Vec<i32> {
    client
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid",
            &[&application_name],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Terminates every backend of the provider's pool, waiting until each has exited.
async fn kill(client: &tokio_postgres::Client, application_name: &str) -> Vec<i32> {
    let timeout_ms: i64 = 5000;
    let killed: Vec<i32> = client
        .query(
            // Targets first, in a materialized CTE: in a plain WHERE the planner may call
            // pg_terminate_backend before testing the application name, on every backend.
            "WITH targets AS MATERIALIZED (\
                SELECT pid FROM pg_stat_activity \
                WHERE application_name = $1 AND pid <> pg_backend_pid()) \
             SELECT pid FROM targets WHERE pg_terminate_backend(pid, $2)",
            &[&application_name, &timeout_ms],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!killed.is_empty(), "no backend to kill");
    killed
}

/// [`kill`] (waiting until every backend has exited) on a thread of its own, blocking this one:
/// the calling runtime polls nothing meanwhile, so its clients cannot notice the kill before
/// their next statement.
fn kill_without_yielding(application_name: &str) -> Vec<i32> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("runtime");
                runtime.block_on(async {
                    let client = common::raw_client().await;
                    kill(&client, application_name).await
                })
            })
            .join()
            .expect("the kill thread")
    })
}

// Current-thread runtime: nothing runs between the kill and the next fire unless the test
// awaits, which is the harshest timing for a stale pooled connection.
#[tokio::test]
async fn the_fire_after_a_killed_connection_runs() {
    let application_name = format!("lockpg-reconnect-{}", std::process::id());
    let Some(provider) = tagged_provider(&application_name).await else {
        return;
    };
    // Debug lines of this thread, to see whether the retry path ran.
    let (logs, _log_guard) = test_support::logs::capture_at(tracing::Level::DEBUG);

    // Unbatched: a batch's window lets the runtime run the pooled connections' tasks between
    // the kill and the acquire (they would read the termination), and this test needs the
    // acquire to find the dead connection unknowingly.
    let executor =
        LockingTaskExecutor::new(provider.clone()).with_batch_window(std::time::Duration::ZERO);
    let name = lock_core::testkit::unique_name("reconnect");
    let config = LockConfiguration::new(&*name, Duration::from_secs(60), Duration::ZERO).unwrap();
    // In the past: every slot below is due (a slot over 5 s ahead of the database is refused).
    let base = Utc::now() - TimeDelta::seconds(30);
    let fire = |n: i64| {
        let executor = &executor;
        let config = &config;
        async move {
            let slot = Some(FireSlot::new(base + TimeDelta::seconds(n)));
            executor
                .execute_in_slot(config, slot, async move { n })
                .await
        }
    };
    let client = common::raw_client().await;

    // Several fires at once, so the pool holds more than one connection.
    let (a, b, c) = tokio::join!(fire(1), fire(2), fire(3));
    let ran = [a, b, c]
        .into_iter()
        .filter(|r| matches!(r, Ok(LockOutcome::Executed(_))))
        .count();
    assert!(ran >= 1, "no fire ran before the kill");
    let before = backends(&client, &application_name).await;
    assert!(!before.is_empty());

    // Killed between fires, with time for the client to notice: the pool drops the dead
    // connections at checkout and the next fire runs on a fresh one.
    let killed = kill(&client, &application_name).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(fire(10).await.unwrap(), LockOutcome::Executed(10));
    let after = backends(&client, &application_name).await;
    assert!(!after.is_empty());
    assert!(
        after.iter().all(|pid| !killed.contains(pid)),
        "a killed backend is still listed: killed {killed:?}, now {after:?}"
    );

    // Killed right before the fire, nothing awaited in between: the pooled connection is
    // dead but not yet known to be; the provider retries on a fresh connection. The kill runs
    // on another thread while this one blocks, so no task of this runtime (in particular the
    // pooled connections' tasks, which would read the termination and mark the connection
    // closed) runs between the kill and the fire: the race the old version of this test lost
    // on an idle machine, where the terminated backend's goodbye arrived before the kill's reply.
    for n in 0..5 {
        kill_without_yielding(&application_name);
        assert_eq!(
            fire(20 + n).await.unwrap(),
            LockOutcome::Executed(20 + n),
            "the fire right after kill {n} did not run"
        );
    }
    let text = logs.text();
    let retries = text.matches("connection lost: retrying").count();
    eprintln!("retries after 5 kills: {retries}");
    // Each kill left one dead connection that the pool hands out unknowingly.
    assert!(
        retries >= 5,
        "the retry path ran {retries} times, not 5; logs:\n{text}"
    );
}
