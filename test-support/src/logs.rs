//! Log lines captured from `tracing`, for tests that assert a warning was given (and what it
//! says).

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

/// What was logged at `WARN` and above while the guard of [`capture`] was alive, on the
/// capturing thread.
#[derive(Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// Everything captured so far, as text.
    ///
    /// ```
    /// assert_eq!(test_support::logs::CapturedLogs::default().text(), "");
    /// ```
    pub fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures `WARN` and above on this thread until the guard is dropped. The default subscriber
/// is thread-local, so use it on a current-thread runtime (`#[tokio::test]`).
///
/// ```
/// let (logs, guard) = test_support::logs::capture();
/// tracing::warn!("the table is odd");
/// drop(guard);
/// assert!(logs.text().contains("the table is odd"));
/// ```
pub fn capture() -> (CapturedLogs, tracing::subscriber::DefaultGuard) {
    capture_at(tracing::Level::WARN)
}

/// [`capture`] at `level` and above (e.g. `DEBUG`, to see which path a provider took).
///
/// ```
/// let (logs, guard) = test_support::logs::capture_at(tracing::Level::DEBUG);
/// tracing::debug!("retrying");
/// drop(guard);
/// assert!(logs.text().contains("retrying"));
/// ```
pub fn capture_at(level: tracing::Level) -> (CapturedLogs, tracing::subscriber::DefaultGuard) {
    let logs = CapturedLogs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(level)
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}
