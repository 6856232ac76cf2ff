//! Child processes of a test: started with their output captured, killed when the test ends,
//! signalled, waited for; plus the output of a finished command as text, free ports, and
//! waiting for a condition.

use std::future::Future;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a finished command wrote to stdout, as text.
///
/// ```
/// let output = std::process::Command::new("cargo").arg("--version").output().unwrap();
/// assert!(test_support::process::stdout(&output).starts_with("cargo "));
/// ```
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// What a finished command wrote to stderr, as text.
///
/// ```
/// let output = std::process::Command::new("cargo").arg("--version").output().unwrap();
/// assert!(test_support::process::stderr(&output).is_empty());
/// ```
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts that a finished command succeeded, showing `what`, its status and both streams
/// when it did not; returns its stdout.
///
/// ```
/// let output = std::process::Command::new("cargo").arg("--version").output().unwrap();
/// let stdout = test_support::process::expect_success(&output, "cargo --version");
/// assert!(stdout.starts_with("cargo "));
/// ```
pub fn expect_success(output: &Output, what: &str) -> String {
    let out = stdout(output);
    assert!(
        output.status.success(),
        "{what} failed: {}\n{out}\n{}",
        output.status,
        stderr(output)
    );
    out
}

/// Runs `program` with `args` to its end; returns whether it succeeded and its stdout and
/// stderr (in that order, on separate lines) as one text to search and to show.
///
/// ```
/// let (ok, text) = test_support::process::run_to_end("cargo", &["--version"]);
/// assert!(ok && text.contains("cargo "));
/// ```
pub fn run_to_end(program: &str, args: &[&str]) -> (bool, String) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    let text = format!("{}\n{}", stdout(&output), stderr(&output));
    (output.status.success(), text)
}

/// `faketime -f <offset> <program>`: `program` under a wall clock `offset` away (`+10m`,
/// `-3h`), with the monotonic clock left alone (timers keep working as they should). The
/// Debian package `faketime` provides the command; check with
/// [`crate::skip::command_available`] first.
///
/// ```
/// let command = test_support::process::under_faketime("+10m", "date");
/// assert_eq!(command.get_program(), "faketime");
/// ```
pub fn under_faketime(offset: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut command = Command::new("faketime");
    command.args(["-f", offset]).arg(program);
    command.env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    command
}

/// A TCP port nobody listens on right now (the caller's child binds it a moment later),
/// below the kernel's range of local ports for outgoing connections
/// (`net.ipv4.ip_local_port_range`, 32768 and up by default).
///
/// Why not the kernel's pick (`bind` to port 0): that port is in the outgoing range, so while
/// a private server is down for a restart on it, any connection any process opens may take it
/// as its local port, and the server cannot bind it again (seen: a private Redis restarted in
/// the chaos suite never answered). A port below the range is never taken that way.
///
/// ```
/// let port = test_support::process::free_port();
/// assert!(port >= 10_000);
/// assert!(std::net::TcpListener::bind(("127.0.0.1", port)).is_ok());
/// ```
pub fn free_port() -> u16 {
    use std::hash::{BuildHasher, Hasher};
    let first_local = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let (low, high) = (10_000u16, first_local.max(10_001));
    for attempt in 0u32..1000 {
        // A different start in each process and call: parallel test processes rarely pick
        // the same port.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.write_u32(attempt);
        let port = low + (hasher.finish() % u64::from(high - low)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

/// Sends `signal` by name (`KILL`, `STOP`, `CONT`, `TERM`, ...) to process `pid` with `kill`;
/// returns whether `kill` succeeded.
///
/// ```
/// let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
/// assert!(test_support::process::signal(child.id(), "KILL"));
/// assert!(!child.wait().unwrap().success());
/// ```
pub fn signal(pid: u32, signal: &str) -> bool {
    Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .is_ok_and(|status| status.success())
}

/// Calls `probe` every 100 ms until it returns `Some`; panics naming `what` after `timeout`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// let mut calls = 0;
/// let found = test_support::process::eventually(Duration::from_secs(5), "the third call", || {
///     calls += 1;
///     let now = calls;
///     async move { (now == 3).then_some(now) }
/// })
/// .await;
/// assert_eq!(found, 3);
/// # }
/// ```
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(found) = probe().await {
            return found;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The lines a stream printed so far, read by a thread of their own.
///
/// ```
/// let lines = test_support::process::Lines::capture(&b"one\ntwo\n"[..]);
/// # std::thread::sleep(std::time::Duration::from_millis(100));
/// assert_eq!(lines.count("o"), 2);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    /// Starts a thread that reads `stream` line by line until it ends.
    pub fn capture(stream: impl Read + Send + 'static) -> Self {
        let lines = Lines::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                sink.0.lock().unwrap_or_else(|p| p.into_inner()).push(line);
            }
        });
        lines
    }

    /// Every line so far.
    pub fn all(&self) -> Vec<String> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Every line so far, joined by newlines.
    pub fn text(&self) -> String {
        self.all().join("\n")
    }

    /// How many lines so far contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.all().iter().filter(|l| l.contains(needle)).count()
    }

    /// The first line so far that `matches` accepts.
    pub fn find(&self, matches: impl Fn(&str) -> bool) -> Option<String> {
        self.all().into_iter().find(|l| matches(l))
    }

    /// Polls every 50 ms for a line that `matches` accepts; `None` after `timeout`.
    pub async fn wait_for(
        &self,
        timeout: Duration,
        matches: impl Fn(&str) -> bool,
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(line) = self.find(&matches) {
                return Some(line);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A child process with its stdout and stderr captured line by line. Dropping it kills the
/// process if it still runs, and prints its output if the test is failing (or always, when
/// the variable given to [`Process::show_output_if`] is set).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use std::time::Duration;
/// let mut command = std::process::Command::new("echo");
/// command.arg("READY 42");
/// let mut process = test_support::process::Process::spawn("echo", &mut command);
/// let status = process.wait_exit(Duration::from_secs(5)).await.expect("echo exits");
/// assert!(status.success());
/// assert_eq!(process.stdout.text(), "READY 42");
/// # }
/// ```
#[derive(Debug)]
pub struct Process {
    /// The name the test gives it, in panic messages and logs.
    pub name: String,
    child: Child,
    /// Its stdout so far.
    pub stdout: Lines,
    /// Its stderr so far.
    pub stderr: Lines,
    status: Option<ExitStatus>,
    show_output_var: Option<&'static str>,
}

impl Process {
    /// Starts `command` with stdin closed and stdout and stderr piped into [`Lines`];
    /// panics if it cannot be started.
    pub fn spawn(name: impl Into<String>, command: &mut Command) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {:?}: {e}", command.get_program()));
        let stdout = Lines::capture(child.stdout.take().expect("piped stdout"));
        let stderr = Lines::capture(child.stderr.take().expect("piped stderr"));
        Process {
            name: name.into(),
            child,
            stdout,
            stderr,
            status: None,
            show_output_var: None,
        }
    }

    /// Also prints the output on drop when the environment variable `var` is set (a passing
    /// test's processes are otherwise silent).
    pub fn show_output_if(mut self, var: &'static str) -> Self {
        self.show_output_var = Some(var);
        self
    }

    /// The process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The exit status, once it has exited.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("poll the child");
        }
        self.status
    }

    /// Whether it still runs.
    pub fn is_running(&mut self) -> bool {
        self.try_status().is_none()
    }

    /// Waits for the process to exit, up to `timeout`; `None` if it still runs then.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_status() {
                // Let the reader threads take the last lines.
                tokio::time::sleep(Duration::from_millis(50)).await;
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until its stderr has a line containing `needle`; panics after `timeout`.
    pub async fn wait_for_log(&self, timeout: Duration, needle: &str) -> String {
        let found = self.stderr.wait_for(timeout, |l| l.contains(needle)).await;
        found.unwrap_or_else(|| {
            panic!(
                "{}: no log line with {needle:?} after {timeout:?}:\n{}",
                self.name,
                self.stderr.text()
            )
        })
    }

    /// Waits until a line of `lines` (its [`Process::stdout`] or [`Process::stderr`]) is
    /// accepted by `matches`; panics naming `what`, with its stderr, if the process exits
    /// first or after `timeout`.
    pub async fn wait_for_line(
        &mut self,
        lines: &Lines,
        timeout: Duration,
        what: &str,
        matches: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let poll = Duration::from_millis(50);
            if let Some(line) = lines.wait_for(poll, &matches).await {
                return line;
            }
            if let Some(status) = self.try_status() {
                panic!(
                    "{} exited before {what} ({status}):\n{}",
                    self.name,
                    self.stderr.text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "{} not {what} after {timeout:?}:\n{}",
                self.name,
                self.stderr.text()
            );
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            // SIGKILL ends a stopped (SIGSTOP) process too.
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let asked = self
            .show_output_var
            .is_some_and(|var| std::env::var_os(var).is_some());
        if std::thread::panicking() || asked {
            eprintln!(
                "----- {} (pid {}) stdout -----\n{}\n----- {} stderr -----\n{}\n-----",
                self.name,
                self.child.id(),
                self.stdout.text(),
                self.name,
                self.stderr.text()
            );
        }
    }
}

/// A child process killed (and reaped) when the test ends, passed or failed, for a child
/// whose output the test does not read.
///
/// ```
/// let child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
/// let running = test_support::process::KillOnDrop(child);
/// drop(running); // killed here
/// ```
#[derive(Debug)]
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
