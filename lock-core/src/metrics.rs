//! Counters, gauges and histograms per lock (feature `metrics`); no-ops without the feature.
//!
//! Handles are registered once per [`LockConfiguration`](crate::LockConfiguration) (the
//! scheduler builds one per job at start), so a fire allocates nothing for metrics.

#[cfg(feature = "metrics")]
mod enabled {
    use std::sync::Arc;
    use std::time::Duration;

    use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};

    /// The handles of one lock.
    #[derive(Clone, Debug)]
    pub(crate) struct LockMetrics {
        attempts: Counter,
        acquired: Counter,
        skipped: Counter,
        errors: Counter,
        lost: Counter,
        failures: Counter,
        active: Gauge,
        duration: Histogram,
        fire_lag: Histogram,
    }

    impl LockMetrics {
        pub(crate) fn new(name: &Arc<str>) -> Self {
            let job = || name.clone();
            LockMetrics {
                attempts: counter!("scheduled_lock_attempts_total", "job" => job()),
                acquired: counter!("scheduled_lock_acquired_total", "job" => job()),
                skipped: counter!("scheduled_lock_skipped_total", "job" => job()),
                errors: counter!("scheduled_lock_errors_total", "job" => job()),
                lost: counter!("scheduled_lock_lost_total", "job" => job()),
                failures: counter!("scheduled_job_failures_total", "job" => job()),
                active: gauge!("scheduled_job_active", "job" => job()),
                duration: histogram!("scheduled_job_duration_seconds", "job" => job()),
                fire_lag: histogram!("scheduled_job_fire_lag_seconds", "job" => job()),
            }
        }
        pub(crate) fn attempt(&self) {
            self.attempts.increment(1);
        }
        pub(crate) fn acquired(&self) {
            self.acquired.increment(1);
        }
        pub(crate) fn skipped(&self) {
            self.skipped.increment(1);
        }
        pub(crate) fn error(&self) {
            self.errors.increment(1);
        }
        pub(crate) fn lost(&self) {
            self.lost.increment(1);
        }
        pub(crate) fn failure(&self) {
            self.failures.increment(1);
        }
        pub(crate) fn started(&self) {
            self.active.increment(1.0);
        }
        pub(crate) fn finished(&self, took: Duration) {
            self.active.decrement(1.0);
            self.duration.record(took.as_secs_f64());
        }
        pub(crate) fn fire_lag(&self, lag: Duration) {
            self.fire_lag.record(lag.as_secs_f64());
        }
    }
}

#[cfg(not(feature = "metrics"))]
mod disabled {
    use std::sync::Arc;
    use std::time::Duration;

    /// Without the `metrics` feature every call compiles to nothing.
    #[derive(Clone, Debug)]
    pub(crate) struct LockMetrics;

    impl LockMetrics {
        pub(crate) fn new(_name: &Arc<str>) -> Self {
            LockMetrics
        }
        pub(crate) fn attempt(&self) {}
        pub(crate) fn acquired(&self) {}
        pub(crate) fn skipped(&self) {}
        pub(crate) fn error(&self) {}
        pub(crate) fn lost(&self) {}
        pub(crate) fn failure(&self) {}
        pub(crate) fn started(&self) {}
        pub(crate) fn finished(&self, _took: Duration) {}
        pub(crate) fn fire_lag(&self, _lag: Duration) {}
    }
}

#[cfg(not(feature = "metrics"))]
pub(crate) use disabled::LockMetrics;
#[cfg(feature = "metrics")]
pub(crate) use enabled::LockMetrics;
