#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// The root: what a newcomer holds in mind. Everything else lives in the modules below.
pub use lock_core::{FireKind, JobContext, LockError, assert_locked};
pub use lock_scheduler::{
    Job, Scheduler, SchedulerBuilder, State, Trigger, scheduled, scheduler_lock, shutdown_signal,
};

/// What the macros expand to; not public API.
#[doc(hidden)]
pub use lock_scheduler::__private;

pub mod provider;
pub mod scheduler;

/// The cluster's state next to the lock table: the job registry and heartbeats, run history,
/// pauses, trigger requests and the action log, as the scheduler writes them and operators
/// read them.
pub mod cluster {
    pub use lock_cluster::*;
}

/// Running one job's body in a test, without a scheduler or a database.
///
/// ```
/// use scheduled_locks::testing::TestFire;
/// use scheduled_locks::{Job, JobContext, Trigger};
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let every_second = Trigger::fixed_rate(std::time::Duration::from_secs(1))?;
/// let job = Job::new("tick", every_second, |ctx: JobContext| async move {
///     assert_eq!(ctx.fence(), 7);
/// });
/// assert!(TestFire::new().fence(7).run_job(&job).await.is_ok());
/// # Ok::<(), scheduled_locks::LockError>(()) }).unwrap();
/// ```
pub mod testing {
    pub use lock_scheduler::testing::*;
}

/// The `metrics` facade's names for what the scheduler records (feature `metrics`).
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics {
    pub use lock_core::metrics::*;
}

/// Locked jobs on an existing `tokio_cron_scheduler::JobScheduler` (feature
/// `tokio-cron-scheduler`).
#[cfg(feature = "tokio-cron-scheduler")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-cron-scheduler")))]
pub mod tokio_cron_scheduler {
    pub use lock_scheduler::tcs::*;
}

/// PostgreSQL through deadpool-postgres (feature `postgres`):
/// [`PostgresLockProvider`](postgres::PostgresLockProvider).
#[cfg(feature = "postgres")]
#[cfg_attr(docsrs, doc(cfg(feature = "postgres")))]
pub mod postgres {
    pub use lock_provider_postgres::*;
}

/// MySQL and MariaDB through mysql_async (feature `mysql`):
/// [`MySqlLockProvider`](mysql::MySqlLockProvider).
#[cfg(feature = "mysql")]
#[cfg_attr(docsrs, doc(cfg(feature = "mysql")))]
pub mod mysql {
    pub use lock_provider_mysql::*;
}

/// SQLite through rusqlite, bundled (feature `sqlite`, on by default):
/// [`SqliteLockProvider`](sqlite::SqliteLockProvider).
#[cfg(feature = "sqlite")]
#[cfg_attr(docsrs, doc(cfg(feature = "sqlite")))]
pub mod sqlite {
    pub use lock_provider_sqlite::*;
}

/// Redis through redis-rs (feature `redis`): [`RedisLockProvider`](redis::RedisLockProvider).
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis {
    pub use lock_provider_redis::*;
}

/// The service's own sqlx pool (features `sqlx-postgres`, `sqlx-mysql`, `sqlx-sqlite`):
/// [`SqlxLockProvider`](sqlx::SqlxLockProvider).
#[cfg(any(
    feature = "sqlx-postgres",
    feature = "sqlx-mysql",
    feature = "sqlx-sqlite"
))]
#[cfg_attr(
    docsrs,
    doc(cfg(any(
        feature = "sqlx-postgres",
        feature = "sqlx-mysql",
        feature = "sqlx-sqlite"
    )))
)]
pub mod sqlx {
    pub use lock_provider_sqlx::*;
}

/// The cluster's web dashboard as an axum router (feature `dashboard`).
#[cfg(feature = "dashboard")]
#[cfg_attr(docsrs, doc(cfg(feature = "dashboard")))]
pub mod dashboard {
    pub use lock_dashboard::*;
}

/// Telling a person (feature `alerts`): signed webhooks, Slack, mail over SMTP and
/// dead-man-switch pings, and the alert rules the scheduler evaluates itself ([`AlertRules`](alerts::AlertRules)).
///
/// The feature also gives [`SchedulerBuilder::notifier`](crate::SchedulerBuilder::notifier)
/// and [`alert_rules`](crate::SchedulerBuilder::alert_rules), which tell each incident once
/// across the cluster (failed 3 times in a row, running too long, a missed slot, an instance
/// gone, a long lock wait), and [`Job::with_dead_man_switch`], which pings a
/// [`DeadManSwitch`](alerts::DeadManSwitch) at each run's start and end.
///
/// ```
/// use scheduled_locks::alerts::{AlertRules, DeadManSwitch, WebhookConfig, WebhookNotifier};
/// use scheduled_locks::{Job, Scheduler, Trigger};
///
/// let job = Job::new("nightly_report", Trigger::cron("0 0 3 * * *")?, || async {})
///     .with_dead_man_switch(DeadManSwitch::cronitor("https://cronitor.link/p/KEY/nightly_report")?);
/// let builder = Scheduler::builder()
///     .notifier(WebhookNotifier::new(
///         WebhookConfig::new("https://ops.example.com/hooks/scheduler").secret("whsec_1234"),
///     )?)
///     .alert_rules(AlertRules::default().failed_in_a_row(3))
///     .jobs([job]);
/// # let _ = builder;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "alerts")]
#[cfg_attr(docsrs, doc(cfg(feature = "alerts")))]
pub mod alerts {
    pub use lock_alerts::*;
    pub use lock_scheduler::{ALERT_ENV_PREFIX, ALERT_RULES_JOB, AlertRules};
}

// The workspace README and the book are compiled as doc tests of this crate, so their examples
// are written against `scheduled_locks` alone, as a service's code is. `cfg(doctest)`: the
// files lie outside this crate's folder, so a normal build (and `cargo package`) never reads
// them.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeDoctests;

#[cfg(doctest)]
mod book {
    #[doc = include_str!("../../book/README.md")]
    struct Index;
    #[doc = include_str!("../../book/how-it-works.md")]
    struct HowItWorks;
    #[doc = include_str!("../../book/attributes.md")]
    struct Attributes;
    #[doc = include_str!("../../book/jobs.md")]
    struct Jobs;
    #[doc = include_str!("../../book/run-once.md")]
    struct RunOnce;
    #[doc = include_str!("../../book/shards-and-broadcast.md")]
    struct ShardsAndBroadcast;
    #[doc = include_str!("../../book/dependent-jobs.md")]
    struct DependentJobs;
    #[doc = include_str!("../../book/misfire-retries-timeouts.md")]
    struct MisfireRetriesTimeouts;
    #[doc = include_str!("../../book/configuration.md")]
    struct Configuration;
    #[doc = include_str!("../../book/metrics.md")]
    struct Metrics;
    #[doc = include_str!("../../book/operating.md")]
    struct Operating;
    #[doc = include_str!("../../book/kubernetes.md")]
    struct Kubernetes;
    #[doc = include_str!("../../book/coming-from-shedlock.md")]
    struct ComingFromShedlock;
    #[doc = include_str!("../../book/providers.md")]
    struct Providers;
}
