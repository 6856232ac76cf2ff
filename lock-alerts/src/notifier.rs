//! [`Notifier`]: the small trait every way of telling a person implements.

use async_trait::async_trait;

use crate::{Notice, NotifyError};

/// A way of telling a person: the webhook, Slack and mail notifiers here, or one of yours.
///
/// `notify` returns once the notice is delivered or the notifier gave up (its retries spent);
/// it never panics on a receiver's answer. An implementation keeps its secrets out of its
/// errors and logs.
///
/// ```
/// use async_trait::async_trait;
/// use lock_alerts::{Notice, Notifier, NotifyError};
///
/// /// Writes each notice to stderr.
/// struct Stderr;
///
/// #[async_trait]
/// impl Notifier for Stderr {
///     fn name(&self) -> &str {
///         "stderr"
///     }
///     async fn notify(&self, notice: &Notice) -> Result<(), NotifyError> {
///         eprintln!("{}", notice.text());
///         Ok(())
///     }
/// }
///
/// let notifiers: Vec<Box<dyn Notifier>> = vec![Box::new(Stderr)];
/// assert_eq!(notifiers[0].name(), "stderr");
/// ```
#[async_trait]
pub trait Notifier: Send + Sync {
    /// A short name for logs and errors (`"ops-webhook"`, `"slack"`, `"mail"`).
    fn name(&self) -> &str;

    /// Delivers `notice`, retrying as the notifier is configured to.
    async fn notify(&self, notice: &Notice) -> Result<(), NotifyError>;
}
