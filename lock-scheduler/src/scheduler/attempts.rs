//! One run's attempts, inside its lease: retries with backoff after a failure, and the run
//! timeout around each attempt.
//!
//! Decisions, and why:
//! - **One lease for all attempts.** The acquire that won the slot holds it through every
//!   retry and is released once, after the last attempt: no other instance can run the slot
//!   (its `last_fire` is spent anyway) nor, while the lease lasts, the job. Without keep-alive,
//!   the lease is extended to a whole `lock_at_most_for` before each retry (one round trip
//!   per retry; a refused or failed extension ends the retries: the lease may be gone), and
//!   the pauses must fit in `lock_at_most_for` (checked at compile time and at start).
//! - **Backoff**: the pause after attempt `n` is `retry_backoff * 2^(n-1)`, capped at
//!   `max(retry_backoff, 10 min)`, less a random jitter of up to a quarter, so instances
//!   retrying together spread out and the pauses still grow.
//! - **Timeout per attempt.** At the timeout the attempt's `cancelled()` resolves; if the body
//!   has not ended a grace later ([`lock_trigger::timeout_grace`]: a tenth of the timeout,
//!   between 1 s and 30 s), its future is dropped. The run then ends as timed out and is not
//!   retried: its context is cancelled for good, and a body that hung once likely hangs
//!   again. A blocking body cannot be dropped (a thread cannot be stopped from outside): it
//!   is told to stop, warned about at timeout + grace, and keeps the lease until it returns.
//! - **Nothing changes for a job without retries or timeout**: its body is awaited as before,
//!   no catch, no timer.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures_util::FutureExt;
use futures_util::future::Either;
use rand::Rng;

use super::history::{RunEnding, RunRecorder};
use super::status::RunOutcome;
use crate::__private::JobResult;
use lock_core::{JobContext, JobError, LockConfiguration, LockingTaskExecutor};

/// How a job's runs are tried: retries after a failure, and a timeout per attempt.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RunPolicy {
    pub(crate) retries: u32,
    pub(crate) backoff: Duration,
    pub(crate) timeout: Option<Duration>,
}

impl RunPolicy {
    /// No retry, no timeout (the [`Default`]).
    pub(crate) const PLAIN: RunPolicy = RunPolicy {
        retries: 0,
        backoff: Duration::ZERO,
        timeout: None,
    };

    pub(crate) fn of_spec(spec: &lock_trigger::LockSpec) -> Self {
        RunPolicy {
            retries: spec.retries,
            backoff: spec.retry_backoff,
            timeout: spec.timeout,
        }
    }

    fn is_plain(&self) -> bool {
        self.retries == 0 && self.timeout.is_none()
    }

    /// The start-time checks of values given at run time (the macros check theirs at compile
    /// time): bounds, and a retry plan that fits in the lease without keep-alive.
    pub(crate) fn check(&self, config: &LockConfiguration) -> Result<(), String> {
        if self.retries > lock_trigger::MAX_RETRIES {
            return Err(format!(
                "retries: {} is over the limit of {}",
                self.retries,
                lock_trigger::MAX_RETRIES
            ));
        }
        if self.retries > 0 && self.backoff.is_zero() {
            return Err("retry_backoff: must be more than zero".into());
        }
        if self.timeout.is_some_and(|t| t.is_zero()) {
            return Err("timeout: must be more than zero".into());
        }
        if !config.keep_alive()
            && let Some(conflict) = lock_trigger::retry_plan_conflict(
                self.retries,
                self.backoff,
                config.lock_at_most_for(),
            )
        {
            return Err(conflict);
        }
        Ok(())
    }
}

/// How a run's attempts ended: the last attempt's result, or a timeout.
pub(super) enum Attempted {
    Returned(JobResult),
    TimedOut,
}

/// What the attempts need besides the body.
pub(super) struct Attempts<'a> {
    pub(super) policy: RunPolicy,
    pub(super) config: &'a LockConfiguration,
    pub(super) executor: &'a LockingTaskExecutor,
    pub(super) recorder: Option<RunRecorder>,
}

/// The result of one attempt.
enum Tried {
    Done(JobResult),
    Panicked(Box<dyn Any + Send>),
    TimedOut,
}

impl Attempts<'_> {
    /// Runs the async body made by `make` until an attempt succeeds or the retries are spent,
    /// each attempt bounded by the timeout. A panic of the last attempt continues in the
    /// caller (as without retries). Runs inside the lease's context.
    ///
    /// A claimed trigger request's parameters (`manual.rs`) are put in the context first, so
    /// the body's `params()` and the start rows carry them.
    pub(super) async fn run<F>(self, make: impl FnMut() -> F) -> Attempted
    where
        F: Future<Output = JobResult>,
    {
        let run = self.run_in_context(make);
        // One future awaited either way, so the run's space is in this one's once.
        match (super::manual::requested_params(), JobContext::current()) {
            (Some(params), Some(ctx)) => Either::Left(ctx.with_params(params).scope(run)),
            _ => Either::Right(run),
        }
        .await
    }

    async fn run_in_context<F>(self, mut make: impl FnMut() -> F) -> Attempted
    where
        F: Future<Output = JobResult>,
    {
        if let Some(recorder) = &self.recorder {
            recorder.started();
        }
        let ctx = match (self.policy.is_plain(), JobContext::current()) {
            (false, Some(ctx)) => ctx,
            _ => {
                let _ended = self.noting_end();
                return Attempted::Returned(self.captured(make()).await);
            }
        };
        // Boxed: the retry loop's futures (a timeout, the history's end row, the lease's
        // extension) are kilobytes, and every fire's future would carry and copy their space;
        // a plain job's fire, the common one, holds only its body.
        Box::pin(self.retrying(ctx, make)).await
    }

    /// Attempts until one succeeds or the retries are spent, each bounded by the timeout.
    async fn retrying<F>(self, ctx: JobContext, mut make: impl FnMut() -> F) -> Attempted
    where
        F: Future<Output = JobResult>,
    {
        let mut attempt = 1;
        loop {
            ctx.set_attempt(attempt);
            let tried = {
                let _ended = self.noting_end();
                self.attempt(&ctx, self.captured(make())).await
            };
            match self.after(&ctx, attempt, tried).await {
                Ok(done) => return done,
                Err(pause) => {
                    if !self.pause_and_extend(&ctx, pause).await {
                        // The failure stands: the lease is in doubt, or the run must stop.
                        return Attempted::Returned(Err(self.stopped_retrying(attempt)));
                    }
                }
            }
            attempt += 1;
            // Before the start row: the row carries the context's attempt number.
            ctx.set_attempt(attempt);
            if let Some(recorder) = &self.recorder {
                recorder.started();
            }
        }
    }

    /// `body`, its events kept as the run's log lines when run logs are on (the body and what
    /// it awaits; not the lines the attempts log around it). Not an `async fn`, which would
    /// hold the body's future twice.
    fn captured<F: Future>(&self, body: F) -> impl Future<Output = F::Output> {
        match self.recorder.as_ref().and_then(RunRecorder::log_sink) {
            Some(sink) => Either::Left(sink.capture(body)),
            None => Either::Right(body),
        }
    }

    /// Notes the attempt's body's end in the history when dropped: as it returns, panics or
    /// is dropped.
    fn noting_end(&self) -> BodyEnded<'_> {
        BodyEnded(self.recorder.as_ref())
    }

    /// [`captured`](Self::captured) for a blocking body, on its thread.
    fn captured_blocking<R>(&self, body: impl FnOnce() -> R) -> R {
        match self.recorder.as_ref().and_then(RunRecorder::log_sink) {
            Some(sink) => sink.capture_blocking(body),
            None => body(),
        }
    }

    /// One attempt, with the timeout and its grace.
    async fn attempt(&self, ctx: &JobContext, body: impl Future<Output = JobResult>) -> Tried {
        let body = AssertUnwindSafe(body).catch_unwind();
        let Some(timeout) = self.policy.timeout else {
            return match body.await {
                Ok(result) => Tried::Done(result),
                Err(panic) => Tried::Panicked(panic),
            };
        };
        let mut body = std::pin::pin!(body);
        tokio::select! {
            biased;
            out = &mut body => return match out {
                Ok(result) => Tried::Done(result),
                Err(panic) => Tried::Panicked(panic),
            },
            _ = tokio::time::sleep(timeout) => {}
        }
        let grace = lock_trigger::timeout_grace(timeout);
        tracing::warn!(
            attempt = ctx.attempt(),
            ?timeout,
            ?grace,
            "run timed out: cancelled() resolves now; the body is dropped if it has not ended after the grace"
        );
        ctx.cancel_token().cancel();
        tokio::select! {
            biased;
            out = &mut body => {
                if let Err(panic) = out {
                    return Tried::Panicked(panic);
                }
            }
            _ = tokio::time::sleep(grace) => {
                tracing::warn!(
                    attempt = ctx.attempt(),
                    "the body did not end within the grace after its timeout: dropped"
                );
            }
        }
        Tried::TimedOut
    }

    /// After attempt `attempt`: the run's end (`Ok`), or the pause before the next attempt.
    async fn after(
        &self,
        ctx: &JobContext,
        attempt: u32,
        tried: Tried,
    ) -> Result<Attempted, Duration> {
        let failure = match tried {
            Tried::Done(Ok(())) => return Ok(Attempted::Returned(Ok(()))),
            Tried::TimedOut => {
                self.config.metrics().timed_out();
                return Ok(Attempted::TimedOut);
            }
            Tried::Done(Err(error)) => Failure::Error(error),
            Tried::Panicked(panic) => Failure::Panic(panic),
        };
        let last = attempt > self.policy.retries || ctx.is_cancelled();
        if last {
            return match failure {
                Failure::Error(error) => Ok(Attempted::Returned(Err(error))),
                Failure::Panic(panic) => std::panic::resume_unwind(panic),
            };
        }
        let pause = lock_trigger::jittered(
            lock_trigger::retry_delay(self.policy.backoff, attempt),
            rand::rng().random::<f64>(),
        );
        let retries = self.policy.retries;
        // The error by its message chain, as the run's own "job failed" line shows it.
        let outcome = match &failure {
            Failure::Error(error) => {
                tracing::warn!(
                    attempt,
                    retries,
                    ?pause,
                    %error,
                    "attempt failed; retrying under the same lease after the pause"
                );
                RunOutcome::Failed(error.clone())
            }
            Failure::Panic(panic) => {
                let message = panic_message(&**panic);
                tracing::warn!(
                    attempt,
                    retries,
                    ?pause,
                    panic = %message,
                    "attempt failed; retrying under the same lease after the pause"
                );
                RunOutcome::Panicked(message)
            }
        };
        self.config.metrics().retry();
        if let Some(recorder) = &self.recorder {
            // Not the last attempt: not cancelled (a cancelled run does not retry).
            recorder.ended(&outcome, RunEnding::RETRIED).await;
        }
        Err(pause)
    }

    /// Waits `pause` (unless the run is cancelled), then makes sure the lease covers the next
    /// attempt; false when the retries must stop.
    async fn pause_and_extend(&self, ctx: &JobContext, pause: Duration) -> bool {
        tokio::select! {
            biased;
            _ = ctx.cancelled() => return false,
            _ = tokio::time::sleep(pause) => {}
        }
        if self.config.keep_alive() {
            // Keep-alive extends the lease on its own and cancels the context when it is lost.
            return true;
        }
        extend(self.executor, self.config, ctx).await
    }

    fn stopped_retrying(&self, attempt: u32) -> JobError {
        JobError::new(format!(
            "attempt {attempt} of {} failed and the retries stopped: the run was cancelled or \
             its lease could not be extended",
            self.policy.retries + 1
        ))
    }
}

enum Failure {
    Error(JobError),
    Panic(Box<dyn Any + Send>),
}

/// Extends the lease to a whole `lock_at_most_for` from now; false when it was refused or
/// failed (the lease may be gone: no further attempt runs under it).
async fn extend(
    executor: &LockingTaskExecutor,
    config: &LockConfiguration,
    ctx: &JobContext,
) -> bool {
    let call = executor
        .provider()
        .extend(ctx.lease(), config.lock_at_most_for());
    match tokio::time::timeout(executor.operation_timeout(), call).await {
        Ok(Ok(true)) => true,
        Ok(Ok(false)) => {
            tracing::warn!(
                lock = ctx.lock_name(),
                "lease lost before a retry; no more attempts"
            );
            false
        }
        Ok(Err(error)) => {
            tracing::warn!(
                lock = ctx.lock_name(),
                error = &error as &dyn std::error::Error,
                "could not extend the lease for a retry; no more attempts"
            );
            false
        }
        Err(_) => {
            tracing::warn!(
                lock = ctx.lock_name(),
                "extending the lease for a retry timed out; no more attempts"
            );
            false
        }
    }
}

/// [`Attempts`] owned, to move onto a blocking thread.
pub(super) struct BlockingAttempts {
    policy: RunPolicy,
    config: LockConfiguration,
    executor: LockingTaskExecutor,
    recorder: Option<RunRecorder>,
    handle: tokio::runtime::Handle,
    /// A claimed trigger request's parameters, taken on the async side.
    params: Option<lock_core::Params>,
}

impl Attempts<'_> {
    /// The same attempts for a synchronous body (clones of two handles: no allocation).
    pub(super) fn for_blocking(self) -> BlockingAttempts {
        BlockingAttempts {
            policy: self.policy,
            config: self.config.clone(),
            executor: self.executor.clone(),
            recorder: self.recorder,
            handle: tokio::runtime::Handle::current(),
            params: super::manual::requested_params(),
        }
    }
}

impl BlockingAttempts {
    /// [`Attempts::run`] for a synchronous body, on its blocking thread (inside the lease's
    /// context). The timeout resolves `cancelled()`; the thread cannot be stopped, so the body
    /// keeps the lease until it returns (a warning says so at timeout + grace).
    pub(super) fn run(mut self, body: impl FnMut() -> JobResult) -> Attempted {
        match (self.params.take(), JobContext::current()) {
            (Some(params), Some(ctx)) => ctx
                .with_params(params)
                .enter_blocking(|| self.run_in_context(body)),
            _ => self.run_in_context(body),
        }
    }

    fn run_in_context(self, mut body: impl FnMut() -> JobResult) -> Attempted {
        let BlockingAttempts {
            policy,
            config,
            executor,
            recorder,
            handle,
            params: _,
        } = self;
        let attempts = Attempts {
            policy,
            config: &config,
            executor: &executor,
            recorder,
        };
        if let Some(recorder) = &attempts.recorder {
            recorder.started();
        }
        let ctx = match (policy.is_plain(), JobContext::current()) {
            (false, Some(ctx)) => ctx,
            _ => {
                let _ended = attempts.noting_end();
                return Attempted::Returned(attempts.captured_blocking(body));
            }
        };
        let mut attempt = 1;
        loop {
            ctx.set_attempt(attempt);
            let fired = Arc::new(AtomicBool::new(false));
            let watch = policy
                .timeout
                .map(|timeout| handle.spawn(watch_blocking(ctx.clone(), timeout, fired.clone())));
            let result = {
                let _ended = attempts.noting_end();
                attempts.captured_blocking(|| std::panic::catch_unwind(AssertUnwindSafe(&mut body)))
            };
            if let Some(watch) = watch {
                watch.abort();
            }
            let tried = match result {
                _ if fired.load(Ordering::SeqCst) => Tried::TimedOut,
                Ok(result) => Tried::Done(result),
                Err(panic) => Tried::Panicked(panic),
            };
            match handle.block_on(attempts.after(&ctx, attempt, tried)) {
                Ok(done) => return done,
                Err(pause) => {
                    if !handle.block_on(attempts.pause_and_extend(&ctx, pause)) {
                        return Attempted::Returned(Err(attempts.stopped_retrying(attempt)));
                    }
                }
            }
            attempt += 1;
            ctx.set_attempt(attempt);
            if let Some(recorder) = &attempts.recorder {
                recorder.started();
            }
        }
    }
}

/// A blocking attempt's timeout: resolves `cancelled()` at `timeout` (setting `fired`), and
/// warns at timeout + grace that the body cannot be dropped.
async fn watch_blocking(ctx: JobContext, timeout: Duration, fired: Arc<AtomicBool>) {
    tokio::time::sleep(timeout).await;
    fired.store(true, Ordering::SeqCst);
    tracing::warn!(
        attempt = ctx.attempt(),
        ?timeout,
        "blocking run timed out: cancelled() resolves now"
    );
    ctx.cancel_token().cancel();
    tokio::time::sleep(lock_trigger::timeout_grace(timeout)).await;
    tracing::warn!(
        lock = ctx.lock_name(),
        "a blocking body cannot be dropped: it keeps running, and holds the lease, until it returns"
    );
}

pub(super) fn panic_message(panic: &(dyn Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// See [`Attempts::noting_end`].
struct BodyEnded<'a>(Option<&'a RunRecorder>);

impl Drop for BodyEnded<'_> {
    fn drop(&mut self) {
        if let Some(recorder) = self.0 {
            recorder.body_ended();
        }
    }
}
