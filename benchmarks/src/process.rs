//! What this process costs the machine, read from `/proc` (Linux): CPU time, memory, wake-ups;
//! and the CPU a wall-clock window of work costs.

use std::sync::OnceLock;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// A snapshot of this process's resource use.
///
/// ```
/// let usage = benchmarks::process::Usage::now().expect("Linux /proc");
/// assert!(usage.rss_kib > 0 && usage.peak_rss_kib >= usage.rss_kib);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    /// User + system CPU time of the whole process (`/proc/self/stat`, in clock ticks, so
    /// 10 ms resolution at the usual 100 Hz).
    pub cpu: Duration,
    /// On-CPU time summed over the live threads (`/proc/self/task/*/schedstat`, nanosecond
    /// resolution; threads that already exited are not counted).
    pub thread_cpu: Duration,
    /// Voluntary + involuntary context switches summed over the live threads: how often the
    /// process's threads were woken (an idle process that polls would show them growing).
    pub context_switches: u64,
    /// Resident set size now (`VmRSS`).
    pub rss_kib: u64,
    /// Peak resident set size since the process started (`VmHWM`).
    pub peak_rss_kib: u64,
}

impl Usage {
    /// Reads the snapshot; `None` if `/proc` is not there or not in the expected format.
    pub fn now() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which may contain spaces) start at field 3 (state);
        // utime and stime are fields 14 and 15.
        let after = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        let cpu = Duration::from_secs_f64(ticks as f64 / clock_ticks_per_second() as f64);

        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let rss_kib = status_kib(&status, "VmRSS:")?;
        let peak_rss_kib = status_kib(&status, "VmHWM:")?;

        let mut thread_ns = 0u64;
        let mut context_switches = 0u64;
        for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
            let path = task.path();
            // A thread may exit between listing and reading: skip it.
            if let Ok(schedstat) = std::fs::read_to_string(path.join("schedstat")) {
                thread_ns += schedstat
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
            }
            if let Ok(status) = std::fs::read_to_string(path.join("status")) {
                context_switches += status_number(&status, "voluntary_ctxt_switches:").unwrap_or(0)
                    + status_number(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0);
            }
        }
        Some(Usage {
            cpu,
            thread_cpu: Duration::from_nanos(thread_ns),
            context_switches,
            rss_kib,
            peak_rss_kib,
        })
    }
}

impl Usage {
    /// The on-CPU time of the live threads since `self` was taken (see [`Usage::thread_cpu`]).
    ///
    /// ```
    /// let before = benchmarks::process::Usage::now().expect("Linux /proc");
    /// let spent = before.thread_cpu_since();
    /// assert!(spent < std::time::Duration::from_secs(60));
    /// ```
    pub fn thread_cpu_since(&self) -> Duration {
        Usage::now()
            .expect("/proc")
            .thread_cpu
            .saturating_sub(self.thread_cpu)
    }
}

/// Sleeps until the wall clock reads `at` (returns at once when it is past).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// benchmarks::process::sleep_until_wall(chrono::Utc::now()).await;
/// # }
/// ```
pub async fn sleep_until_wall(at: DateTime<Utc>) {
    tokio::time::sleep((at - Utc::now()).to_std().unwrap_or_default()).await;
}

/// The on-CPU time of this process's threads between the wall-clock instants `from` and
/// `until`, sleeping through both: what a window of scheduled work cost.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let now = chrono::Utc::now();
/// let cpu = benchmarks::process::thread_cpu_between(now, now + chrono::TimeDelta::milliseconds(10)).await;
/// assert!(cpu < std::time::Duration::from_secs(1));
/// # }
/// ```
pub async fn thread_cpu_between(from: DateTime<Utc>, until: DateTime<Utc>) -> Duration {
    sleep_until_wall(from).await;
    let before = Usage::now().expect("/proc");
    sleep_until_wall(until).await;
    before.thread_cpu_since()
}

fn status_number(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

fn status_kib(status: &str, key: &str) -> Option<u64> {
    status_number(status, key)
}

/// `sysconf(_SC_CLK_TCK)` without `unsafe`: asks `getconf`, falls back to Linux's usual 100.
fn clock_ticks_per_second() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}
