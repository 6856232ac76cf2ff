//! How often a notice is tried and how long each try may take: [`RetryPolicy`], and the one
//! loop every notifier runs it with.
//!
//! Decisions, and why: exponential backoff with "equal jitter" (half the delay fixed, half
//! random), so the instances of a cluster that notice the same outage do not retry in step; a
//! server's `Retry-After` replaces the computed delay but is capped by [`RetryPolicy::max_delay`],
//! so a notifier never waits longer than its owner said. Each attempt has its own timeout, so a
//! receiver that accepts the connection and never answers costs one timeout, not forever.

use std::future::Future;
use std::time::Duration;

use crate::NotifyError;

/// Attempts, backoff and per-attempt timeout for a notifier.
///
/// Defaults: 4 attempts, 500 ms base delay doubled each retry, at most 30 s between attempts,
/// 10 s per attempt. The delay before retry *n* (1-based) is `min(base * 2^(n-1), max)`, half
/// of it randomised.
///
/// What is retried: over HTTP, a connection error, a timeout, and the statuses 408, 429 and
/// 5xx (after the server's `Retry-After` when it sends one, capped by
/// [`max_delay`](Self::max_delay)); over SMTP, a connection error, a timeout and a transient
/// (4xx) answer. What is not: any other status, a permanent (5xx) SMTP answer, a redirect, and
/// a TLS handshake failure (a certificate that does not verify will not verify next time).
///
/// ```
/// use std::time::Duration;
/// use lock_alerts::RetryPolicy;
///
/// let policy = RetryPolicy::default()
///     .attempts(6)
///     .base_delay(Duration::from_secs(1))
///     .max_delay(Duration::from_secs(60))
///     .attempt_timeout(Duration::from_secs(5));
/// assert_eq!(policy.get_attempts(), 6);
/// // Retry 3 waits between half of 4 s and 4 s.
/// let delay = policy.backoff(3);
/// assert!(delay >= Duration::from_secs(2) && delay <= Duration::from_secs(4));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    attempts: u32,
    base_delay: Duration,
    max_delay: Duration,
    attempt_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            attempt_timeout: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// One attempt, no retry (with the default timeout).
    ///
    /// ```
    /// assert_eq!(lock_alerts::RetryPolicy::no_retry().get_attempts(), 1);
    /// ```
    pub fn no_retry() -> Self {
        RetryPolicy::default().attempts(1)
    }

    /// How many attempts in all, the first included (default 4; at least 1).
    ///
    /// ```
    /// assert_eq!(lock_alerts::RetryPolicy::default().attempts(0).get_attempts(), 1);
    /// ```
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// The delay before the first retry, doubled for each further one (default 500 ms).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let policy = lock_alerts::RetryPolicy::default().base_delay(Duration::from_millis(10));
    /// assert!(policy.backoff(1) <= Duration::from_millis(10));
    /// ```
    pub fn base_delay(mut self, delay: Duration) -> Self {
        self.base_delay = delay;
        self
    }

    /// The longest wait between two attempts, also the cap on a server's `Retry-After`
    /// (default 30 s).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let policy = lock_alerts::RetryPolicy::default().max_delay(Duration::from_secs(1));
    /// assert!(policy.backoff(20) <= Duration::from_secs(1));
    /// ```
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// How long one attempt may take, connecting included (default 10 s).
    ///
    /// ```
    /// # use std::time::Duration;
    /// let policy = lock_alerts::RetryPolicy::default().attempt_timeout(Duration::from_secs(2));
    /// assert_eq!(policy.get_attempt_timeout(), Duration::from_secs(2));
    /// ```
    pub fn attempt_timeout(mut self, timeout: Duration) -> Self {
        self.attempt_timeout = timeout;
        self
    }

    /// The number of attempts.
    ///
    /// ```
    /// assert_eq!(lock_alerts::RetryPolicy::default().get_attempts(), 4);
    /// ```
    pub fn get_attempts(&self) -> u32 {
        self.attempts
    }

    /// The per-attempt timeout.
    ///
    /// ```
    /// # use std::time::Duration;
    /// assert_eq!(
    ///     lock_alerts::RetryPolicy::default().get_attempt_timeout(),
    ///     Duration::from_secs(10)
    /// );
    /// ```
    pub fn get_attempt_timeout(&self) -> Duration {
        self.attempt_timeout
    }

    /// The delay before retry `retry` (1 for the first retry): `min(base * 2^(retry-1), max)`,
    /// its upper half random.
    ///
    /// ```
    /// # use std::time::Duration;
    /// let policy = lock_alerts::RetryPolicy::default();
    /// let first = policy.backoff(1);
    /// assert!(first >= Duration::from_millis(250) && first <= Duration::from_millis(500));
    /// ```
    pub fn backoff(&self, retry: u32) -> Duration {
        let doubled = self
            .base_delay
            .saturating_mul(1u32 << retry.saturating_sub(1).min(30));
        let ceiling = doubled.min(self.max_delay);
        let half = ceiling / 2;
        half + half.mul_f64(rand::random::<f64>())
    }

    /// The wait before retry `retry` when the server asked for `retry_after`: that, capped.
    fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        match retry_after {
            Some(asked) => asked.min(self.max_delay),
            None => self.backoff(retry),
        }
    }
}

/// What one attempt came to.
pub(crate) enum Attempt<T> {
    /// Delivered.
    Done(T),
    /// Failed in a way another attempt may cure; `retry_after` is the server's wish.
    Retry {
        error: NotifyError,
        retry_after: Option<Duration>,
    },
    /// Failed for good.
    Fail(NotifyError),
}

/// Runs `attempt(n)` (n from 1) until it is done, fails for good, or the attempts are spent;
/// the last error is returned. Each attempt's own timeout is the caller's (it knows how to
/// name a timeout in its error).
pub(crate) async fn run<T, F, Fut>(policy: &RetryPolicy, mut attempt: F) -> Result<T, NotifyError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Attempt<T>>,
{
    let mut number = 1;
    loop {
        match attempt(number).await {
            Attempt::Done(value) => return Ok(value),
            Attempt::Fail(error) => return Err(error),
            Attempt::Retry { error, .. } if number >= policy.attempts => return Err(error),
            Attempt::Retry { error, retry_after } => {
                let wait = policy.delay(number, retry_after);
                tracing::debug!(
                    notifier = error.notifier(),
                    attempt = number,
                    wait_ms = wait.as_millis() as u64,
                    error = %crate::error::chain(&error),
                    "notification attempt failed; retrying"
                );
                tokio::time::sleep(wait).await;
                number += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let policy = RetryPolicy::default()
            .base_delay(Duration::from_millis(100))
            .max_delay(Duration::from_millis(350));
        for _ in 0..50 {
            let (one, two, three) = (policy.backoff(1), policy.backoff(2), policy.backoff(3));
            assert!((50..=100).contains(&one.as_millis()), "{one:?}");
            assert!((100..=200).contains(&two.as_millis()), "{two:?}");
            assert!((175..=350).contains(&three.as_millis()), "{three:?}");
        }
        assert!(policy.backoff(u32::MAX) <= Duration::from_millis(350));
    }

    #[test]
    fn retry_after_replaces_the_backoff_within_the_cap() {
        let policy = RetryPolicy::default().max_delay(Duration::from_secs(5));
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(3600))),
            Duration::from_secs(5)
        );
    }
}
