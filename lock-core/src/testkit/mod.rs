//! The provider conformance suite: one `pub async fn` per guarantee of [`LockProvider`].
//!
//! Every provider crate calls every function here from its own tests, against a real store.
//! Each function uses fresh, random lock names (so suites may run in parallel on one table),
//! releases every lease it takes, and panics with a message naming the broken guarantee.
//!
//! ```
//! use lock_core::{testkit, InMemoryLockProvider};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let provider = InMemoryLockProvider::new();
//! testkit::exclusion(&provider).await;
//! testkit::fence_strictly_increasing(&provider).await;
//! # });
//! ```
//!
//! Time-based checks use leases of about a second and wait a little longer than that, because
//! the provider's clock (the database server's) is the only one that counts.
//!
//! The guarantees are grouped by what they protect: `acquire` (one holder per name), `expiry`
//! (how long a lease lasts), `ownership` (owner and fence checks), `slots` (once per slot),
//! `late` (no late grant) and `operator` (listing and force-unlocking). The suite's list is
//! declared once, in `__conformance_suite!`: [`conformance_tests!`](crate::conformance_tests)
//! and [`run_all`] both expand it.
//!
//! A second group, `executor`, checks the locking executor's guarantees on the provider
//! through a [`FaultyProvider`] (lost acquire replies, keep-alive timing). Those functions take
//! the fixture shared (`Arc<dyn Fixture>`), since an executor keeps its provider; they are
//! listed in `__executor_suite!`, which `conformance_tests!` expands too.

mod acquire;
mod batch;
mod executor;
mod expiry;
mod faults;
mod late;
mod operator;
mod ownership;
mod slots;
mod support;

use crate::LockProvider;

pub use acquire::{exclusion, fuzz, independent_names, name_too_long, unsafe_name_refused};
pub use batch::{batch_concurrent_fuzz, batch_mixed_outcomes};
pub use executor::{
    cancelled_before_another_can_take_over, concurrent_call_is_not_adopted,
    finished_slot_is_not_adopted, keep_alive_counts_from_the_request,
    keep_alive_retries_a_failed_extend, late_grant_leaves_no_lease,
    lease_of_a_sibling_executor_is_kept, loser_asks_once_for_a_slot_won_ahead,
    lost_acquire_reply_is_released, lost_batched_replies_are_released,
    lost_release_is_released_at_the_next_fire, orphan_of_this_instance_is_released,
    retried_acquire_is_adopted,
};
pub use expiry::{
    at_least_hold, at_most_expiry, durations_beyond_the_cap, extend_of_expired_refused,
    extend_pushes_expiry,
};
pub use faults::{Faults, FaultyProvider};
pub use late::refuses_past_give_up_at;
pub use operator::list_and_force_unlock;
pub use ownership::{
    extend_only_by_owner, fence_strictly_increasing, release_only_by_owner,
    stale_lease_cannot_release_new_one,
};
pub use slots::{
    future_slot_refused, held_refusal_carries_last_fire, once_per_slot,
    reset_slot_repairs_a_future_last_fire, slot_refused_while_held,
};
pub use support::{lock_cycle, request, unique_name};

/// What a provider's test set-up hands to the suite: the provider itself, or the provider with
/// something that must live as long as it (a temporary directory, a container handle).
pub trait Fixture: Send + Sync {
    /// The provider under test.
    fn provider(&self) -> &dyn LockProvider;
}

impl<P: LockProvider> Fixture for P {
    fn provider(&self) -> &dyn LockProvider {
        self
    }
}

impl<D: Send + Sync, P: LockProvider> Fixture for (D, P) {
    fn provider(&self) -> &dyn LockProvider {
        &self.1
    }
}

/// Generates one `#[tokio::test]` per function of the suite, plus one running the whole suite
/// through `&dyn LockProvider`, so every provider runs every guarantee, including ones added
/// later, without keeping its own list.
///
/// The argument is an `async` expression evaluated afresh in each test, giving
/// `Option<impl Fixture>`: `None` skips the test (for a database that cannot be reached outside
/// CI; the set-up should panic instead when `CI` is set). The calling crate needs `tokio` with
/// the `macros` and `rt-multi-thread` features.
///
/// ```
/// // tests/conformance.rs of a provider crate; a database provider's set-up connects (and
/// // returns None to skip when the server is unreachable outside CI).
/// lock_core::conformance_tests!(async { Some(lock_core::InMemoryLockProvider::new()) });
/// ```
#[macro_export]
macro_rules! conformance_tests {
    ($setup:expr) => {
        $crate::__conformance_suite!(tests($setup));
        $crate::__executor_suite!(tests($setup));

        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn whole_suite_through_a_dyn_provider() {
            if let ::std::option::Option::Some(fixture) = $setup.await {
                $crate::testkit::run_all($crate::testkit::Fixture::provider(&fixture)).await;
            }
        }
    };
}

/// The suite, declared once: every function of it, in the order `run_all` runs them. Adding a
/// guarantee is one `pub async fn` in its group, its `pub use` in `testkit` and one line here.
///
/// `tests(setup)` expands to one `#[tokio::test]` per function (for `conformance_tests!`);
/// `run_all(provider)` to one awaited call per function (the body of `run_all`).
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_suite {
    ($mode:ident $arg:tt) => {
        $crate::__conformance_suite!(@$mode $arg;
            exclusion,
            independent_names,
            at_most_expiry,
            at_least_hold,
            durations_beyond_the_cap,
            release_only_by_owner,
            extend_only_by_owner,
            extend_pushes_expiry,
            extend_of_expired_refused,
            stale_lease_cannot_release_new_one,
            fence_strictly_increasing,
            once_per_slot,
            slot_refused_while_held,
            held_refusal_carries_last_fire,
            future_slot_refused,
            reset_slot_repairs_a_future_last_fire,
            refuses_past_give_up_at,
            fuzz,
            batch_mixed_outcomes,
            batch_concurrent_fuzz,
            name_too_long,
            unsafe_name_refused,
            list_and_force_unlock,
        );
    };
    (@tests ($setup:expr); $($test:ident),* $(,)?) => {$(
        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            if let ::std::option::Option::Some(fixture) = $setup.await {
                $crate::testkit::$test($crate::testkit::Fixture::provider(&fixture)).await;
            }
        }
    )*};
    (@run_all ($provider:expr); $($test:ident),* $(,)?) => {$(
        $crate::testkit::$test($provider).await;
    )*};
}

/// The executor's guarantees on a provider, declared once: each function takes the fixture
/// shared. `tests(setup)` expands to one `#[tokio::test]` per function.
#[doc(hidden)]
#[macro_export]
macro_rules! __executor_suite {
    ($mode:ident $arg:tt) => {
        $crate::__executor_suite!(@$mode $arg;
            lost_acquire_reply_is_released,
            lost_batched_replies_are_released,
            retried_acquire_is_adopted,
            finished_slot_is_not_adopted,
            concurrent_call_is_not_adopted,
            keep_alive_counts_from_the_request,
            keep_alive_retries_a_failed_extend,
            cancelled_before_another_can_take_over,
            late_grant_leaves_no_lease,
            orphan_of_this_instance_is_released,
            lost_release_is_released_at_the_next_fire,
            lease_of_a_sibling_executor_is_kept,
            loser_asks_once_for_a_slot_won_ahead,
        );
    };
    (@tests ($setup:expr); $($test:ident),* $(,)?) => {$(
        #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $test() {
            if let ::std::option::Option::Some(fixture) = $setup.await {
                $crate::testkit::$test(::std::sync::Arc::new(fixture)).await;
            }
        }
    )*};
}

/// Runs every function of the suite, one after another.
pub async fn run_all(provider: &dyn LockProvider) {
    crate::__conformance_suite!(run_all(provider));
}
