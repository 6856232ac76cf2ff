//! Lock names are compared byte for byte, also on a MariaDB table made with ShedLock's own DDL,
//! whose `name VARCHAR(64)` has the server's case- and trailing-space-insensitive collation:
//! `lockctl unlock 'U_LIVE ' --force` must not release the live lock `u_live`, through the
//! mysql_async provider (`mysql://`) or the sqlx one (`sqlx+mysql://`).

mod common;

use std::time::Duration;

use common::{assert_exit, lockctl, mysql_url, reachable, stderr, unique_table};
use lock_core::{AcquireOutcome, LockProvider, testkit};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::prelude::Queryable;

#[test]
fn unlock_on_a_shedlock_table_matches_the_name_exactly() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let url = mysql_url();
    let Some(provider) = reachable(
        "MariaDB",
        &url,
        runtime.block_on(MySqlLockProvider::connect(&url)),
    ) else {
        return;
    };
    let table = unique_table("my_ci");
    let _drop = test_support::table::drop_mysql_table(&table);
    let pool = provider.pool().clone();
    let provider = provider.with_table(&table).expect("a valid table name");
    runtime.block_on(async {
        let mut conn = pool.get_conn().await.expect("a connection");
        // ShedLock's MySQL DDL, from its README, with the server's default collation.
        conn.query_drop(format!(
            "CREATE TABLE `{table}`(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, \
             locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
             locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))"
        ))
        .await
        .expect("ShedLock's DDL");
        let request = testkit::request(&"u_live".into(), "holder", Duration::from_secs(600), None);
        let granted = provider.acquire(&request).await.expect("acquire");
        assert!(
            matches!(granted, AcquireOutcome::Acquired(_)),
            "{granted:?}"
        );
    });
    let sqlx_url = format!("sqlx+{url}");
    for url in [&url, &sqlx_url] {
        for name in ["U_LIVE ", "U_LIVE", "u_live "] {
            let output = lockctl(&["unlock", name, "--force", "--url", url, "--table", &table]);
            assert_exit(&output, 1, "unlock of a name that differs");
            assert!(
                stderr(&output).contains("there is no lock named"),
                "{}",
                stderr(&output)
            );
        }
    }
    runtime.block_on(async {
        let record = provider
            .read_lock("u_live")
            .await
            .unwrap()
            .expect("the row");
        assert!(record.held, "the live lock was released: {record:?}");
        pool.disconnect().await.expect("close the pool");
    });
}
