//! The contract of the alert rules' incidents in a [`Cluster`](crate::Cluster): each key open
//! once, opened and resolved by exactly one of concurrent callers, reopened after its
//! resolution, keys compared byte for byte, and resolved rows aged out in batches.

use chrono::TimeDelta;
use futures_util::future::join_all;

use crate::{ClusterProvider, Expired, MAX_DETAIL_LEN, MAX_TEXT_LEN, truncate};
use lock_core::FireSlot;

/// Concurrent callers in the races below: more than the instances of a typical cluster.
const CONCURRENT: usize = 8;

/// The incidents of the provider's store, on an empty incidents table:
/// [`open_incident`], [`open_incidents`], [`resolve_incident`] and [`Expired::Incidents`].
///
/// [`open_incident`]: crate::ClusterStore::open_incident
/// [`open_incidents`]: crate::ClusterStore::open_incidents
/// [`resolve_incident`]: crate::ClusterStore::resolve_incident
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// lock_cluster::testkit::incidents(&lock_core::InMemoryLockProvider::new()).await;
/// # });
/// ```
pub async fn incidents(provider: &dyn ClusterProvider) {
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    let db_now = || async { provider.database_time().await.expect("database time") };
    let started = FireSlot::new(db_now().await).instant();
    let slack = TimeDelta::seconds(5);
    let open_keys = || async {
        store
            .open_incidents()
            .await
            .expect("open incidents")
            .into_iter()
            .map(|i| i.key)
            .collect::<Vec<_>>()
    };

    assert!(
        open_keys().await.is_empty(),
        "the contract starts on an empty table"
    );
    let failing = "failed_in_a_row/billing";
    assert!(
        store
            .open_incident(failing, "billing failed 3 times")
            .await
            .expect("open")
    );
    assert!(
        !store
            .open_incident(failing, "billing failed 4 times")
            .await
            .expect("open"),
        "an open incident is not opened again"
    );
    let open = store.open_incidents().await.expect("open incidents");
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(
        open[0].summary, "billing failed 3 times",
        "the first summary stays"
    );
    assert!(
        (open[0].opened_at - started).abs() < slack,
        "opened on the store's clock ({started}): {open:?}"
    );

    // Keys byte for byte (MySQL's default collation would make these one), of the longest
    // length, in characters of two bytes; the summary cut to its column.
    let upper = "missed_slot/Report";
    let lower = "missed_slot/report";
    let longest = "é".repeat(MAX_TEXT_LEN);
    let long_summary = "ü".repeat(MAX_DETAIL_LEN);
    for key in [upper, lower, longest.as_str()] {
        assert!(
            store.open_incident(key, &long_summary).await.expect("open"),
            "{key:?} is an incident of its own"
        );
    }
    let open = store.open_incidents().await.expect("open incidents");
    assert_eq!(open.len(), 4, "{open:?}");
    assert!(
        open.iter().any(|i| i.key == longest),
        "the longest key read back whole"
    );
    let cut = truncate(&long_summary, MAX_DETAIL_LEN);
    assert!(
        open.iter()
            .filter(|i| i.key != failing)
            .all(|i| i.summary == cut),
        "the summary cut to its column at a character boundary"
    );
    assert!(
        open.windows(2).all(|w| w[0].opened_at <= w[1].opened_at),
        "oldest first: {open:?}"
    );
    assert_eq!(open[0].key, failing, "the oldest first");

    // Races: of concurrent openers and of concurrent resolvers, exactly one wins.
    let gone = "instance_gone/web-2";
    let opened = join_all(
        (0..CONCURRENT).map(|i| store.open_incident(gone, if i == 0 { "a" } else { "b" })),
    )
    .await;
    let winners = opened
        .into_iter()
        .map(|r| r.expect("open"))
        .filter(|&won| won)
        .count();
    assert_eq!(
        winners, 1,
        "{CONCURRENT} concurrent opens of {gone:?}: exactly one opens it"
    );
    let resolved = join_all((0..CONCURRENT).map(|_| store.resolve_incident(gone))).await;
    let winners = resolved
        .into_iter()
        .map(|r| r.expect("resolve"))
        .filter(|&won| won)
        .count();
    assert_eq!(
        winners, 1,
        "{CONCURRENT} concurrent resolves of {gone:?}: exactly one resolves it"
    );
    assert!(
        !store.resolve_incident(gone).await.expect("resolve"),
        "resolved already"
    );
    assert!(
        !store
            .resolve_incident("never/opened")
            .await
            .expect("resolve")
    );

    // Resolved, then reopened: a new incident of the same key, with its own summary and time.
    assert!(store.resolve_incident(failing).await.expect("resolve"));
    assert!(!open_keys().await.contains(&failing.to_owned()));
    assert!(
        store
            .open_incident(failing, "billing failed again")
            .await
            .expect("reopen")
    );
    let open = store.open_incidents().await.expect("open incidents");
    let reopened = open.iter().find(|i| i.key == failing).expect("reopened");
    assert_eq!(reopened.summary, "billing failed again");
    let first = open.iter().map(|i| i.opened_at).min().expect("open");
    assert!(
        reopened.opened_at >= first,
        "reopened at its reopening: {reopened:?}"
    );

    // Housekeeping: resolved incidents older than the cut-off, at most `limit` per call; open
    // ones stay whatever their age.
    for key in [upper, lower] {
        assert!(store.resolve_incident(key).await.expect("resolve"));
    }
    let future = db_now().await + TimeDelta::seconds(60);
    let delete = |before, limit| store.delete_expired(Expired::Incidents, before, limit);
    assert_eq!(delete(started - slack, 10).await.expect("delete"), 0);
    assert_eq!(delete(future, 2).await.expect("delete"), 2);
    assert_eq!(
        delete(future, 2).await.expect("delete"),
        1,
        "{gone:?}, {upper:?}, {lower:?}"
    );
    assert_eq!(delete(future, 2).await.expect("delete"), 0);
    let mut left = open_keys().await;
    left.sort();
    let mut expected = vec![failing.to_owned(), longest.clone()];
    expected.sort();
    assert_eq!(left, expected, "open incidents are never deleted");
    assert!(
        store
            .open_incident(gone, "web-2 gone again")
            .await
            .expect("open after delete")
    );
}

/// A provider whose operations tables predate the incidents (the test dropped the table
/// `quoted_incidents`, as its DDL quotes it): the scheduler's `check` still passes, reading
/// the incidents reports the missing table with its DDL, and `ensure_schema` (the provider's,
/// run by `ensure_schema` here) creates it so that incidents open again.
pub async fn incidents_added_later<F, Fut>(
    provider: &dyn ClusterProvider,
    quoted_incidents: &str,
    ensure_schema: F,
) where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<(), lock_core::LockError>>,
{
    let store = provider
        .cluster()
        .expect("the provider keeps operations tables");
    store
        .check()
        .await
        .expect("the scheduler's tables are all there");
    match store.open_incidents().await {
        Err(lock_core::LockError::TableMissing { ddl, .. }) => assert!(
            ddl.contains(&format!("CREATE TABLE IF NOT EXISTS {quoted_incidents}")),
            "{ddl}"
        ),
        other => panic!("expected TableMissing, got {other:?}"),
    }
    ensure_schema().await.expect("ensure_schema again");
    assert!(
        store
            .open_incident("failed_in_a_row/report", "report failed 3 times")
            .await
            .expect("open")
    );
    assert_eq!(store.open_incidents().await.expect("read").len(), 1);
}
