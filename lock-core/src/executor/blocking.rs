//! Bridges between synchronous code and the async executor: blocking a caller's thread on a
//! lock call, and joining a body run on tokio's blocking pool.

pub(super) async fn join_blocking<T>(task: tokio::task::JoinHandle<T>) -> T {
    match task.await {
        Ok(out) => out,
        Err(err) => match err.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            // The blocking pool is shutting down with the runtime: nothing left to return to.
            Err(err) => panic!("blocking job task did not complete: {err}"),
        },
    }
}

/// Blocks the current thread on `fut`, from a multi-thread runtime's worker (via
/// `block_in_place`) or from a thread outside any runtime (on `fallback`).
pub(super) fn block_on<F: Future>(fallback: Option<&tokio::runtime::Handle>, fut: F) -> F::Output {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::CurrentThread => panic!(
            "a synchronous #[scheduler_lock] function was called on a current-thread tokio runtime, \
             where waiting for the lock would block the only worker; call it from \
             tokio::task::spawn_blocking, or use a multi-thread runtime"
        ),
        Ok(handle) => tokio::task::block_in_place(|| handle.block_on(fut)),
        Err(_) => match fallback {
            Some(handle) => handle.block_on(fut),
            None => panic!(
                "a synchronous #[scheduler_lock] function was called outside a tokio runtime, and \
                 its executor was created outside one too; create the executor (or start the \
                 Scheduler) inside a tokio runtime"
            ),
        },
    }
}
