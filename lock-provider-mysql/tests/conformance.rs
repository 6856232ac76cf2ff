//! Every function of `lock_core::testkit` against the MySQL/MariaDB server.

mod common;

use lock_core::testkit;

macro_rules! conformance {
    ($($test:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            let Some(provider) = common::provider().await else { return };
            testkit::$test(&provider).await;
        }
    )*};
}

conformance!(
    exclusion,
    independent_names,
    at_most_expiry,
    at_least_hold,
    release_only_by_owner,
    extend_only_by_owner,
    extend_pushes_expiry,
    extend_of_expired_refused,
    stale_lease_cannot_release_new_one,
    fence_strictly_increasing,
    once_per_slot,
    slot_refused_while_held,
    fuzz,
    name_too_long,
    list_and_force_unlock,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whole_suite_through_a_shared_dyn_provider() {
    let Some(provider) = common::provider().await else {
        return;
    };
    let provider: std::sync::Arc<dyn lock_core::LockProvider> = std::sync::Arc::new(provider);
    testkit::run_all(&provider).await;
}
