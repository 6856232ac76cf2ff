//! The signal a service shuts down on: SIGTERM (Kubernetes, systemd, `docker stop`) and SIGINT
//! (Ctrl-C) on Unix; Ctrl-C, Ctrl-Break, console close and system shutdown on Windows.

use std::time::Duration;

/// The default [`SchedulerBuilder::shutdown_timeout`](crate::SchedulerBuilder::shutdown_timeout):
/// 15 s, half of Kubernetes' default `terminationGracePeriodSeconds` (30 s).
///
/// The grace period must cover everything between SIGTERM and the process's exit, or SIGKILL
/// ends it with leases still held: `terminationGracePeriodSeconds` > preStop hook + shutdown
/// timeout + release time (one release round trip of a body that ends at the last moment,
/// bounded by the operation timeout, 10 s by default). 15 s leaves that room under the default
/// 30 s; a longer shutdown timeout needs a longer grace period (`book/kubernetes.md` in the
/// workspace).
///
/// ```
/// assert!(lock_scheduler::DEFAULT_SHUTDOWN_TIMEOUT + lock_core::DEFAULT_OPERATION_TIMEOUT
///     < std::time::Duration::from_secs(30));
/// ```
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(15);

/// Resolves when the process is asked to stop: SIGTERM or SIGINT on Unix; Ctrl-C, Ctrl-Break,
/// console close or system shutdown on Windows. Logs which signal came.
///
/// `tokio::signal::ctrl_c()` is SIGINT only, but Kubernetes, systemd and `docker stop` send
/// SIGTERM: a service waiting on `ctrl_c()` is killed mid-job (or, as PID 1 in a container,
/// ignores SIGTERM until SIGKILL), and every lease it holds stays taken until its
/// `lock_at_most_for` ends. Wait on this instead:
///
/// ```no_run
/// # async fn run(scheduler: lock_scheduler::Scheduler) -> Result<(), lock_core::LockError> {
/// scheduler.run_until(lock_scheduler::shutdown_signal()).await?;
/// # Ok(()) }
/// ```
///
/// The handlers are installed when the future is first polled, so poll it early (e.g. pass it
/// to [`Scheduler::run_until`](crate::Scheduler::run_until) right after start). A signal that
/// cannot be listened to (the platform refuses the handler) is logged as an error and the
/// others are still awaited; if none can, this never resolves.
///
/// To stop an HTTP server and the scheduler on the same signal, let one task wait for it and
/// share a token (`examples/src/bin/axum_service.rs`):
///
/// ```no_run
/// # async fn run(scheduler: lock_scheduler::Scheduler) -> Result<(), lock_core::LockError> {
/// let stop = tokio_util::sync::CancellationToken::new();
/// tokio::spawn({
///     let stop = stop.clone();
///     async move {
///         lock_scheduler::shutdown_signal().await;
///         stop.cancel();
///     }
/// });
/// // axum::serve(listener, app).with_graceful_shutdown(stop.clone().cancelled_owned())
/// scheduler.run_until(stop.cancelled()).await?;
/// # Ok(()) }
/// ```
pub async fn shutdown_signal() {
    let name = platform::wait().await;
    tracing::info!(signal = name, "shutdown signal received");
}

#[cfg(unix)]
mod platform {
    use tokio::signal::unix::{SignalKind, signal};

    /// Waits for SIGTERM or SIGINT; returns its name.
    pub(super) async fn wait() -> &'static str {
        let mut term = listen(SignalKind::terminate(), "SIGTERM");
        let mut int = listen(SignalKind::interrupt(), "SIGINT");
        tokio::select! {
            Some(()) = recv(&mut term) => "SIGTERM",
            Some(()) = recv(&mut int) => "SIGINT",
            // Both streams failed or ended: nothing can ask this process to stop gracefully.
            else => std::future::pending().await,
        }
    }

    fn listen(kind: SignalKind, name: &str) -> Option<tokio::signal::unix::Signal> {
        signal(kind)
            .inspect_err(|error| {
                tracing::error!(signal = name, %error, "cannot listen for the shutdown signal");
            })
            .ok()
    }

    async fn recv(stream: &mut Option<tokio::signal::unix::Signal>) -> Option<()> {
        match stream {
            Some(stream) => stream.recv().await,
            None => None,
        }
    }
}

#[cfg(windows)]
mod platform {
    use tokio::signal::windows;

    /// Waits for Ctrl-C, Ctrl-Break, console close or system shutdown; returns its name.
    pub(super) async fn wait() -> &'static str {
        let mut c = log_err(windows::ctrl_c(), "Ctrl-C");
        let mut brk = log_err(windows::ctrl_break(), "Ctrl-Break");
        let mut close = log_err(windows::ctrl_close(), "console close");
        let mut down = log_err(windows::ctrl_shutdown(), "system shutdown");
        tokio::select! {
            Some(()) = async { c.as_mut()?.recv().await } => "Ctrl-C",
            Some(()) = async { brk.as_mut()?.recv().await } => "Ctrl-Break",
            Some(()) = async { close.as_mut()?.recv().await } => "console close",
            Some(()) = async { down.as_mut()?.recv().await } => "system shutdown",
            else => std::future::pending().await,
        }
    }

    fn log_err<T>(result: std::io::Result<T>, name: &str) -> Option<T> {
        result
            .inspect_err(|error| {
                tracing::error!(signal = name, %error, "cannot listen for the shutdown signal");
            })
            .ok()
    }
}

#[cfg(not(any(unix, windows)))]
mod platform {
    /// Elsewhere, tokio offers Ctrl-C only.
    pub(super) async fn wait() -> &'static str {
        match tokio::signal::ctrl_c().await {
            Ok(()) => "Ctrl-C",
            Err(error) => {
                tracing::error!(%error, "cannot listen for the shutdown signal");
                std::future::pending().await
            }
        }
    }
}
