//! Service processes: how one is started, signalled, waited for, and what it printed.

use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use fault_tests::Backend;
use test_support::process::{self, Lines, Process, under_faketime};

/// The service binary built by cargo for this package.
pub const SERVICE: &str = env!("CARGO_BIN_EXE_fault-service");

/// A service command being put together.
pub struct Service {
    name: String,
    args: Vec<String>,
    faketime: Option<String>,
    env: Vec<(String, String)>,
}

impl Service {
    pub fn new(name: String, backend: &Backend, lock_table: &str, runs_table: &str) -> Self {
        let args = [
            "--backend",
            backend.kind(),
            "--lock-url",
            &backend.location(),
            "--lock-table",
            lock_table,
            "--runs-table",
            runs_table,
            "--instance",
            &name,
        ]
        .map(str::to_owned)
        .to_vec();
        Service {
            name,
            args,
            faketime: None,
            env: Vec::new(),
        }
    }

    /// Annotated jobs to run, by function name.
    pub fn jobs(self, jobs: &str) -> Self {
        self.arg("--jobs").arg(jobs)
    }

    /// Reaches the locks at `url` (e.g. through a proxy); the runs table stays direct.
    pub fn lock_url(mut self, url: &str) -> Self {
        let direct = value_after(&self.args, "--lock-url").to_owned();
        set_value(&mut self.args, "--lock-url", url);
        self.arg("--runs-url").arg(&direct)
    }

    pub fn arg(mut self, arg: &str) -> Self {
        self.args.push(arg.to_owned());
        self
    }

    /// Runs the service under `faketime -f <offset>` (wall clock only).
    pub fn faketime(mut self, offset: &str) -> Self {
        self.faketime = Some(offset.to_owned());
        self
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn spawn(self) -> Instance {
        let mut command = match &self.faketime {
            // A machine with a wrong wall clock still has a sane monotonic clock.
            Some(offset) => under_faketime(offset, SERVICE),
            None => Command::new(SERVICE),
        };
        command
            .args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        if !self.env.iter().any(|(k, _)| k == "RUST_LOG") {
            command.env("RUST_LOG", "info");
        }
        // FAULT_TESTS_LOGS=1 shows every instance's output, also when the test passes.
        let process =
            Process::spawn(self.name.clone(), &mut command).show_output_if("FAULT_TESTS_LOGS");
        Instance {
            name: self.name,
            stdout: process.stdout.clone(),
            stderr: process.stderr.clone(),
            process,
            wrapped: self.faketime.is_some(),
        }
    }
}

fn value_after<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args.iter().position(|a| a == flag).expect("flag present");
    &args[at + 1]
}

fn set_value(args: &mut [String], flag: &str, value: &str) {
    let at = args.iter().position(|a| a == flag).expect("flag present");
    args[at + 1] = value.to_owned();
}

/// A running (or exited) service process. Dropping it kills the process if it still runs,
/// and prints its output if the test is failing.
pub struct Instance {
    pub name: String,
    /// Killed (and its output shown if the test fails) when dropped.
    process: Process,
    /// Started by `faketime`, which runs the service as its child and does not forward
    /// signals: signals go to that child.
    wrapped: bool,
    pub stdout: Lines,
    pub stderr: Lines,
}

impl Instance {
    /// The service's process id (under `faketime`, the wrapper's child).
    pub fn pid(&self) -> u32 {
        let pid = self.process.id();
        if !self.wrapped {
            return pid;
        }
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_else(|e| panic!("{}: read the children of faketime: {e}", self.name));
        children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{}: faketime has no child process", self.name))
    }

    /// Waits for `READY`; returns the instance's own clock (Unix ms) at that moment.
    pub async fn ready(&mut self) -> i64 {
        let stdout = self.stdout.clone();
        let line = self
            .process
            .wait_for_line(&stdout, Duration::from_secs(20), "READY", |l| {
                l.starts_with("READY ")
            })
            .await;
        let clock = line.rsplit(' ').next().and_then(|c| c.parse().ok());
        clock.unwrap_or_else(|| panic!("{}: bad READY line {line:?}", self.name))
    }

    /// Waits for the `CLOCK` line printed after `READY`; returns the offset of this host's
    /// clock from the database's as `(Scheduler::clock_offset, the gauge)`, in ms.
    pub async fn clock_offset(&mut self) -> (f64, f64) {
        let stdout = self.stdout.clone();
        let line = self
            .process
            .wait_for_line(&stdout, Duration::from_secs(5), "CLOCK", |l| {
                l.starts_with("CLOCK ")
            })
            .await;
        let value = |key: &str| -> f64 {
            line.split(' ')
                .find_map(|part| part.strip_prefix(key))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{}: no {key} in {line:?}", self.name))
        };
        (value("offset_ms="), value("gauge_ms="))
    }

    /// Sends `SIGKILL`, `SIGSTOP`, `SIGCONT`, `SIGTERM`, ... by name (`KILL`, `STOP`, ...).
    pub fn signal(&self, signal: &str) {
        let pid = self.pid();
        assert!(process::signal(pid, signal), "kill -{signal} {pid} failed");
    }

    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.process.try_status()
    }

    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// Waits for the process to exit, up to `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.process.wait_exit(timeout).await
    }

    /// `SIGTERM`, then asserts a clean exit (code 0 within `timeout`, no panic); returns the
    /// `(errors, warnings)` the service counted.
    pub async fn stop(&mut self, timeout: Duration) -> (u64, u64) {
        self.signal("TERM");
        let status = self.wait_exit(timeout).await.unwrap_or_else(|| {
            panic!(
                "{} still running {timeout:?} after SIGTERM:\n{}",
                self.name,
                self.stderr.text()
            )
        });
        assert!(
            status.success(),
            "{} exited with {status} after SIGTERM:\n{}",
            self.name,
            self.stderr.text()
        );
        self.assert_no_panic();
        self.exit_counts()
            .unwrap_or_else(|| panic!("{}: no EXIT line", self.name))
    }

    /// The `EXIT errors=.. warnings=..` report.
    pub fn exit_counts(&self) -> Option<(u64, u64)> {
        let line = self.stdout.find(|l| l.starts_with("EXIT "))?;
        let number = |key: &str| {
            line.split(' ')
                .find_map(|part| part.strip_prefix(key))
                .and_then(|n| n.parse().ok())
        };
        Some((number("errors=")?, number("warnings=")?))
    }

    pub fn assert_no_panic(&self) {
        assert_eq!(
            self.stderr.count("panicked"),
            0,
            "{} panicked:\n{}",
            self.name,
            self.stderr.text()
        );
    }

    /// Log lines at ERROR level.
    pub fn error_lines(&self) -> Vec<String> {
        self.stderr
            .all()
            .into_iter()
            .filter(|l| l.contains(" ERROR "))
            .collect()
    }

    /// Waits until the log has a line containing `needle`; panics after `timeout`.
    pub async fn wait_for_log(&self, timeout: Duration, needle: &str) -> String {
        self.process.wait_for_log(timeout, needle).await
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // SIGKILL ends a stopped (SIGSTOP) process too; the service first, as faketime would
        // leave it running. Dropping `process` then kills faketime (or the service itself)
        // and shows the output of a failing test.
        if self.wrapped && self.process.is_running() {
            process::signal(self.pid(), "KILL");
        }
    }
}
