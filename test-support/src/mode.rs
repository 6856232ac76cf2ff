//! Full measurement under `cargo bench`, a short smoke pass under `cargo test`.

use std::future::Future;

/// How long a bench measures.
///
/// `cargo bench` passes `--bench` to a `harness = false` target; `cargo test` (the bench
/// targets have `test = true`) passes nothing, so the same binary runs a short smoke pass
/// there, which keeps every bench compiling and working.
///
/// ```
/// use test_support::Mode;
/// assert_eq!(Mode::from_args_iter(["bin", "--bench"]), Mode::Full);
/// assert_eq!(Mode::from_args_iter(["bin"]), Mode::Smoke);
/// assert_eq!(Mode::Smoke.pick(20, 2), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `cargo bench`: the full measurement, judged against the targets.
    Full,
    /// `cargo test`: a short pass that proves the bench still runs; figures are not judged.
    Smoke,
}

impl Mode {
    /// The mode of this process, from its command-line arguments.
    pub fn from_args() -> Self {
        Self::from_args_iter(std::env::args())
    }

    /// The mode for the given arguments (`--bench` anywhere means [`Mode::Full`]).
    pub fn from_args_iter<I, S>(args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        if args.into_iter().any(|a| a.as_ref() == "--bench") {
            Mode::Full
        } else {
            Mode::Smoke
        }
    }

    /// `full` in a full run, `smoke` in a smoke run.
    pub fn pick<T>(self, full: T, smoke: T) -> T {
        match self {
            Mode::Full => full,
            Mode::Smoke => smoke,
        }
    }

    /// `"full"` or `"smoke"`, for the report header.
    pub fn name(self) -> &'static str {
        self.pick("full", "smoke")
    }

    /// Whether figures are judged against the targets (only in a full run: a smoke run is too
    /// short to mean anything).
    pub fn judged(self) -> bool {
        self == Mode::Full
    }
}

/// Runs `bench` with this process's [`Mode`] to completion on a current-thread runtime (one
/// thread: the figures are not spread over cores by the scheduler): the whole `main` of most
/// benches.
///
/// ```
/// test_support::mode::run_on_current_thread(|mode| async move {
///     assert_eq!(mode, test_support::Mode::from_args());
/// });
/// ```
pub fn run_on_current_thread<F, Fut>(bench: F)
where
    F: FnOnce(Mode) -> Fut,
    Fut: Future<Output = ()>,
{
    let mode = Mode::from_args();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime for the bench")
        .block_on(bench(mode));
}
