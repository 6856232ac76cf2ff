//! The cluster store's conformance suite: one `pub async fn` per part of the contract of
//! [`ClusterStore`](crate::ClusterStore) and [`OperatorStore`](crate::OperatorStore), for the
//! tests of every provider that keeps the cluster's tables (feature `testkit`).
//!
//! ```
//! use lock_core::InMemoryLockProvider;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! lock_cluster::testkit::operations_store(&InMemoryLockProvider::new()).await;
//! # });
//! ```

mod actions;
mod counting;
mod dependents;
mod heartbeats;
mod history;
mod incidents;
mod operations;
mod pauses;
mod run_logs;
mod triggers;

pub use actions::action_log;
pub use counting::CountingProvider;
pub use dependents::{after_requests, trigger_params};
pub use heartbeats::heartbeat_of_many_jobs;
pub use history::{history_batches, run_times};
pub use incidents::{incidents, incidents_added_later};
pub use operations::operations_store;
pub use pauses::concurrent_pauses;
pub use run_logs::run_logs;
pub use triggers::trigger_hand_back;
