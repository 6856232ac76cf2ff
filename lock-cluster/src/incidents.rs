//! [`Incident`]: what the scheduler's alert rules record of an incident, so that each is told
//! once across the cluster, whichever instance evaluates the rules.
//!
//! Decisions, and why:
//! - **One row per incident key**, open (`resolved_at` NULL) from its firing notice to its
//!   resolved one. Opening inserts the row, or reopens a resolved row of the same key; of
//!   concurrent openers exactly one is told it opened it, and of concurrent resolvers exactly
//!   one that it resolved it. That answer is what decides who sends the notice, so two
//!   evaluations that overlap (a lease that lapsed) still send each notice once.
//! - **The row is written before the notice is sent.** A notifier that fails after its
//!   retries is logged; the incident stays recorded and is not sent again. A process that dies
//!   between the write and the send loses that one notice: "at most once" was chosen over
//!   "at least once", because a receiver pages a person for every copy.
//! - **Resolved rows age out** with the history ([`Expired::Incidents`](crate::Expired)), so a
//!   cluster whose instances come and go (each with an `instance_gone` key of its own) keeps a
//!   bounded table.

use chrono::{DateTime, Utc};

/// One open incident as the cluster's tables keep it.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use lock_cluster::ClusterProvider;
/// use lock_core::InMemoryLockProvider;
///
/// let provider = InMemoryLockProvider::new();
/// let store = provider.cluster().expect("the in-memory provider keeps incidents");
/// assert!(store.open_incident("failed_in_a_row/billing", "billing failed 3 times").await?);
/// assert!(!store.open_incident("failed_in_a_row/billing", "again").await?, "open already");
/// let open = store.open_incidents().await?;
/// assert_eq!(open[0].key, "failed_in_a_row/billing");
/// assert_eq!(open[0].summary, "billing failed 3 times");
/// assert!(store.resolve_incident("failed_in_a_row/billing").await?);
/// assert!(store.open_incidents().await?.is_empty());
/// # Ok::<(), lock_core::LockError>(()) }).unwrap();
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incident {
    /// The incident's identity (`failed_in_a_row/billing`, `instance_gone/web-2`), at most
    /// [`MAX_TEXT_LEN`](crate::MAX_TEXT_LEN) characters.
    pub key: String,
    /// The summary of its firing notice, cut to [`MAX_DETAIL_LEN`](crate::MAX_DETAIL_LEN)
    /// bytes.
    pub summary: String,
    /// When it was opened (the store's clock).
    pub opened_at: DateTime<Utc>,
}
