//! A batch decides each request exactly as the single acquire statement decides it alone: the
//! same rows, seeded into two tables, are asked for once as one batch and once one request at
//! a time, and the outcomes and the rows left behind are compared, on the table
//! `ensure_schema()` makes and on tables made by ShedLock's DDL (a `VARCHAR` name in a
//! case-insensitive collation, `TIMESTAMP` columns), with and without the extension columns.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, TimeDelta, Utc};
use lock_core::{AcquireOutcome, FireSlot, LockProvider, LockRequest, Refusal, testkit};
use lock_provider_mysql::MySqlLockProvider;
use lock_provider_mysql::mysql_async::prelude::Queryable;
use lock_provider_mysql::mysql_async::{Conn, Row};

const LONG: Duration = Duration::from_secs(300);
const ME: &str = "batch-me";
const OTHER: &str = "batch-other";

/// ShedLock's own DDL for MySQL, in a case-insensitive collation.
const SHEDLOCK_DDL: &str = "(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, \
    locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), locked_by VARCHAR(255) NOT NULL, \
    PRIMARY KEY (name)) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci";

/// How a table is made.
#[derive(Clone, Copy, Debug)]
enum Made {
    /// By `ensure_schema()`: `VARBINARY` name, fence and last_fire.
    EnsureSchema,
    /// By ShedLock's DDL, four columns.
    ShedLock,
    /// By ShedLock's DDL, then migrated by `ensure_schema()`.
    ShedLockMigrated,
}

impl Made {
    fn extended(self) -> bool {
        !matches!(self, Made::ShedLock)
    }
}

/// One row as a test reads it back.
#[derive(Debug, PartialEq)]
struct RowState {
    name: String,
    locked_by: String,
    fence: i64,
    last_fire: Option<NaiveDateTime>,
    lock_until: NaiveDateTime,
    locked_at: NaiveDateTime,
    held: bool,
}

async fn admin() -> Option<Conn> {
    let mut conn = common::admin().await?;
    // The ShedLock tables' TIMESTAMP columns convert through the session zone.
    conn.query_drop("SET time_zone = '+00:00'").await.unwrap();
    Some(conn)
}

/// A table made as `made`, with a provider on it.
async fn table(
    conn: &mut Conn,
    made: Made,
) -> (String, test_support::table::Cleanup, MySqlLockProvider) {
    let table = common::unique_table("batch_vs_one");
    let cleanup = common::drop_table(&table);
    if !matches!(made, Made::EnsureSchema) {
        conn.query_drop(format!("CREATE TABLE `{table}` {SHEDLOCK_DDL}"))
            .await
            .unwrap();
    }
    let provider = MySqlLockProvider::new(common::pool(2))
        .with_table(&table)
        .unwrap();
    if made.extended() {
        provider.ensure_schema().await.unwrap();
    }
    (table, cleanup, provider)
}

/// A row as it is before the requests: name, holder, lock_until, fence, last_fire.
struct Seed {
    name: &'static str,
    locked_by: &'static str,
    lock_until: NaiveDateTime,
    fence: i64,
    last_fire: Option<NaiveDateTime>,
}

async fn seed(conn: &mut Conn, table: &str, extended: bool, rows: &[Seed], at: NaiveDateTime) {
    for row in rows {
        if extended {
            conn.exec_drop(
                format!(
                    "INSERT INTO `{table}` (name, lock_until, locked_at, locked_by, fence, last_fire) \
                     VALUES (?, ?, ?, ?, ?, ?)"
                ),
                (
                    row.name,
                    row.lock_until,
                    at,
                    row.locked_by,
                    row.fence,
                    row.last_fire,
                ),
            )
            .await
            .unwrap();
        } else {
            conn.exec_drop(
                format!(
                    "INSERT INTO `{table}` (name, lock_until, locked_at, locked_by) VALUES (?, ?, ?, ?)"
                ),
                (row.name, row.lock_until, at, row.locked_by),
            )
            .await
            .unwrap();
        }
    }
}

async fn rows(conn: &mut Conn, table: &str, extended: bool) -> Vec<RowState> {
    let (fence, last_fire) = if extended {
        ("fence", "last_fire")
    } else {
        ("0", "NULL")
    };
    let rows: Vec<Row> = conn
        .query(format!(
            "SELECT CAST(name AS BINARY), locked_by, {fence}, {last_fire}, lock_until, locked_at, \
             lock_until > UTC_TIMESTAMP(3) FROM `{table}` ORDER BY CAST(name AS BINARY)"
        ))
        .await
        .unwrap();
    rows.into_iter()
        .map(|mut row| RowState {
            name: String::from_utf8(row.take::<Vec<u8>, _>(0).unwrap()).unwrap(),
            locked_by: row.take(1).unwrap(),
            fence: row.take(2).unwrap(),
            last_fire: row.take(3).unwrap(),
            lock_until: row.take(4).unwrap(),
            locked_at: row.take(5).unwrap(),
            held: row.take(6).unwrap(),
        })
        .collect()
}

/// An outcome with what depends on when it was decided set apart: the refusal's server now
/// (whole seconds) is compared within a bound instead.
#[derive(Debug, PartialEq)]
enum Seen {
    Granted {
        name: String,
        by: String,
        fence: u64,
    },
    Refused(Refusal),
}

fn seen(outcome: &AcquireOutcome) -> (Seen, Option<DateTime<Utc>>) {
    match outcome {
        AcquireOutcome::Acquired(lease) => (
            Seen::Granted {
                name: lease.name().to_owned(),
                by: lease.locked_by().to_owned(),
                fence: lease.fence(),
            },
            None,
        ),
        AcquireOutcome::Refused(refusal) => {
            let mut refusal = refusal.clone();
            let now = refusal.database_now.take();
            (Seen::Refused(refusal), now)
        }
    }
}

fn close(a: NaiveDateTime, b: NaiveDateTime) -> bool {
    (a - b).abs() <= TimeDelta::seconds(5)
}

async fn batch_decides_as_one_by_one(made: Made) {
    let Some(mut conn) = admin().await else {
        return;
    };
    let extended = made.extended();
    let (batched_table, _cleanup_a, batched) = table(&mut conn, made).await;
    let (single_table, _cleanup_b, single) = table(&mut conn, made).await;

    // Every time from the server's clock, the same values in both tables.
    let now: NaiveDateTime = conn
        .query_first("SELECT UTC_TIMESTAMP(3)")
        .await
        .unwrap()
        .unwrap();
    let at = |seconds: i64| now + TimeDelta::seconds(seconds);
    let seeds = [
        // Free, an older slot ran: granted with the next fence.
        Seed {
            name: "free",
            locked_by: OTHER,
            lock_until: at(-60),
            fence: 4,
            last_fire: Some(at(-120)),
        },
        Seed {
            name: "free-unslotted",
            locked_by: OTHER,
            lock_until: at(-60),
            fence: 2,
            last_fire: None,
        },
        // A fence below zero (written by hand) starts again at 1.
        Seed {
            name: "free-negative-fence",
            locked_by: OTHER,
            lock_until: at(-60),
            fence: -3,
            last_fire: None,
        },
        Seed {
            name: "held",
            locked_by: OTHER,
            lock_until: at(300),
            fence: 7,
            last_fire: Some(at(-5)),
        },
        Seed {
            name: "held-slot-ran",
            locked_by: OTHER,
            lock_until: at(300),
            fence: 7,
            last_fire: Some(at(-1)),
        },
        Seed {
            name: "held-by-me",
            locked_by: ME,
            lock_until: at(300),
            fence: 3,
            last_fire: Some(at(-30)),
        },
        Seed {
            name: "ran",
            locked_by: OTHER,
            lock_until: at(-10),
            fence: 5,
            last_fire: Some(at(-1)),
        },
        Seed {
            name: "later-ran",
            locked_by: OTHER,
            lock_until: at(-10),
            fence: 5,
            last_fire: Some(at(4)),
        },
        Seed {
            name: "free-future",
            locked_by: OTHER,
            lock_until: at(-60),
            fence: 1,
            last_fire: None,
        },
        Seed {
            name: "free-late",
            locked_by: OTHER,
            lock_until: at(-60),
            fence: 1,
            last_fire: None,
        },
        Seed {
            name: "held-late",
            locked_by: OTHER,
            lock_until: at(300),
            fence: 1,
            last_fire: None,
        },
        // Found under a case-insensitive collation for `collision`: another name's row.
        Seed {
            name: "Collision",
            locked_by: OTHER,
            lock_until: at(-60),
            fence: 1,
            last_fire: None,
        },
    ];
    seed(&mut conn, &batched_table, extended, &seeds, at(-200)).await;
    seed(&mut conn, &single_table, extended, &seeds, at(-200)).await;

    let slot = |seconds: i64| Some(FireSlot::new(at(seconds).and_utc()));
    let ask = |name: &str, slot: Option<FireSlot>, give_up_at: Option<i64>| LockRequest {
        give_up_at: give_up_at.map(|s| at(s).and_utc()),
        ..testkit::request(&Arc::from(name), ME, LONG, slot)
    };
    let mut requests = vec![
        ask("free", slot(-1), None),
        ask("free-unslotted", None, None),
        ask("free-negative-fence", slot(-1), None),
        ask("held", slot(-1), None),
        ask("held-slot-ran", slot(-1), None),
        ask("held-by-me", slot(-1), None),
        ask("ran", slot(-1), None),
        ask("later-ran", slot(-1), None),
        ask("free-future", slot(3600), None),
        ask("free-late", slot(-1), Some(-10)),
        ask("held-late", None, Some(-10)),
        ask("new", slot(-1), None),
        ask("new-unslotted", None, Some(60)),
        ask("new-future", slot(3600), None),
        ask("new-late", slot(-1), Some(-10)),
        ask("collision", None, None),
    ];
    // Another instance's request in the same batch: its own id in the decision.
    requests.push(LockRequest {
        locked_by: OTHER.into(),
        ..ask("held-by-other-asking", None, None)
    });

    let outcomes = batched.acquire_many(&requests).await.expect("acquire_many");
    assert_eq!(outcomes.len(), requests.len());
    // One by one, in the batch's order (names), each alone.
    let mut order: Vec<usize> = (0..requests.len()).collect();
    order.sort_by(|&a, &b| requests[a].name.cmp(&requests[b].name));
    let mut alone = vec![None; requests.len()];
    for at in order {
        alone[at] = Some(single.acquire(&requests[at]).await.expect("acquire"));
    }

    for (request, (batch, alone)) in requests.iter().zip(outcomes.iter().zip(alone)) {
        let alone = alone.unwrap();
        let (batch_seen, batch_now) = seen(batch);
        let (alone_seen, alone_now) = seen(&alone);
        assert_eq!(
            batch_seen, alone_seen,
            "{made:?}: `{}` decided otherwise in a batch than alone",
            request.name
        );
        match (batch_now, alone_now) {
            (None, None) => {}
            (Some(a), Some(b)) => assert!(
                (a - b).abs() <= TimeDelta::seconds(5),
                "{made:?}: `{}`: server now {a} in the batch, {b} alone",
                request.name
            ),
            other => panic!("{made:?}: `{}`: server now {other:?}", request.name),
        }
    }
    // The cases this test is about, so that a change in the seeds cannot make it vacuous.
    let reasons: Vec<String> = outcomes
        .iter()
        .map(|o| match o {
            AcquireOutcome::Acquired(lease) => format!("granted {}", lease.fence()),
            AcquireOutcome::Refused(r) => format!("{:?}", r.reason),
        })
        .collect();
    if extended {
        for reason in [
            "granted 5",
            "granted 1",
            "Held",
            "SlotAlreadyRun",
            "SlotInFuture",
            "TooLate",
        ] {
            assert!(
                reasons.iter().any(|r| r == reason),
                "{made:?}: no {reason} in {reasons:?}"
            );
        }
    }
    if !matches!(made, Made::EnsureSchema) {
        let collision = requests
            .iter()
            .position(|r| &*r.name == "collision")
            .unwrap();
        assert_eq!(
            reasons[collision], "Unknown",
            "{made:?}: another name's row"
        );
    }

    // The rows left behind: the same, to the times each wrote from its own clock.
    let batched_rows = rows(&mut conn, &batched_table, extended).await;
    let single_rows = rows(&mut conn, &single_table, extended).await;
    assert_eq!(batched_rows.len(), single_rows.len(), "{made:?}: rows");
    for (a, b) in batched_rows.iter().zip(&single_rows) {
        let untouched = seeds.iter().any(|s| s.name == a.name)
            && requests
                .iter()
                .zip(&outcomes)
                .all(|(r, o)| *r.name != *a.name || matches!(o, AcquireOutcome::Refused(_)));
        if untouched {
            assert_eq!(a, b, "{made:?}: a refused row must be left as it was");
        } else {
            assert_eq!(
                (&a.name, &a.locked_by, a.fence, a.last_fire, a.held),
                (&b.name, &b.locked_by, b.fence, b.last_fire, b.held),
                "{made:?}: a written row"
            );
            assert!(close(a.lock_until, b.lock_until) && close(a.locked_at, b.locked_at));
            // A lease runs its full length from the grant; a refused new row is written free.
            assert_eq!(
                a.lock_until - a.locked_at,
                b.lock_until - b.locked_at,
                "{a:?} {b:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_decides_as_one_by_one_on_the_provider_table() {
    batch_decides_as_one_by_one(Made::EnsureSchema).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_decides_as_one_by_one_on_a_shedlock_table() {
    batch_decides_as_one_by_one(Made::ShedLock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_decides_as_one_by_one_on_a_migrated_shedlock_table() {
    batch_decides_as_one_by_one(Made::ShedLockMigrated).await;
}

/// A release batch releases exactly what each release alone would: the lease's own row, not
/// another holder's, not a stale fence's, and nothing for a missing row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_batch_releases_as_one_by_one() {
    let Some(mut conn) = admin().await else {
        return;
    };
    for made in [Made::EnsureSchema, Made::ShedLock] {
        let (table, _cleanup, provider) = table(&mut conn, made).await;
        let names = ["a-mine", "b-taken", "c-mine-too", "d-missing"];
        let mut leases = Vec::new();
        for name in names {
            let request = testkit::request(&Arc::from(name), ME, LONG, None);
            let AcquireOutcome::Acquired(lease) = provider.acquire(&request).await.unwrap() else {
                panic!("set-up acquire refused");
            };
            leases.push((lease, Duration::ZERO));
        }
        // b-taken: another holder now; d-missing: deleted.
        conn.query_drop(format!(
            "UPDATE `{table}` SET locked_by = '{OTHER}' WHERE name = 'b-taken'"
        ))
        .await
        .unwrap();
        conn.query_drop(format!("DELETE FROM `{table}` WHERE name = 'd-missing'"))
            .await
            .unwrap();
        // c-mine-too with a lock_at_least_for: released to its end, not to now.
        leases[2].1 = Duration::from_secs(120);
        let released = provider.release_many(&leases).await.unwrap();
        assert_eq!(released, [true, false, true, false], "{made:?}");
        let after = rows(&mut conn, &table, made.extended()).await;
        let state = |name: &str| after.iter().find(|r| r.name == name).unwrap();
        assert!(!state("a-mine").held, "{made:?}");
        assert!(state("b-taken").held, "{made:?}: another holder's row");
        let c = state("c-mine-too");
        assert_eq!(
            c.lock_until - c.locked_at,
            TimeDelta::seconds(120),
            "{made:?}: lock_at_least_for"
        );
        assert!(after.iter().all(|r| r.name != "d-missing"), "{made:?}");
    }
}

/// A batch whose every request loses writes nothing, as a losing acquire alone writes nothing:
/// no row updated, by the server's own count for the provider's session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_losing_batch_writes_nothing() {
    let Some(mut conn) = admin().await else {
        return;
    };
    let table = common::unique_table("batch_losing");
    let _cleanup = common::drop_table(&table);
    // One connection: the provider's session is the one counted.
    let pool = common::pool(1);
    let provider = MySqlLockProvider::new(pool.clone())
        .with_table(&table)
        .unwrap();
    provider.ensure_schema().await.unwrap();
    let names: Vec<Arc<str>> = (0..20)
        .map(|i| Arc::from(format!("losing-{i:02}")))
        .collect();
    let holder: Vec<LockRequest> = names
        .iter()
        .map(|name| testkit::request(name, OTHER, LONG, None))
        .collect();
    let updates = || async {
        let mut conn = pool.get_conn().await.unwrap();
        let (_, n): (String, u64) = conn
            .query_first("SHOW SESSION STATUS LIKE 'Handler_update'")
            .await
            .unwrap()
            .unwrap();
        n
    };
    // The count is the one to read: the winning batch's grants are updates.
    let before = updates().await;
    let held = provider.acquire_many(&holder).await.unwrap();
    assert!(
        held.iter()
            .all(|o| matches!(o, AcquireOutcome::Acquired(_)))
    );
    assert!(
        updates().await - before >= 20,
        "the grants were not counted"
    );
    let losers: Vec<LockRequest> = names
        .iter()
        .map(|name| testkit::request(name, ME, LONG, None))
        .collect();
    let before = updates().await;
    let outcomes = provider.acquire_many(&losers).await.unwrap();
    let after = updates().await;
    assert!(
        outcomes
            .iter()
            .all(|o| matches!(o, AcquireOutcome::Refused(_)))
    );
    assert_eq!(after - before, 0, "a losing batch updated rows");
    let rows_after = rows(&mut conn, &table, true).await;
    assert!(
        rows_after
            .iter()
            .all(|r| r.locked_by == OTHER && r.fence == 1)
    );
}

/// A batch whose last statement fails (a trigger refuses the grants' `UPDATE`, after the
/// `SELECT` has decided them) is an error, not grants: nothing of it stays, and the pool's
/// only connection is back in autocommit for the next call.
#[tokio::test]
async fn a_batch_failing_at_its_last_statement_is_an_error_and_leaves_nothing() {
    let table = common::unique_table("lockmy_batchfail");
    let _drop = common::drop_table(&table);
    let Some(mut admin) = admin().await else {
        return;
    };
    let provider = MySqlLockProvider::new(common::pool(1))
        .with_table(&table)
        .expect("table name");
    provider.ensure_schema().await.expect("ensure_schema");
    admin
        .query_drop(format!(
            "CREATE TRIGGER `{table}_refuse` BEFORE UPDATE ON `{table}` FOR EACH ROW \
             IF NEW.locked_by = 'refused' THEN \
             SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by the test'; END IF"
        ))
        .await
        .expect("a trigger that refuses");
    let requests: Vec<LockRequest> = ["a", "b"]
        .iter()
        .map(|name| testkit::request(&Arc::from(*name), "refused", LONG, None))
        .collect();
    let error = provider
        .acquire_many(&requests)
        .await
        .expect_err("the grants' UPDATE fails");
    assert!(
        format!("{error:?}").contains("refused by the test"),
        "{error:?}"
    );
    let names: Vec<String> = admin
        .query(format!("SELECT CAST(name AS CHAR) FROM `{table}`"))
        .await
        .expect("rows");
    assert!(
        names.is_empty(),
        "the batch's new rows were rolled back: {names:?}"
    );
    let lease = provider
        .acquire(&testkit::request(&Arc::from("c"), ME, LONG, None))
        .await
        .expect("the next acquire");
    assert!(matches!(lease, AcquireOutcome::Acquired(_)), "{lease:?}");
    let names: Vec<String> = admin
        .query(format!("SELECT CAST(name AS CHAR) FROM `{table}`"))
        .await
        .expect("rows");
    assert_eq!(names, ["c"], "committed: another connection reads it");
    drop(admin);
    let _ = provider.pool().clone().disconnect().await;
}

/// A batch locks its own rows only, also on a table of a few rows whose statistics make a
/// scan look cheaper than the key: another transaction's lock on a row outside the batch
/// does not hold it up. (MariaDB scanned such a table with a block join and locked every
/// row; two instances' batches then deadlocked, `fault-tests` `clock_skew`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_on_a_small_table_waits_for_no_other_row() {
    let Some(mut conn) = admin().await else {
        return;
    };
    let (table, _cleanup, provider) = table(&mut conn, Made::EnsureSchema).await;
    let slot = Some(FireSlot::new(Utc::now() - TimeDelta::seconds(1)));
    let names: Vec<Arc<str>> = ["a-held-elsewhere", "b", "c"].map(Arc::from).to_vec();
    let requests: Vec<LockRequest> = names
        .iter()
        .map(|name| testkit::request(name, ME, Duration::from_secs(30), slot))
        .collect();
    // The three rows exist (and are free): the table is as small as a service's first hour.
    for outcome in provider.acquire_many(&requests).await.unwrap() {
        let AcquireOutcome::Acquired(lease) = outcome else {
            panic!("a free row was refused: {outcome:?}");
        };
        provider.release(&lease, Duration::ZERO).await.unwrap();
    }
    // Another transaction holds the first row.
    let mut other = common::admin().await.expect("a second connection");
    other.query_drop("START TRANSACTION").await.unwrap();
    other
        .query_drop(format!(
            "SELECT * FROM `{table}` WHERE name = 'a-held-elsewhere' FOR UPDATE"
        ))
        .await
        .unwrap();
    // A batch of the other two, for a later slot, is decided without waiting for it.
    let later = Some(FireSlot::new(Utc::now()));
    let batch: Vec<LockRequest> = names[1..]
        .iter()
        .map(|name| testkit::request(name, ME, Duration::from_secs(30), later))
        .collect();
    let decided = tokio::time::timeout(Duration::from_secs(5), provider.acquire_many(&batch))
        .await
        .expect("the batch waited for a row it does not ask for")
        .unwrap();
    assert!(
        decided
            .iter()
            .all(|o| matches!(o, AcquireOutcome::Acquired(_))),
        "{decided:?}"
    );
    let leases: Vec<_> = decided
        .into_iter()
        .map(|o| match o {
            AcquireOutcome::Acquired(lease) => (lease, Duration::ZERO),
            AcquireOutcome::Refused(_) => unreachable!(),
        })
        .collect();
    let released = tokio::time::timeout(Duration::from_secs(5), provider.release_many(&leases))
        .await
        .expect("the release batch waited for a row it does not release")
        .unwrap();
    assert_eq!(released, [true, true]);
    other.query_drop("ROLLBACK").await.unwrap();
}
