//! Kubernetes stops a pod with SIGTERM: the `axum_service` example, a real process holding a
//! real lease in PostgreSQL, gets a real SIGTERM and must stop its job, drain HTTP, release
//! the lease in the database and exit 0, within a bounded time.

use std::process::Command;
use std::time::{Duration, Instant};

use scheduled_locks::postgres::PostgresLockProvider;
use scheduled_locks::provider::LockProvider;
use test_support::http::get;
use test_support::process::{Process, eventually, signal};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_service_and_releases_its_lease_in_the_database() {
    let url = test_support::db::postgres_url();
    let Some(provider) = test_support::skip::or_unreachable(
        "postgres",
        &url,
        PostgresLockProvider::connect(&url).await,
    ) else {
        return;
    };
    let table = test_support::table::unique_table("sigterm");
    let _drop = test_support::table::drop_postgres_table(&table);
    let provider = provider.with_table(&table).unwrap();

    let mut service = Process::spawn(
        "axum_service",
        Command::new(env!("CARGO_BIN_EXE_axum_service"))
            .args(["--database-url", &url, "--table", &table])
            .args(["--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "info"),
    )
    .show_output_if("SHOW_OUTPUT");
    let listening = service
        .stdout
        .wait_for(Duration::from_secs(20), |l| l.starts_with("listening on "))
        .await
        .unwrap_or_else(|| panic!("the service never listened:\n{}", service.stderr.text()));
    let address = listening
        .trim_start_matches("listening on http://")
        .to_owned();
    assert_eq!(get(&address, "/healthz").unwrap(), (200, "ok\n".to_owned()));

    // `export` fires every 5 s and works 3 s: wait (bounded) until it holds its lease.
    let held = eventually(
        Duration::from_secs(12),
        "export to hold its lease",
        || async {
            provider
                .read_lock("export")
                .await
                .unwrap()
                .filter(|row| row.held)
        },
    )
    .await;
    // Let it work a little, so the signal comes mid-run.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        get(&address, "/jobs")
            .unwrap()
            .1
            .contains("export running=true"),
        "the job is mid-run when the signal comes"
    );

    let sent = Instant::now();
    assert!(signal(service.id(), "TERM"), "kill -TERM");
    // The body stops at its next 100 ms step; the release is one round trip. 5 s is far
    // above that and far below the 10 s lease, so a lease left to expire cannot pass.
    let status = service
        .wait_exit(Duration::from_secs(5))
        .await
        .unwrap_or_else(|| {
            panic!(
                "still running 5 s after SIGTERM:\n{}",
                service.stderr.text()
            )
        });
    let took = sent.elapsed();
    assert!(
        status.success(),
        "exit {status}:\n{}",
        service.stderr.text()
    );

    let row = provider
        .read_lock("export")
        .await
        .unwrap()
        .expect("the lock row");
    assert!(
        !row.held,
        "the lease is released in the database after SIGTERM, not left to run out: {row:?}"
    );
    assert_eq!(
        (row.fence, row.locked_by.as_str()),
        (held.fence, held.locked_by.as_str()),
        "the released lease is the one the service held"
    );
    assert!(
        row.lock_until < held.lock_until,
        "released before its lease would have ended: {row:?} vs {held:?}"
    );
    let logs = service.stderr.text();
    assert!(
        logs.contains(r#"shutdown signal received signal="SIGTERM""#),
        "{logs}"
    );
    assert!(logs.contains("job cancelled"), "{logs}");
    assert!(logs.contains("stopped cleanly"), "{logs}");
    assert!(
        get(&address, "/healthz").is_err(),
        "the HTTP server stopped too"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}
