//! Every operation of an opened provider within a deadline ([`OpenOptions::operation_timeout`]):
//! a database that accepted the connection and then stopped answering (a frozen server, a
//! lost link the kernel has not noticed) fails the operation after the deadline instead of
//! holding its caller (`lockctl list`, a dashboard request) for minutes.
//!
//! Decisions, and why:
//! - A wrapper around the provider, not a setting of each driver: tokio-postgres, mysql_async
//!   and sqlx have no per-statement client-side timeout, and a server-side one
//!   (`statement_timeout`) is never applied by a server that does not run.
//! - Each method of the provider traits is forwarded, defaults included, so that a provider's
//!   own batched or index-only implementation is the one that runs under the deadline.
//! - An operation cut short may still have been applied by the database (a pause written, a
//!   lock released): the error says the answer did not come, not that nothing happened.
//!
//! [`OpenOptions::operation_timeout`]: crate::OpenOptions::operation_timeout

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use lock_cluster::{
    ActionRecord, Cluster, ClusterProvider, ClusterStore, ControlRequest, Expired, Heartbeat,
    OperatorStore, RegistryRow, RunEnd, RunRecord, RunStart,
};
use lock_core::{AcquireOutcome, Lease, LockError, LockProvider, LockRecord, LockRequest, Params};

/// A connect, or the answer of one operation, did not come within its deadline.
#[derive(Debug, thiserror::Error)]
#[error("timed out: {waited_for} within {}", seconds(*.after))]
pub(crate) struct TimedOut {
    waited_for: String,
    after: Duration,
}

impl TimedOut {
    pub(crate) fn connecting(after: Duration) -> Self {
        TimedOut {
            waited_for: "no connection and handshake".to_owned(),
            after,
        }
    }

    /// `server`: where the database is, as [`LockDatabase`](crate::LockDatabase) says it.
    fn answering(server: &str, after: Duration) -> Self {
        TimedOut {
            waited_for: format!("no answer from {server}"),
            after,
        }
    }
}

/// `10 s`, `2.5 s`, `500 ms`.
pub(crate) fn seconds(duration: Duration) -> String {
    if duration < Duration::from_secs(1) {
        format!("{} ms", duration.as_millis())
    } else {
        format!("{} s", duration.as_secs_f64())
    }
}

/// A provider whose every operation fails with [`TimedOut`] when its answer takes longer than
/// `limit`.
pub(crate) struct Deadline {
    inner: Arc<dyn ClusterProvider>,
    limit: Duration,
    /// The server or file, as [`LockDatabase`](crate::LockDatabase) displays it.
    server: String,
}

impl Deadline {
    pub(crate) fn new(inner: Arc<dyn ClusterProvider>, limit: Duration, server: String) -> Self {
        Deadline {
            inner,
            limit,
            server,
        }
    }

    async fn within<T>(
        &self,
        operation: &'static str,
        lock: &str,
        answer: impl Future<Output = Result<T, LockError>>,
    ) -> Result<T, LockError> {
        match tokio::time::timeout(self.limit, answer).await {
            Ok(answer) => answer,
            Err(_) => Err(LockError::provider(
                operation,
                lock,
                self.inner.describe(),
                TimedOut::answering(&self.server, self.limit),
            )),
        }
    }

    /// The inner provider's operations tables; only reached through [`ClusterProvider::cluster`],
    /// which answers `None` when there are none.
    fn store(&self) -> Result<&dyn Cluster, LockError> {
        self.inner.cluster().ok_or_else(|| {
            LockError::InvalidConfiguration(format!(
                "{} has no operations tables",
                self.inner.describe()
            ))
        })
    }
}

#[async_trait]
impl LockProvider for Deadline {
    async fn acquire(&self, request: &LockRequest) -> Result<AcquireOutcome, LockError> {
        self.within("acquire", &request.name, self.inner.acquire(request))
            .await
    }

    async fn acquire_many(
        &self,
        requests: &[LockRequest],
    ) -> Result<Vec<AcquireOutcome>, LockError> {
        self.within("acquire", "", self.inner.acquire_many(requests))
            .await
    }

    async fn acquire_many_each(
        &self,
        requests: &[LockRequest],
        decided: &(dyn Fn(usize, AcquireOutcome) + Send + Sync),
    ) -> Result<(), LockError> {
        self.within(
            "acquire",
            "",
            self.inner.acquire_many_each(requests, decided),
        )
        .await
    }

    async fn release_many(&self, leases: &[(Lease, Duration)]) -> Result<Vec<bool>, LockError> {
        self.within("release", "", self.inner.release_many(leases))
            .await
    }

    fn max_batch(&self) -> usize {
        self.inner.max_batch()
    }

    async fn extend(&self, lease: &Lease, lock_at_most_for: Duration) -> Result<bool, LockError> {
        self.within(
            "extend",
            lease.name(),
            self.inner.extend(lease, lock_at_most_for),
        )
        .await
    }

    async fn release(&self, lease: &Lease, lock_at_least_for: Duration) -> Result<bool, LockError> {
        self.within(
            "release",
            lease.name(),
            self.inner.release(lease, lock_at_least_for),
        )
        .await
    }

    async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
        self.within("list", "", self.inner.list_locks()).await
    }

    async fn read_lock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.within("read", name, self.inner.read_lock(name)).await
    }

    async fn force_unlock(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.within("unlock", name, self.inner.force_unlock(name))
            .await
    }

    async fn reset_slot(&self, name: &str) -> Result<Option<LockRecord>, LockError> {
        self.within("reset slot", name, self.inner.reset_slot(name))
            .await
    }

    async fn database_time(&self) -> Result<DateTime<Utc>, LockError> {
        self.within("database time", "", self.inner.database_time())
            .await
    }

    async fn check_once_per_slot(&self) -> Result<(), LockError> {
        self.within("check", "", self.inner.check_once_per_slot())
            .await
    }

    async fn confirm_grant(&self, lease: &Lease) -> Result<(), LockError> {
        self.within(
            "confirm grant",
            lease.name(),
            self.inner.confirm_grant(lease),
        )
        .await
    }

    async fn names_sharing_a_row(
        &self,
        names: &[&str],
    ) -> Result<Vec<(String, String)>, LockError> {
        self.within("check names", "", self.inner.names_sharing_a_row(names))
            .await
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

impl ClusterProvider for Deadline {
    fn cluster(&self) -> Option<&dyn Cluster> {
        self.inner.cluster().map(|_| self as &dyn Cluster)
    }
}

#[async_trait]
impl ClusterStore for Deadline {
    fn tables(&self) -> String {
        self.store().map(|s| s.tables()).unwrap_or_default()
    }

    async fn check(&self) -> Result<(), LockError> {
        self.within("check", "", self.store()?.check()).await
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        self.within("heartbeat", "", self.store()?.heartbeat(beat))
            .await
    }

    async fn heartbeat_changes(&self, beat: &Heartbeat) -> Result<Vec<ControlRequest>, LockError> {
        self.within("heartbeat", "", self.store()?.heartbeat_changes(beat))
            .await
    }

    async fn heartbeat_changes_and_instances(
        &self,
        beat: &Heartbeat,
    ) -> Result<(Vec<ControlRequest>, Vec<RegistryRow>), LockError> {
        self.within(
            "heartbeat",
            "",
            self.store()?.heartbeat_changes_and_instances(beat),
        )
        .await
    }

    async fn claim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        self.within(
            "claim trigger",
            "",
            self.store()?.claim_trigger(id, instance_id),
        )
        .await
    }

    async fn unclaim_trigger(&self, id: i64, instance_id: &str) -> Result<bool, LockError> {
        self.within(
            "unclaim trigger",
            "",
            self.store()?.unclaim_trigger(id, instance_id),
        )
        .await
    }

    async fn run_started(&self, run: &RunStart) -> Result<i64, LockError> {
        self.within("record run", "", self.store()?.run_started(run))
            .await
    }

    async fn run_ended(&self, end: &RunEnd) -> Result<(), LockError> {
        self.within("record run", "", self.store()?.run_ended(end))
            .await
    }

    async fn runs_started(&self, runs: &[RunStart]) -> Result<Vec<i64>, LockError> {
        self.within("record runs", "", self.store()?.runs_started(runs))
            .await
    }

    async fn runs_ended(&self, ends: &[RunEnd]) -> Result<(), LockError> {
        self.within("record runs", "", self.store()?.runs_ended(ends))
            .await
    }

    async fn runs_started_at(
        &self,
        runs: &[RunStart],
        at: &[DateTime<Utc>],
    ) -> Result<Vec<i64>, LockError> {
        self.within("record runs", "", self.store()?.runs_started_at(runs, at))
            .await
    }

    async fn runs_ended_at(&self, ends: &[RunEnd], at: &[DateTime<Utc>]) -> Result<(), LockError> {
        self.within("record runs", "", self.store()?.runs_ended_at(ends, at))
            .await
    }

    fn takes_run_times(&self) -> bool {
        self.store().is_ok_and(|s| s.takes_run_times())
    }

    fn max_history_batch(&self) -> usize {
        self.store().map(|s| s.max_history_batch()).unwrap_or(1)
    }

    async fn instances(&self) -> Result<Vec<RegistryRow>, LockError> {
        self.within("list instances", "", self.store()?.instances())
            .await
    }

    async fn request_after(
        &self,
        child: &str,
        slot: DateTime<Utc>,
        parent: &str,
    ) -> Result<i64, LockError> {
        self.within(
            "request after",
            child,
            self.store()?.request_after(child, slot, parent),
        )
        .await
    }

    async fn after_requests(
        &self,
        child: &str,
        slot: DateTime<Utc>,
    ) -> Result<Vec<String>, LockError> {
        self.within(
            "read after requests",
            child,
            self.store()?.after_requests(child, slot),
        )
        .await
    }

    async fn delete_after(&self, child: &str, through: DateTime<Utc>) -> Result<u64, LockError> {
        self.within(
            "delete after requests",
            child,
            self.store()?.delete_after(child, through),
        )
        .await
    }

    async fn open_incidents(&self) -> Result<Vec<lock_cluster::Incident>, LockError> {
        self.within("incidents", "", self.store()?.open_incidents())
            .await
    }

    async fn open_incident(&self, key: &str, summary: &str) -> Result<bool, LockError> {
        self.within("incidents", key, self.store()?.open_incident(key, summary))
            .await
    }

    async fn resolve_incident(&self, key: &str) -> Result<bool, LockError> {
        self.within("incidents", key, self.store()?.resolve_incident(key))
            .await
    }

    async fn delete_expired(
        &self,
        what: Expired,
        before: DateTime<Utc>,
        limit: u32,
    ) -> Result<u64, LockError> {
        self.within(
            "delete expired",
            "",
            self.store()?.delete_expired(what, before, limit),
        )
        .await
    }
}

#[async_trait]
impl OperatorStore for Deadline {
    async fn pause(&self, job: &str, requested_by: &str) -> Result<bool, LockError> {
        self.within("pause", job, self.store()?.pause(job, requested_by))
            .await
    }

    async fn resume(&self, job: &str) -> Result<bool, LockError> {
        self.within("resume", job, self.store()?.resume(job)).await
    }

    async fn request_trigger(&self, job: &str, requested_by: &str) -> Result<i64, LockError> {
        self.within(
            "trigger",
            job,
            self.store()?.request_trigger(job, requested_by),
        )
        .await
    }

    async fn request_trigger_with_params(
        &self,
        job: &str,
        requested_by: &str,
        params: &Params,
    ) -> Result<i64, LockError> {
        self.within(
            "trigger",
            job,
            self.store()?
                .request_trigger_with_params(job, requested_by, params),
        )
        .await
    }

    async fn withdraw_trigger(&self, id: i64) -> Result<bool, LockError> {
        self.within("withdraw trigger", "", self.store()?.withdraw_trigger(id))
            .await
    }

    async fn control(&self) -> Result<Vec<ControlRequest>, LockError> {
        self.within("read control", "", self.store()?.control())
            .await
    }

    async fn registry(&self) -> Result<Vec<RegistryRow>, LockError> {
        self.within("read registry", "", self.store()?.registry())
            .await
    }

    async fn history(&self, job: &str, limit: u32) -> Result<Vec<RunRecord>, LockError> {
        self.within("read history", job, self.store()?.history(job, limit))
            .await
    }

    async fn history_page(
        &self,
        job: &str,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<RunRecord>, LockError> {
        self.within(
            "read history",
            job,
            self.store()?.history_page(job, before, limit),
        )
        .await
    }

    async fn run_logs(
        &self,
        job: &str,
        ids: std::ops::RangeInclusive<i64>,
    ) -> Result<Vec<(i64, lock_cluster::RunLog)>, LockError> {
        self.within("read run logs", job, self.store()?.run_logs(job, ids))
            .await
    }

    async fn last_runs(&self) -> Result<Vec<RunRecord>, LockError> {
        self.within("read last runs", "", self.store()?.last_runs())
            .await
    }

    async fn last_successes(&self) -> Result<Vec<(String, DateTime<Utc>)>, LockError> {
        self.within("read last successes", "", self.store()?.last_successes())
            .await
    }

    async fn record_action(&self, action: &ActionRecord) -> Result<(), LockError> {
        self.within("record action", "", self.store()?.record_action(action))
            .await
    }

    async fn actions(&self, job: &str, limit: u32) -> Result<Vec<ActionRecord>, LockError> {
        self.within("read actions", job, self.store()?.actions(job, limit))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lock_provider_sqlite::SqliteLockProvider;

    use crate::{OpenOptions, SchemaAction};

    /// A provider whose lock table never answers.
    struct Stalled;

    #[async_trait]
    impl LockProvider for Stalled {
        async fn acquire(&self, _: &LockRequest) -> Result<AcquireOutcome, LockError> {
            std::future::pending().await
        }
        async fn extend(&self, _: &Lease, _: Duration) -> Result<bool, LockError> {
            std::future::pending().await
        }
        async fn release(&self, _: &Lease, _: Duration) -> Result<bool, LockError> {
            std::future::pending().await
        }
        async fn list_locks(&self) -> Result<Vec<LockRecord>, LockError> {
            std::future::pending().await
        }
        async fn force_unlock(&self, _: &str) -> Result<Option<LockRecord>, LockError> {
            std::future::pending().await
        }
        fn describe(&self) -> String {
            "stalled table locks".to_owned()
        }
    }

    impl ClusterProvider for Stalled {}

    #[tokio::test]
    async fn an_operation_without_an_answer_fails_after_the_limit_naming_the_server() {
        let bounded = Deadline::new(
            Arc::new(Stalled),
            Duration::from_millis(50),
            "the test server at 127.0.0.1:1".to_owned(),
        );
        let error = bounded.list_locks().await.unwrap_err();
        assert!(
            matches!(
                error,
                LockError::Provider {
                    operation: "list",
                    ..
                }
            ),
            "{error:?}"
        );
        let source = std::error::Error::source(&error)
            .expect("a source")
            .to_string();
        assert_eq!(
            source,
            "timed out: no answer from the test server at 127.0.0.1:1 within 50 ms"
        );
        let error = bounded.force_unlock("report").await.unwrap_err();
        assert!(error.to_string().contains("report"), "{error}");
        // No operations tables: none through the wrapper either.
        assert!(bounded.cluster().is_none());
    }

    /// Every method of the cluster's stores reaches the provider's own: the whole contract,
    /// through the wrapper (a method not forwarded here would answer with the trait's default,
    /// which refuses dependent jobs and parameters).
    #[tokio::test]
    async fn the_bounded_provider_forwards_the_whole_cluster_contract() {
        let bounded = Deadline::new(
            Arc::new(lock_core::InMemoryLockProvider::new()),
            Duration::from_secs(5),
            "memory".to_owned(),
        );
        lock_cluster::testkit::operations_store(&bounded).await;
    }

    #[tokio::test]
    async fn the_bounded_provider_keeps_its_tables_and_its_type() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("locks.db").display());
        let opened = OpenOptions::new()
            .schema(SchemaAction::Create)
            .operation_timeout(Duration::from_secs(5))
            .open(&url)
            .await
            .unwrap();
        assert!(opened.provider().list_locks().await.unwrap().is_empty());
        let cluster = opened
            .provider()
            .cluster()
            .expect("SQLite keeps the operations tables");
        assert!(cluster.registry().await.unwrap().is_empty());
        assert!(opened.downcast_ref::<SqliteLockProvider>().is_some());
        opened.close().await;
    }
}
