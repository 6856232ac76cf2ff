//! `lockctl` against the real PostgreSQL, MariaDB, Redis and a SQLite file: the built binary is run
//! as an operator would run it, on a table where a lock is held.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

use common::{
    HOLDER, LOCK, assert_exit, hold_lock, lockctl, lockctl_with_env, mysql_url, postgres_url,
    reachable, redis_url, stderr, stdout, unique_table,
};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_postgres::PostgresLockProvider;
use lock_provider_redis::{RedisLockProvider, redis};
use lock_provider_sqlite::SqliteLockProvider;
use serde_json::Value;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The JSON row of [`LOCK`] from `lockctl list --json`.
fn listed(url: &str, table: &str) -> Value {
    let output = lockctl(&["list", "--json", "--url", url, "--table", table]);
    assert_exit(&output, 0, "list --json");
    let rows: Value = serde_json::from_str(&stdout(&output)).expect("list --json prints JSON");
    let rows = rows.as_array().expect("a JSON array");
    rows.iter()
        .find(|row| row["name"] == LOCK)
        .unwrap_or_else(|| panic!("{LOCK} not in {rows:?}"))
        .clone()
}

/// What an operator does with a held lock, the same for every backend: `url` names a database
/// whose `table` has [`LOCK`] held by [`HOLDER`] with fence 1.
fn held_lock_scenario(url: &str, table: &str) {
    // list: a table with the held lock.
    let output = lockctl(&["list", "--url", url, "--table", table]);
    assert_exit(&output, 0, "list");
    let text = stdout(&output);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "STATE",
            "LOCKED_BY",
            "LOCKED_AT",
            "LOCK_UNTIL",
            "FENCE",
            "LAST_FIRE"
        ]
    );
    let row: Vec<&str> = lines
        .find(|line| line.starts_with(LOCK))
        .unwrap_or_else(|| panic!("no row for {LOCK}:\n{text}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], [LOCK, "held", HOLDER], "{text}");
    assert_eq!(row[5], "1", "fence: {text}");
    for instant in [row[3], row[4], row[6]] {
        // UTC, millisecond precision: 2026-05-01T01:05:00.007Z
        assert_eq!(instant.len(), 24, "{instant} in {text}");
        assert!(
            instant.ends_with('Z') && instant.as_bytes()[19] == b'.',
            "{instant}"
        );
    }

    // list --json: the same fields.
    let before = listed(url, table);
    assert_eq!(before["state"], "held");
    assert_eq!(before["locked_by"], HOLDER);
    assert_eq!(before["fence"], 1);
    assert_eq!(before["locked_at"], row[3]);
    assert_eq!(before["lock_until"], row[4]);
    assert_eq!(before["last_fire"], row[6]);

    // unlock without --force: shows the lock, refuses, changes nothing.
    let output = lockctl(&["unlock", LOCK, "--url", url, "--table", table]);
    assert_exit(&output, 2, "unlock without --force");
    assert!(
        stderr(&output).contains("refusing to release lock \"nightly_report\" without --force"),
        "{}",
        stderr(&output)
    );
    assert!(stderr(&output).contains(HOLDER), "{}", stderr(&output));
    assert!(stdout(&output).contains(LOCK), "{}", stdout(&output));
    assert_eq!(
        listed(url, table),
        before,
        "a refused unlock changed the lock"
    );

    // unlock --force: releases, prints the lock as it was.
    let output = lockctl(&["unlock", LOCK, "--force", "--url", url, "--table", table]);
    assert_exit(&output, 0, "unlock --force");
    let text = stdout(&output);
    assert!(
        text.starts_with(&format!(
            "released lock \"{LOCK}\", held by {HOLDER} until "
        )),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|line| line.starts_with(LOCK) && line.split_whitespace().nth(1) == Some("held")),
        "the row as it was before: {text}"
    );
    let after = listed(url, table);
    assert_eq!(after["state"], "free", "{after}");
    // Fencing and once-per-slot survive an operator's release.
    assert_eq!(after["fence"], 1);
    assert_eq!(after["last_fire"], before["last_fire"]);

    // A second release finds nothing held and says so.
    let output = lockctl(&["unlock", LOCK, "--force", "--url", url, "--table", table]);
    assert_exit(&output, 0, "unlock --force of a free lock");
    assert!(
        stdout(&output).contains("was not held"),
        "{}",
        stdout(&output)
    );

    // An unknown name is an error, with or without --force.
    for force in [true, false] {
        let mut args = vec!["unlock", "no_such_lock", "--url", url, "--table", table];
        if force {
            args.push("--force");
        }
        let output = lockctl(&args);
        assert_exit(&output, 1, "unlock of an unknown lock");
        assert!(
            stderr(&output).contains("there is no lock named \"no_such_lock\""),
            "{}",
            stderr(&output)
        );
    }

    // A name no table can hold is a usage error, refused before anything is sent.
    let long = "x".repeat(65);
    let output = lockctl(&["unlock", &long, "--force", "--url", url, "--table", table]);
    assert_exit(&output, 2, "unlock of a name over 64 bytes");
    assert!(
        stderr(&output).contains("at most 64 bytes"),
        "{}",
        stderr(&output)
    );

    // A missing table: exit 1, and the DDL to create it. (Redis has no table: a key prefix
    // with no keys under it is an empty list, and its locks are unknown names, as above.)
    let missing = format!("{table}_missing");
    let tables = if url.starts_with("redis") {
        vec![]
    } else {
        vec![vec!["list"], vec!["unlock", LOCK, "--force"]]
    };
    for args in tables {
        let mut args = args;
        args.extend(["--url", url, "--table", &missing]);
        let output = lockctl(&args);
        assert_exit(&output, 1, "a missing table");
        let err = stderr(&output);
        assert!(
            err.contains(&format!("lock table {missing} does not exist")),
            "{err}"
        );
        assert!(err.contains("CREATE TABLE IF NOT EXISTS"), "{err}");
    }

    // A table name that is not an identifier never reaches the server.
    let output = lockctl(&["list", "--url", url, "--table", "locks; DROP TABLE x"]);
    assert_exit(&output, 2, "a bad table name");
    assert!(stderr(&output).contains("--table"), "{}", stderr(&output));
}

/// A lock whose last fire is a year ahead of the database's clock, as an older version on a
/// host with a wrong clock left it.
const POISONED: &str = "billing::poisoned";

async fn poison(provider: &dyn lock_core::LockProvider) {
    let year = chrono::TimeDelta::days(365);
    let now = provider.database_time().await.expect("database_time");
    let slot = Some(lock_core::FireSlot::new(now + year));
    let mut request = lock_core::testkit::request(
        &POISONED.into(),
        "old-version",
        std::time::Duration::from_secs(60),
        slot,
    );
    request.max_slot_lead = std::time::Duration::from_secs(2 * 365 * 86_400);
    match provider.acquire(&request).await.expect("acquire") {
        lock_core::AcquireOutcome::Acquired(lease) => {
            assert!(
                provider
                    .release(&lease, std::time::Duration::ZERO)
                    .await
                    .expect("release")
            );
        }
        refused => panic!("poisoning was refused: {refused:?}"),
    }
}

/// The JSON row of `name`.
fn listed_row(url: &str, table: &str, name: &str) -> Value {
    let output = lockctl(&["list", "--json", "--url", url, "--table", table]);
    assert_exit(&output, 0, "list --json");
    let rows: Value = serde_json::from_str(&stdout(&output)).expect("list --json prints JSON");
    rows.as_array()
        .expect("a JSON array")
        .iter()
        .find(|row| row["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {rows:?}"))
        .clone()
}

/// `reset-slot` on [`POISONED`]: refused without --force (exit 2, nothing changed), repaired
/// with it, kept the second time.
fn reset_slot_scenario(url: &str, table: &str) {
    let poisoned = listed_row(url, table, POISONED)["last_fire"].clone();
    let output = lockctl(&["reset-slot", POISONED, "--url", url, "--table", table]);
    assert_exit(&output, 2, "reset-slot without --force");
    let err = stderr(&output);
    assert!(
        err.contains("refusing to reset the last fire")
            && err.contains("ahead of the database's clock")
            && err.contains("Add --force"),
        "{err}"
    );
    assert_eq!(
        listed_row(url, table, POISONED)["last_fire"],
        poisoned,
        "a refused reset changed it"
    );

    let output = lockctl(&[
        "reset-slot",
        POISONED,
        "--force",
        "--url",
        url,
        "--table",
        table,
    ]);
    assert_exit(&output, 0, "reset-slot --force");
    let out = stdout(&output);
    assert!(
        out.contains(&format!("reset the last fire of lock {POISONED:?} from")),
        "{out}"
    );
    let repaired = listed_row(url, table, POISONED)["last_fire"].clone();
    let repaired: chrono::DateTime<chrono::Utc> = repaired
        .as_str()
        .unwrap_or_else(|| panic!("last_fire {repaired:?}"))
        .parse()
        .expect("an RFC 3339 time");
    // The database runs on this machine: its now is ours, within a minute.
    assert!(
        (repaired - chrono::Utc::now()).abs() < chrono::TimeDelta::minutes(1),
        "repaired last_fire {repaired}"
    );

    let output = lockctl(&[
        "reset-slot",
        POISONED,
        "--force",
        "--url",
        url,
        "--table",
        table,
    ]);
    assert_exit(&output, 0, "reset-slot --force again");
    assert!(
        stdout(&output).contains("was not ahead of the database's clock"),
        "{}",
        stdout(&output)
    );
    let output = lockctl(&[
        "reset-slot",
        "no_such_lock",
        "--force",
        "--url",
        url,
        "--table",
        table,
    ]);
    assert_exit(&output, 1, "reset-slot of an unknown lock");
}

/// Runs the scenario, then `teardown` whatever happened, then re-raises a failure.
fn run_then(scenario: impl FnOnce(), teardown: impl FnOnce()) {
    let result = catch_unwind(AssertUnwindSafe(scenario));
    teardown();
    if let Err(panic) = result {
        resume_unwind(panic);
    }
}

#[test]
fn postgres_list_and_unlock() {
    let runtime = runtime();
    let url = postgres_url();
    let Some(provider) = reachable(
        "PostgreSQL",
        &url,
        runtime.block_on(PostgresLockProvider::connect(&url)),
    ) else {
        return;
    };
    let table = unique_table("pg");
    // The lock table and the operations tables ensure_schema made next to it.
    let _drop = test_support::table::drop_postgres_table(&table);
    let provider = provider.with_table(&table).expect("a valid table name");
    runtime.block_on(async {
        provider.ensure_schema().await.expect("create the table");
        hold_lock(&provider).await;
        poison(&provider).await;
    });
    held_lock_scenario(&url, &table);
    reset_slot_scenario(&url, &table);
}

#[test]
fn postgres_url_variants_are_accepted() {
    let runtime = runtime();
    let url = postgres_url();
    if reachable(
        "PostgreSQL",
        &url,
        runtime.block_on(PostgresLockProvider::connect(&url)),
    )
    .is_none()
    {
        return;
    }
    // postgresql:// is libpq's other spelling; a missing table proves the server was reached.
    let other = url.replacen("postgres://", "postgresql://", 1);
    let output = lockctl(&["list", "--url", &other, "--table", &unique_table("pgnone")]);
    assert_exit(&output, 1, "postgresql:// on a missing table");
    assert!(
        stderr(&output).contains("does not exist"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn mysql_list_and_unlock() {
    let runtime = runtime();
    let url = mysql_url();
    let Some(provider) = reachable(
        "MariaDB",
        &url,
        runtime.block_on(MySqlLockProvider::connect(&url)),
    ) else {
        return;
    };
    let table = unique_table("my");
    let _drop = test_support::table::drop_mysql_table(&table);
    let pool = provider.pool().clone();
    let provider = provider.with_table(&table).expect("a valid table name");
    runtime.block_on(async {
        provider.ensure_schema().await.expect("create the table");
        hold_lock(&provider).await;
        poison(&provider).await;
    });
    let mariadb_url = url.replacen("mysql://", "mariadb://", 1);
    run_then(
        || {
            held_lock_scenario(&url, &table);
            reset_slot_scenario(&url, &table);
            // mariadb:// is the same driver.
            assert_eq!(listed(&mariadb_url, &table)["state"], "free");
        },
        || runtime.block_on(async { pool.disconnect().await.expect("close the pool") }),
    );
}

/// `sqlx+postgres://` and `sqlx+mysql://`: lockctl through the sqlx provider, on a lock taken
/// by the driver-specific provider (the two share the table and its statements).
#[test]
fn sqlx_list_and_unlock() {
    let runtime = runtime();
    let pg_url = postgres_url();
    let Some(postgres) = reachable(
        "PostgreSQL",
        &pg_url,
        runtime.block_on(PostgresLockProvider::connect(&pg_url)),
    ) else {
        return;
    };
    let my_url = mysql_url();
    let Some(mysql) = reachable(
        "MariaDB",
        &my_url,
        runtime.block_on(MySqlLockProvider::connect(&my_url)),
    ) else {
        return;
    };
    let pg_table = unique_table("sqlxpg");
    let my_table = unique_table("sqlxmy");
    let _drop = (
        test_support::table::drop_postgres_table(&pg_table),
        test_support::table::drop_mysql_table(&my_table),
    );
    let pool = mysql.pool().clone();
    let postgres = postgres.with_table(&pg_table).expect("a valid table name");
    let mysql = mysql.with_table(&my_table).expect("a valid table name");
    runtime.block_on(async {
        postgres.ensure_schema().await.expect("create the table");
        mysql.ensure_schema().await.expect("create the table");
        for provider in [&postgres as &dyn lock_core::LockProvider, &mysql] {
            hold_lock(provider).await;
            poison(provider).await;
        }
    });
    run_then(
        || {
            for (url, table) in [(&pg_url, &pg_table), (&my_url, &my_table)] {
                let url = format!("sqlx+{url}");
                held_lock_scenario(&url, table);
                reset_slot_scenario(&url, table);
            }
        },
        || runtime.block_on(async { pool.disconnect().await.expect("close the pool") }),
    );
}

#[test]
fn redis_list_and_unlock() {
    let runtime = runtime();
    let url = redis_url();
    // The "table" of a Redis URL is the key prefix: one of this run's own.
    let prefix = unique_table("redis");
    let Some(provider) = reachable(
        "Redis",
        &url,
        runtime.block_on(RedisLockProvider::connect(&url)),
    ) else {
        return;
    };
    let provider = provider.with_key_prefix(&prefix).expect("a valid prefix");
    runtime.block_on(async {
        hold_lock(&provider).await;
        poison(&provider).await;
    });
    run_then(
        || {
            held_lock_scenario(&url, &prefix);
            reset_slot_scenario(&url, &prefix);
        },
        || {
            runtime.block_on(async {
                let mut conn = provider.connection().clone();
                let keys = [provider.key(LOCK), provider.key(POISONED)];
                let _: i64 = redis::cmd("DEL")
                    .arg(&keys)
                    .query_async(&mut conn)
                    .await
                    .expect("delete the test keys");
            })
        },
    );
}

/// `--table` is checked by the provider's rule: a Redis key prefix with `:` (the usual
/// namespace separator) reaches the server, while an SQL table name cannot hold one.
#[test]
fn a_redis_key_prefix_with_colons_is_accepted_where_a_table_name_is_not() {
    let runtime = runtime();
    let url = redis_url();
    let prefix = format!("{}:billing:locks", unique_table("redis"));
    let Some(provider) = reachable(
        "Redis",
        &url,
        runtime.block_on(RedisLockProvider::connect(&url)),
    ) else {
        return;
    };
    let provider = provider.with_key_prefix(&prefix).expect("a valid prefix");
    runtime.block_on(hold_lock(&provider));
    run_then(
        || {
            let row = listed(&url, &prefix);
            assert_eq!(row["locked_by"], HOLDER, "{row}");
            let output = lockctl(&["status", "--url", &url, "--table", &prefix]);
            assert_exit(&output, 0, "status on a Redis prefix with colons");
            // A prefix Redis refuses is still refused before connecting, by its own rule.
            let output = lockctl(&["list", "--url", &url, "--table", "billing locks"]);
            assert_exit(&output, 2, "a prefix with a space");
            assert!(
                stderr(&output).contains("--table: invalid configuration: Redis key prefix"),
                "{}",
                stderr(&output)
            );
        },
        || {
            runtime.block_on(async {
                let mut conn = provider.connection().clone();
                let _: i64 = redis::cmd("DEL")
                    .arg(provider.key(LOCK))
                    .query_async(&mut conn)
                    .await
                    .expect("delete the test key");
            })
        },
    );
    let dir = tempfile::tempdir().expect("a temp dir");
    let sqlite = format!("sqlite://{}", dir.path().join("locks.db").display());
    let output = lockctl(&["list", "--url", &sqlite, "--table", "billing:locks"]);
    assert_exit(&output, 2, "an SQL table name with a colon");
    assert!(
        stderr(&output).contains("--table: invalid configuration: table name"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn sqlite_list_and_unlock() {
    let runtime = runtime();
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("locks.db");
    let table = unique_table("lite");
    let provider = SqliteLockProvider::open(&path)
        .and_then(|p| p.with_table(&table))
        .expect("open a SQLite file");
    runtime.block_on(async {
        provider.ensure_schema().await.expect("create the table");
        hold_lock(&provider).await;
        poison(&provider).await;
    });
    let url = format!("sqlite://{}", path.display());
    // The temp dir (and the file) go away on drop, whatever happens.
    held_lock_scenario(&url, &table);
    reset_slot_scenario(&url, &table);

    // The URL and the table can come from the environment.
    let output = lockctl_with_env(
        &["list", "--json"],
        &[("LOCKCTL_URL", &url), ("LOCKCTL_TABLE", &table)],
    );
    assert_exit(&output, 0, "list with LOCKCTL_URL and LOCKCTL_TABLE");
    assert!(stdout(&output).contains(LOCK), "{}", stdout(&output));

    // A relative path is relative to the working directory.
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_lockctl"))
        .args(["list", "--url", "sqlite://locks.db", "--table", &table])
        .env_remove("LOCKCTL_URL")
        .env_remove("LOCKCTL_TABLE")
        .current_dir(dir.path())
        .output()
        .expect("run lockctl");
    assert_exit(&output, 0, "a relative sqlite:// path");
    assert!(stdout(&output).contains(LOCK), "{}", stdout(&output));
    drop(provider);
}

#[test]
fn a_missing_sqlite_file_is_an_error_and_is_not_created() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let path = dir.path().join("typo.db");
    let url = format!("sqlite://{}", path.display());
    for args in [vec!["list"], vec!["unlock", LOCK, "--force"]] {
        let mut args = args;
        args.extend(["--url", &url]);
        let output = lockctl(&args);
        assert_exit(&output, 1, "a missing SQLite file");
        assert!(
            stderr(&output).contains(&format!(
                "the SQLite database {} does not exist",
                path.display()
            )),
            "{}",
            stderr(&output)
        );
    }
    assert!(!path.exists(), "lockctl created {}", path.display());
}

#[test]
fn bad_urls_exit_with_code_2_and_say_why() {
    let cases: [(&[&str], &str); 6] = [
        (
            &["list", "--url", "http://admin:secret@db.internal/app"],
            "unsupported scheme `http://`",
        ),
        (&["list", "--url", "db.internal:5432"], "is not a URL"),
        (
            &["list", "--url", "postgres://app:secret@db:notaport/app"],
            "not a valid PostgreSQL URL",
        ),
        (
            &["list", "--url", "mysql://app:secret@db:notaport/app"],
            "not a valid MySQL/MariaDB URL",
        ),
        (&["list", "--url", "sqlite://"], "names no file"),
        (&["list"], "pass --url URL or set LOCKCTL_URL"),
    ];
    for (args, expected) in cases {
        let output = lockctl(args);
        assert_exit(&output, 2, &format!("{args:?}"));
        let err = stderr(&output);
        assert!(err.contains(expected), "{args:?}: {err}");
        assert!(!err.contains("secret"), "a password was printed: {err}");
    }
    // Clap's own usage errors use the same code.
    assert_exit(&lockctl(&["frobnicate"]), 2, "an unknown subcommand");
    assert_exit(
        &lockctl(&["unlock", "--url", "sqlite://x.db"]),
        2,
        "unlock without a name",
    );
}

#[test]
fn unreachable_servers_exit_with_code_1_and_name_the_server() {
    // Port 1 (tcpmux) is closed on any machine that runs these tests: connection refused.
    let cases = [
        (
            "postgres://postgres@127.0.0.1:1/test",
            "cannot connect to the PostgreSQL server at 127.0.0.1:1 (database test)",
        ),
        (
            "mysql://root@127.0.0.1:1/test",
            "cannot connect to the MySQL/MariaDB server at 127.0.0.1:1 (database test)",
        ),
    ];
    for (url, expected) in cases {
        for args in [vec!["list"], vec!["unlock", LOCK, "--force"]] {
            let mut args = args;
            args.extend(["--url", url]);
            let output = lockctl(&args);
            assert_exit(&output, 1, url);
            let err = stderr(&output);
            assert!(err.contains(expected), "{err}");
            // The driver's reason is shown too.
            assert!(err.contains("caused by: "), "{err}");
        }
    }
}

/// `trigger --param`: a parameter no run may take is a usage error (exit 2) naming the rule,
/// refused before anything is sent (the URL's port has no server: a connection would be exit 1).
#[test]
fn a_bad_trigger_parameter_is_refused_before_anything_is_sent() {
    let url = "postgres://root@127.0.0.1:1/test";
    for (params, says) in [
        (vec!["no-equals-sign"], "has no `=`"),
        (vec!["bad key=1"], "bad key"),
        (vec!["day=1", "day=2"], "given twice"),
        (vec!["note=a\u{1b}[2J"], "control"),
    ] {
        let mut args = vec!["trigger", "report", "--url", url];
        for param in &params {
            args.extend(["--param", param]);
        }
        let output = lockctl(&args);
        assert_exit(&output, 2, "a bad --param");
        let err = stderr(&output);
        assert!(
            err.contains("--param") && err.contains(says),
            "{params:?}: {err}"
        );
    }
}
