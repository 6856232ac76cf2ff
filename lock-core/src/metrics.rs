//! The metrics lock-core records with the `metrics` feature: their names, and the per-lock
//! handles that record them.
//!
//! Every metric carries one label, [`JOB_LABEL`] (`scheduled_job`): the lock's name. Not `job`:
//! Prometheus gives every scraped series a `job` label of its own (the scrape job), and a
//! target's `job` label would be renamed `exported_job` under the default
//! `honor_labels: false`, so queries on `job` would match the scrape job instead. The names are
//! constants here whether the feature is on or not, so an exporter's set-up (histogram buckets,
//! filters, alerts in tests) can name them without spelling them again:
//!
//! ```
//! use lock_core::metrics;
//!
//! // e.g. PrometheusBuilder::new().set_buckets_for_metric(
//! //     Matcher::Full(metrics::JOB_FIRE_LAG_SECONDS.into()), &[0.001, 0.01, 0.1, 1.0])
//! assert_eq!(metrics::JOB_FIRE_LAG_SECONDS, "scheduled_job_fire_lag_seconds");
//! assert!(metrics::ALL.contains(&metrics::LOCK_ACQUIRED_TOTAL));
//! ```
//!
//! Handles are registered once per [`LockConfiguration`](crate::LockConfiguration) (the
//! scheduler builds one per job at start), so a fire allocates nothing for metrics. Without the
//! feature every recording call compiles to nothing.

use std::time::Duration;

/// The one label of every metric: the lock's name (the job's name unless
/// `#[scheduler_lock(name = ...)]` gives another). It is `scheduled_job`, not `job`, which
/// Prometheus reserves for the scrape job (see the [module documentation](self)).
///
/// ```
/// assert_eq!(lock_core::metrics::JOB_LABEL, "scheduled_job");
/// ```
pub const JOB_LABEL: &str = "scheduled_job";

/// How far this host's wall clock is ahead of the database's, in seconds (negative: behind),
/// as the scheduler last measured it: a gauge per instance, labelled [`INSTANCE_LABEL`] (the
/// instance id), set at start and at every clock refresh. Fires follow the database whatever
/// it says; alert on it to find hosts whose clock needs fixing.
///
/// ```
/// assert_eq!(lock_core::metrics::CLOCK_OFFSET_SECONDS, "scheduled_clock_offset_seconds");
/// ```
pub const CLOCK_OFFSET_SECONDS: &str = "scheduled_clock_offset_seconds";

/// The label of [`CLOCK_OFFSET_SECONDS`]: the scheduler's instance id. Not `instance`, which
/// Prometheus attaches to every scraped target (its `host:port`) and would rename ours to
/// `exported_instance`, as it would `job` (see [`JOB_LABEL`]).
///
/// ```
/// assert_eq!(lock_core::metrics::INSTANCE_LABEL, "scheduler_instance");
/// ```
pub const INSTANCE_LABEL: &str = "scheduler_instance";

/// Generates, from one table, the public name constants, [`ALL`], and both halves of
/// `LockMetrics`: the enabled one (a handle per metric, registered with the [`JOB_LABEL`] label)
/// and the disabled one (every recording call a no-op). A row is
/// `CONSTANT = "name", kind field => recorder(s);` where a counter has one recorder (add 1), a
/// gauge two (add 1, subtract 1), a histogram one (record a `Duration` in seconds) and a
/// timestamp one (set to seconds since the Unix epoch). A timestamp is a gauge registered at
/// its first setting, not at start: an instance that never set it exports no series, rather
/// than a 0 that would read as "last at 1970".
macro_rules! lock_metrics {
    (@handle counter) => { ::metrics::Counter };
    (@handle gauge) => { ::metrics::Gauge };
    (@handle histogram) => { ::metrics::Histogram };
    (@handle timestamp) => { ::std::sync::Arc<::std::sync::OnceLock<::metrics::Gauge>> };

    // The kinds are named after the `metrics` facade's macros: `counter!`, `gauge!`, `histogram!`.
    (@register timestamp $name:expr, $job:expr) => {
        ::std::sync::Arc::default()
    };
    (@register $kind:ident $name:expr, $job:expr) => {
        ::metrics::$kind!($name, super::JOB_LABEL => $job)
    };

    (@record timestamp $field:ident $constant:ident; $set:ident) => {
        pub fn $set(&self, seconds_since_epoch: f64) {
            self.$field
                .get_or_init(|| ::metrics::gauge!(super::$constant, super::JOB_LABEL => self.name.clone()))
                .set(seconds_since_epoch);
        }
    };
    (@record counter $field:ident $constant:ident; $add:ident) => {
        pub fn $add(&self) {
            self.$field.increment(1);
        }
    };
    (@record gauge $field:ident $constant:ident; $up:ident, $down:ident) => {
        pub fn $up(&self) {
            self.$field.increment(1.0);
        }
        pub fn $down(&self) {
            self.$field.decrement(1.0);
        }
    };
    (@record histogram $field:ident $constant:ident; $record:ident) => {
        pub fn $record(&self, value: Duration) {
            self.$field.record(value.as_secs_f64());
        }
    };

    (@noop counter; $add:ident) => {
        pub fn $add(&self) {}
    };
    (@noop gauge; $up:ident, $down:ident) => {
        pub fn $up(&self) {}
        pub fn $down(&self) {}
    };
    (@noop histogram; $record:ident) => {
        pub fn $record(&self, _value: Duration) {}
    };
    (@noop timestamp; $set:ident) => {
        pub fn $set(&self, _seconds_since_epoch: f64) {}
    };

    ($(
        $(#[doc = $doc:literal])*
        $constant:ident = $name:literal, $kind:ident $field:ident => $($recorder:ident),+;
    )*) => {
        $(
            $(#[doc = $doc])*
            #[doc = ""]
            #[doc = concat!("A ", stringify!($kind), ", labelled [`JOB_LABEL`] (the lock name).")]
            #[doc = ""]
            #[doc = "```"]
            #[doc = concat!(
                "assert_eq!(lock_core::metrics::",
                stringify!($constant),
                ", ",
                stringify!($name),
                ");"
            )]
            #[doc = "```"]
            pub const $constant: &str = $name;
        )*

        /// Every metric name above, in the order of this page.
        ///
        /// ```
        /// assert_eq!(lock_core::metrics::ALL.len(), 21);
        /// ```
        pub const ALL: &[&str] = &[$($constant),*];

        // The recorders are named after their metric (the table above documents them).
        #[cfg(feature = "metrics")]
        #[allow(missing_docs)]
        mod enabled {
            use std::sync::Arc;
            use std::time::Duration;

            /// The handles of one lock.
            #[derive(Clone, Debug)]
            pub struct LockMetrics {
                /// The label's value, for handles registered later (timestamps).
                name: Arc<str>,
                $($field: lock_metrics!(@handle $kind),)*
            }

            impl LockMetrics {
                pub fn new(name: &Arc<str>) -> Self {
                    LockMetrics {
                        name: name.clone(),
                        $($field: lock_metrics!(@register $kind super::$constant, name.clone()),)*
                    }
                }

                $(lock_metrics!(@record $kind $field $constant; $($recorder),+);)*
            }
        }

        #[cfg(not(feature = "metrics"))]
        #[allow(missing_docs)]
        mod disabled {
            use std::sync::Arc;
            use std::time::Duration;

            /// Without the `metrics` feature every call compiles to nothing.
            #[derive(Clone, Debug)]
            pub struct LockMetrics;

            impl LockMetrics {
                pub fn new(_name: &Arc<str>) -> Self {
                    LockMetrics
                }

                $(lock_metrics!(@noop $kind; $($recorder),+);)*
            }
        }
    };
}

lock_metrics! {
    /// Acquires tried: every instance, every fire, and every direct call of a locked function.
    /// `attempts = acquired + skipped + errors`.
    LOCK_ATTEMPTS_TOTAL = "scheduled_lock_attempts_total", counter attempts => attempt;
    /// Acquires granted: runs of the body.
    LOCK_ACQUIRED_TOTAL = "scheduled_lock_acquired_total", counter acquired => acquired;
    /// Acquires refused: another instance holds the lock, or this slot already ran.
    LOCK_SKIPPED_TOTAL = "scheduled_lock_skipped_total", counter skipped => skipped;
    /// Acquires that failed (database unreachable, table missing); the body did not run.
    LOCK_ERRORS_TOTAL = "scheduled_lock_errors_total", counter errors => error;
    /// Leases lost while the body ran (keep-alive found the lease gone or could not extend it).
    LOCK_LOST_TOTAL = "scheduled_lock_lost_total", counter lost => lost;
    /// Scheduled runs whose body returned an error or panicked.
    JOB_FAILURES_TOTAL = "scheduled_job_failures_total", counter failures => failure;
    /// Scheduled runs whose body returned after its `JobContext::cancelled()` had resolved
    /// (shutdown, or the lease was lost): stopped early, recorded as neither success nor failure.
    JOB_CANCELLED_TOTAL = "scheduled_job_cancelled_total", counter cancelled => cancelled;
    /// When the job last succeeded on this instance, in seconds since the Unix epoch: set by the
    /// instance that ran the body, absent on an instance that never ran it successfully. Take
    /// the `max` across instances for the cluster's last success.
    JOB_LAST_SUCCESS_TIMESTAMP_SECONDS = "scheduled_job_last_success_timestamp_seconds", timestamp last_success => succeeded_at;
    /// Bodies running now under this lock.
    JOB_ACTIVE = "scheduled_job_active", gauge active => started, ended;
    /// Time the lock was held, in seconds: from acquire to release, body included, failed runs
    /// too.
    JOB_DURATION_SECONDS = "scheduled_job_duration_seconds", histogram duration => held_for;
    /// How late a fire started after its slot, in seconds (cron and fixed-rate jobs; every
    /// instance records it).
    JOB_FIRE_LAG_SECONDS = "scheduled_job_fire_lag_seconds", histogram fire_lag => fire_lag;
    /// The job's next fire on this instance, in seconds since the Unix epoch by the database's
    /// clock (cron and fixed-rate jobs; fixed-delay jobs: the planned one): every instance
    /// sets it after each fire. `time() > max_over_time(..[1h]) + grace` says that the fire
    /// passed and no instance planned another, e.g. because every instance is down.
    JOB_NEXT_FIRE_TIMESTAMP_SECONDS = "scheduled_job_next_fire_timestamp_seconds", timestamp next_fire => next_fire_at;
    /// Fires not run because the job is paused cluster-wide (`lockctl pause`).
    JOB_PAUSED_TOTAL = "scheduled_job_paused_total", counter paused => paused;
    /// Attempts after the first of a run whose body failed (`retries`): one per retry.
    JOB_RETRIES_TOTAL = "scheduled_job_retries_total", counter retries => retry;
    /// Runs that passed their `timeout` (told to stop, dropped after a grace if still running).
    JOB_TIMED_OUT_TOTAL = "scheduled_job_timed_out_total", counter timed_out => timed_out;
    /// Runs of missed slots (`misfire = "fire_once"` or `"catch_up"`) started on this instance.
    JOB_CATCH_UP_TOTAL = "scheduled_job_catch_up_total", counter catch_ups => catch_up;
    /// Runs of a slot that came due while the job's previous run ran (`overlap = "queue"`),
    /// started on this instance right after it.
    JOB_QUEUED_TOTAL = "scheduled_job_queued_total", counter queued => queued;
    /// Runs cancelled by the next slot's fire (`overlap = "replace"`) on this instance.
    JOB_REPLACED_TOTAL = "scheduled_job_replaced_total", counter replaced => replaced;
    /// Fires this instance left to the others because it was at a run limit
    /// (`max_concurrent_runs`, `group_limit`).
    JOB_BUSY_HANDED_ON_TOTAL = "scheduled_job_busy_handed_on_total", counter busy_handed_on => busy_handed_on;
    /// Requests for a dependent job (`after = "this job"`) written after a successful run of
    /// this job on this instance, one per child.
    JOB_DEPENDENTS_REQUESTED_TOTAL = "scheduled_job_dependents_requested_total", counter dependents_requested => dependent_requested;
    /// Times the circuit breaker (`pause_after_failures`) paused this job cluster-wide, counted
    /// on the instance whose failure tripped it.
    JOB_BREAKER_TRIPS_TOTAL = "scheduled_job_breaker_trips_total", counter breaker_trips => breaker_tripped;
}

// Public for the scheduler (`lock-scheduler` records the job metrics through the handles each
// job's configuration holds); not part of the API.
#[cfg(not(feature = "metrics"))]
#[doc(hidden)]
pub use disabled::LockMetrics;
#[cfg(feature = "metrics")]
#[doc(hidden)]
pub use enabled::LockMetrics;

impl LockMetrics {
    /// A body that held the lock for `took` ended: one fewer active, one more duration.
    pub fn finished(&self, took: Duration) {
        self.ended();
        self.held_for(took);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dashboards and alerts query these names: they change only on purpose.
    #[test]
    fn names_are_the_published_ones() {
        assert_eq!(
            ALL,
            [
                "scheduled_lock_attempts_total",
                "scheduled_lock_acquired_total",
                "scheduled_lock_skipped_total",
                "scheduled_lock_errors_total",
                "scheduled_lock_lost_total",
                "scheduled_job_failures_total",
                "scheduled_job_cancelled_total",
                "scheduled_job_last_success_timestamp_seconds",
                "scheduled_job_active",
                "scheduled_job_duration_seconds",
                "scheduled_job_fire_lag_seconds",
                "scheduled_job_next_fire_timestamp_seconds",
                "scheduled_job_paused_total",
                "scheduled_job_retries_total",
                "scheduled_job_timed_out_total",
                "scheduled_job_catch_up_total",
                "scheduled_job_queued_total",
                "scheduled_job_replaced_total",
                "scheduled_job_busy_handed_on_total",
                "scheduled_job_dependents_requested_total",
                "scheduled_job_breaker_trips_total",
            ]
        );
        assert_eq!(JOB_LABEL, "scheduled_job");
    }
}
