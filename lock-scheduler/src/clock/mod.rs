//! The database's clock, as this host sees it: the scheduler fires by it.
//!
//! Leases were always timed by the database. Fires are too: the scheduler keeps an
//! [`Estimate`] of the database's clock against this host's *monotonic* clock, measured from
//! round trips of [`LockProvider::database_time`], and sleeps on the monotonic clock to the
//! instant at which the database reaches each slot. The host's wall clock is read only to
//! report how far off it is ([`DatabaseClock::host_offset`]).
//!
//! # Error bounds
//!
//! - One round trip bounds the database's time at its midpoint within **half the round trip**
//!   (the server read its clock between send and receive), whatever the split of the delay
//!   between the two directions. Each measurement takes several round trips and keeps the
//!   shortest.
//! - Between measurements the bound grows by the drift of the two clocks, taken as at most
//!   100 ppm (3 ms per 30 s refresh); an older, quieter measurement is kept while it is still
//!   the narrower one and agrees with the newer.
//! - A step of the database's clock is seen at the next refresh (by default within 30 s): the
//!   new measurement disagrees with the old, replaces it, and every sleeping timer is woken to
//!   re-plan. A step back by more than `max_slot_lead` is seen sooner: the first acquire it
//!   refuses as a slot too far ahead makes its job loop measure at once
//!   ([`DatabaseClock::refresh_after`]).
//! - A step of this host's wall clock changes nothing but the reported offset.

mod estimate;
mod sleep;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub(crate) use estimate::{Estimate, Sample};
use lock_core::{LockError, LockProvider, LockingTaskExecutor};
pub(crate) use sleep::SleepUntil;

/// The default [`SchedulerBuilder::clock_refresh`](crate::SchedulerBuilder::clock_refresh).
pub const DEFAULT_CLOCK_REFRESH: Duration = Duration::from_secs(30);

/// Round trips per measurement at start, and at each refresh.
const START_SAMPLES: usize = 5;
const REFRESH_SAMPLES: usize = 3;

/// Timers re-plan when the estimate moves by more than this: less is within the estimate's own
/// error, and waking every timer for it would be noise.
const REPLAN_THRESHOLD: Duration = Duration::from_millis(1);

/// The offset past which this host's clock is reported at `warn`.
const WARN_OFFSET: TimeDelta = TimeDelta::seconds(1);

/// Where the clock readings come from: the provider, or a fake in the estimator's tests.
#[async_trait]
pub(crate) trait ClockSource: Send + Sync + 'static {
    async fn read(&self) -> Result<DateTime<Utc>, LockError>;
    fn describe(&self) -> String;
}

#[async_trait]
impl ClockSource for Arc<dyn LockProvider> {
    async fn read(&self) -> Result<DateTime<Utc>, LockError> {
        self.database_time().await
    }
    fn describe(&self) -> String {
        LockProvider::describe(&**self)
    }
}

/// This host's wall clock, replaceable in tests to step it.
pub(crate) type WallClock = Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>;

/// The shared estimate of the database's clock; clones share it.
#[derive(Clone)]
pub(crate) struct DatabaseClock {
    shared: Arc<Shared>,
}

struct Shared {
    source: Box<dyn ClockSource>,
    estimate: watch::Sender<Estimate>,
    /// Wakes the timers when the estimate moved by more than [`REPLAN_THRESHOLD`]: a `Notify`
    /// rather than a watch receiver per timer, whose `changed()` future is twice the size of
    /// a `Notified` in every sleeping job's task (10,000 idle jobs).
    replan: Notify,
    wall: WallClock,
    /// Bounds each round trip.
    timeout: Duration,
    /// For the log lines and the gauge.
    instance: Arc<str>,
    /// The offset last reported at `warn`, so a steady offset is not repeated every refresh.
    warned: std::sync::Mutex<Option<TimeDelta>>,
    /// When the last measurement began; held while one is taken, so that the job loops that
    /// ask for one at once (each refused a slot by a clock that stepped) share it.
    measured: tokio::sync::Mutex<Instant>,
}

impl std::fmt::Debug for DatabaseClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseClock")
            .field("estimate", &*self.shared.estimate.borrow())
            .finish_non_exhaustive()
    }
}

impl DatabaseClock {
    /// Measures the database's clock (several round trips, each bounded by `timeout`) and
    /// returns the clock once at least one round trip answered. Fails when none did: the
    /// scheduler never fires by a clock it has not measured.
    pub(crate) async fn measure(
        source: Box<dyn ClockSource>,
        wall: WallClock,
        timeout: Duration,
        instance: Arc<str>,
    ) -> Result<Self, LockError> {
        let began = Instant::now();
        let estimate = sample_round(&*source, START_SAMPLES, timeout).await?;
        let clock = DatabaseClock {
            shared: Arc::new(Shared {
                source,
                estimate: watch::Sender::new(estimate),
                replan: Notify::new(),
                wall,
                timeout,
                instance,
                warned: std::sync::Mutex::new(None),
                measured: tokio::sync::Mutex::new(began),
            }),
        };
        clock.report(true);
        Ok(clock)
    }

    /// The scheduler's clock: the executor's provider, measured at start with the executor's
    /// operation timeout per round trip. An error (nothing answered) is logged and returned.
    pub(crate) async fn for_scheduler(executor: &LockingTaskExecutor) -> Result<Self, LockError> {
        let provider = executor.provider();
        DatabaseClock::measure(
            Box::new(provider.clone()),
            Arc::new(Utc::now),
            executor.operation_timeout(),
            executor.instance_id().into(),
        )
        .await
        .inspect_err(|error| match error {
            // The clock is the first statement start() sends, and a provider prepares it with
            // its lock statements: a missing table is what to say, and its statement is in
            // the returned error (printed once, by whoever shows that error).
            LockError::TableMissing { table, .. } => tracing::error!(
                instance = executor.instance_id(),
                provider = %LockProvider::describe(&**provider),
                "lock table {table} does not exist, so the scheduler does not start: call the \
                 provider's ensure_schema() or run the CREATE statement in the error start() \
                 returned"
            ),
            _ => tracing::error!(
                instance = executor.instance_id(),
                provider = %LockProvider::describe(&**provider),
                error = error as &dyn std::error::Error,
                "cannot read the database clock at start; the scheduler does not start, since \
                 it never fires by a clock it has not measured"
            ),
        })
    }

    /// The database's time now, by the estimate.
    pub(crate) fn now(&self) -> DateTime<Utc> {
        self.shared.estimate.borrow().database_at(Instant::now())
    }

    /// The monotonic instant at which the database's clock reaches `at`.
    pub(crate) fn instant_at(&self, at: DateTime<Utc>) -> Instant {
        self.shared.estimate.borrow().instant_at(at)
    }

    /// How far this host's wall clock is ahead of the database's (negative: behind).
    pub(crate) fn host_offset(&self) -> TimeDelta {
        (self.shared.wall)() - self.now()
    }

    /// The estimate's error bound now.
    pub(crate) fn error_bound(&self) -> Duration {
        self.shared.estimate.borrow().error_at(Instant::now())
    }

    /// Sleeps until the database's clock reaches `at`, re-planning whenever the estimate
    /// moves; returns false if `stop` is cancelled first.
    pub(crate) fn sleep_until<'a>(
        &'a self,
        at: DateTime<Utc>,
        stop: &'a CancellationToken,
    ) -> SleepUntil<'a> {
        SleepUntil::new(self, at, stop.cancelled())
    }

    /// Measures again and keeps the better estimate; wakes the timers when it moved.
    pub(crate) async fn refresh(&self) -> Result<(), LockError> {
        let mut measured = self.shared.measured.lock().await;
        *measured = Instant::now();
        self.measure_again().await
    }

    /// [Refreshes](Self::refresh) unless a measurement begun at or after `since` was taken
    /// meanwhile: a job loop refused a slot as too far ahead of the database's clock asks for
    /// one at once, and a thousand loops refused together cost one or two, not a thousand. A
    /// failed measurement counts too: the others go on with the estimate they have rather
    /// than each waiting for the same timeout.
    pub(crate) async fn refresh_after(&self, since: Instant) -> Result<(), LockError> {
        let mut measured = self.shared.measured.lock().await;
        if *measured >= since {
            return Ok(());
        }
        *measured = Instant::now();
        self.measure_again().await
    }

    async fn measure_again(&self) -> Result<(), LockError> {
        let shared = &self.shared;
        let newer = sample_round(&*shared.source, REFRESH_SAMPLES, shared.timeout).await?;
        let now = Instant::now();
        if shared.estimate.send_if_modified(|current| {
            let kept = current.refined_by(newer);
            let moved = kept.distance_at(current, now);
            // A second or more is a step of the database's clock (or of this host's
            // monotonic clock): worth an operator's attention. Less is measurement noise.
            if moved >= Duration::from_secs(1) {
                tracing::warn!(
                    instance = &*shared.instance,
                    moved = ?moved,
                    "the database's clock stepped; timers re-planned to follow it"
                );
            } else if moved > REPLAN_THRESHOLD {
                tracing::debug!(
                    instance = &*shared.instance,
                    moved = ?moved,
                    "the database clock estimate moved; timers re-planned"
                );
            }
            *current = kept;
            moved > REPLAN_THRESHOLD
        }) {
            shared.replan.notify_waiters();
        }
        self.report(false);
        Ok(())
    }

    /// Refreshes every `every` until `stop`; a failed refresh keeps the last estimate.
    pub(crate) async fn refresh_until(self, every: Duration, stop: CancellationToken) {
        loop {
            tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every) => {}
            }
            // A round trip in flight at shutdown is abandoned, not waited for.
            let refreshed = tokio::select! {
                biased;
                _ = stop.cancelled() => return,
                refreshed = self.refresh() => refreshed,
            };
            if let Err(error) = refreshed {
                tracing::warn!(
                    instance = &*self.shared.instance,
                    error = &error as &dyn std::error::Error,
                    bound = ?self.error_bound(),
                    "could not read the database clock; fires keep following the last estimate"
                );
            }
        }
    }

    /// Publishes the offset: the gauge always, a `warn` at start and whenever the offset is
    /// over a second and has changed by more than a second since it was last reported.
    fn report(&self, at_start: bool) {
        let offset = self.host_offset();
        let seconds = offset.as_seconds_f64();
        #[cfg(feature = "metrics")]
        ::metrics::gauge!(
            lock_core::metrics::CLOCK_OFFSET_SECONDS,
            lock_core::metrics::INSTANCE_LABEL => self.shared.instance.to_string()
        )
        .set(seconds);
        let instance = &*self.shared.instance;
        let bound = self.error_bound();
        let mut warned = self
            .shared
            .warned
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if offset.abs() > WARN_OFFSET {
            let changed = warned.is_none_or(|last| (offset - last).abs() > WARN_OFFSET);
            if at_start || changed {
                let direction = if seconds > 0.0 { "ahead of" } else { "behind" };
                tracing::warn!(
                    instance,
                    offset_seconds = seconds,
                    error_bound = ?bound,
                    "this host's clock is {:.1} s {direction} the database; fires follow the database",
                    seconds.abs()
                );
                *warned = Some(offset);
            }
        } else {
            if at_start || warned.is_some() {
                tracing::info!(
                    instance,
                    offset_seconds = seconds,
                    error_bound = ?bound,
                    "this host's clock agrees with the database's within a second; fires follow the database"
                );
            }
            *warned = None;
        }
    }
}

/// One measurement: up to `count` round trips, the shortest kept. Fails only when none
/// answered, with the last error.
async fn sample_round(
    source: &dyn ClockSource,
    count: usize,
    timeout: Duration,
) -> Result<Estimate, LockError> {
    let mut samples = Vec::with_capacity(count);
    let mut last_error = None;
    for _ in 0..count {
        let sent = Instant::now();
        match tokio::time::timeout(timeout, source.read()).await {
            Ok(Ok(server)) => samples.push(Sample {
                sent,
                received: Instant::now(),
                server,
            }),
            Ok(Err(error)) => last_error = Some(error),
            Err(_) => {
                last_error = Some(LockError::provider(
                    "read the clock",
                    "",
                    source.describe(),
                    format!("no answer within {timeout:?}"),
                ))
            }
        }
    }
    Estimate::best_of(&samples).ok_or_else(|| {
        last_error.unwrap_or_else(|| {
            LockError::InvalidConfiguration("no round trip to read the database clock".into())
        })
    })
}
