//! Idle cost: CPU time and memory of a scheduler holding 10,000 jobs of which none is due.
//!
//! `cargo bench -p benchmarks --bench idle_cost` measures 30 s per configuration; without
//! `--bench` (as under `cargo test`) a 2 s smoke pass.
//!
//! Each configuration (0, 100, 1,000 and 10,000 jobs) runs in its own child process (this
//! binary, re-executed with `--idle-child <jobs> <secs>`), so that peak RSS and CPU time are
//! that configuration's alone. A child starts a scheduler on the in-memory provider with sparse
//! jobs (daily and weekly crons at different times, fixed rates of about an hour), none due
//! during the measurement, waits a second, then measures over the window:
//! - CPU time of the process (`/proc/self/stat`) and of its threads (`schedstat`, ns);
//! - context switches of its threads: how often it woke (a polling loop would show here);
//! - resident memory after start and its peak (`VmHWM`).
//!
//! The 0-job configuration is the floor: the runtime alone. Growth from 100 to 10,000 jobs
//! shows whether anything polls per job (it should not: each job sleeps on one tokio timer).
//!
//! A last configuration holds 10,000 jobs with one and the same cron expression (services
//! that build a job per tenant or per feed at run time): they share one parsed schedule, and
//! are judged against their own, tighter memory target.

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use benchmarks::Mode;
use benchmarks::process::Usage;
use benchmarks::stats::verdict;
use chrono::{TimeDelta, Utc};
use lock_core::InMemoryLockProvider;
use lock_scheduler::{Job, Scheduler, Trigger};
use test_support::process::expect_success;

/// CPU over the window, in percent of one core, with 10,000 jobs.
const CPU_TARGET_PERCENT: f64 = 1.0;
/// Peak resident memory with 10,000 jobs, in MB (10^6 bytes).
const RSS_TARGET_MB: f64 = 100.0;
/// Peak resident memory with 10,000 jobs of one expression, in MB.
const SAME_RSS_TARGET_MB: f64 = 30.0;
/// The job set of a child: sparse schedules of their own, or one expression for all.
const SPARSE: &str = "sparse";
const SAME: &str = "same";
const CHILD_FLAG: &str = "--idle-child";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == CHILD_FLAG) {
        let jobs = args[at + 1].parse().expect("job count");
        let secs = args[at + 2].parse().expect("seconds");
        let same = args.get(at + 3).is_some_and(|kind| kind == SAME);
        child(jobs, secs, same);
        return;
    }
    parent(Mode::from_args());
}

/// One configuration's figures, as a child prints them on one line.
#[derive(Debug, Default)]
struct Report {
    jobs: usize,
    start_ms: f64,
    shutdown_ms: f64,
    cpu_ms: f64,
    thread_cpu_ms: f64,
    context_switches: u64,
    rss_after_start_kib: u64,
    peak_rss_kib: u64,
    fires: usize,
    secs: u64,
    /// Every job has the same cron expression.
    same: bool,
}

impl Report {
    fn to_line(&self) -> String {
        format!(
            "IDLE jobs={} start_ms={:.3} shutdown_ms={:.3} cpu_ms={:.3} thread_cpu_ms={:.3} \
             context_switches={} rss_after_start_kib={} peak_rss_kib={} fires={} secs={} same={}",
            self.jobs,
            self.start_ms,
            self.shutdown_ms,
            self.cpu_ms,
            self.thread_cpu_ms,
            self.context_switches,
            self.rss_after_start_kib,
            self.peak_rss_kib,
            self.fires,
            self.secs,
            self.same
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let mut report = Report::default();
        for field in line.strip_prefix("IDLE ")?.split_whitespace() {
            let (key, value) = field.split_once('=')?;
            match key {
                "jobs" => report.jobs = value.parse().ok()?,
                "start_ms" => report.start_ms = value.parse().ok()?,
                "shutdown_ms" => report.shutdown_ms = value.parse().ok()?,
                "cpu_ms" => report.cpu_ms = value.parse().ok()?,
                "thread_cpu_ms" => report.thread_cpu_ms = value.parse().ok()?,
                "context_switches" => report.context_switches = value.parse().ok()?,
                "rss_after_start_kib" => report.rss_after_start_kib = value.parse().ok()?,
                "peak_rss_kib" => report.peak_rss_kib = value.parse().ok()?,
                "fires" => report.fires = value.parse().ok()?,
                "secs" => report.secs = value.parse().ok()?,
                "same" => report.same = value.parse().ok()?,
                _ => return None,
            }
        }
        Some(report)
    }

    /// Thread CPU time over the window, in percent of one core.
    fn cpu_percent(&self) -> f64 {
        self.thread_cpu_ms / (self.secs as f64 * 1e3) * 100.0
    }

    fn peak_mb(&self) -> f64 {
        self.peak_rss_kib as f64 * 1024.0 / 1e6
    }
}

fn parent(mode: Mode) {
    let secs: u64 = mode.pick(30, 2);
    let configs: &[(usize, &str)] = mode.pick(
        &[
            (0, SPARSE),
            (100, SPARSE),
            (1_000, SPARSE),
            (10_000, SPARSE),
            (10_000, SAME),
        ],
        &[(0, SPARSE), (10_000, SPARSE), (10_000, SAME)],
    );
    let exe = std::env::current_exe().expect("own executable");
    let mut reports = Vec::new();
    for &(jobs, kind) in configs {
        let out = Command::new(&exe)
            .args([CHILD_FLAG, &jobs.to_string(), &secs.to_string(), kind])
            .output()
            .expect("run the child");
        let stdout = expect_success(&out, &format!("child with {jobs} jobs"));
        let report = stdout
            .lines()
            .find_map(Report::parse)
            .unwrap_or_else(|| panic!("no report from the child with {jobs} jobs:\n{stdout}"));
        reports.push(report);
    }

    println!(
        "idle_cost ({} run): sparse jobs on the in-memory provider, none due, {secs} s window per \
         configuration, one child process each, multi-thread runtime",
        mode.name()
    );
    println!(
        "  {:>6} {:>6}  {:>9}  {:>10}  {:>10}  {:>11}  {:>9}  {:>12}  {:>11}  {:>8}  {:>5}",
        "jobs",
        "cron",
        "start ms",
        "CPU ms",
        "stat ms",
        "% of a core",
        "wake-ups",
        "RSS after MB",
        "peak RSS MB",
        "KB/job",
        "fires"
    );
    let floor_kib = reports
        .iter()
        .find(|r| r.jobs == 0)
        .map_or(0, |r| r.rss_after_start_kib);
    for r in &reports {
        let per_job = if r.jobs == 0 {
            String::from("-")
        } else {
            format!(
                "{:.2}",
                (r.rss_after_start_kib.saturating_sub(floor_kib)) as f64 * 1.024 / r.jobs as f64
            )
        };
        println!(
            "  {:>6} {:>6}  {:>9.1}  {:>10.2}  {:>10.0}  {:>10.3}%  {:>9}  {:>12.1}  {:>11.1}  {:>8}  {:>5}",
            r.jobs,
            if r.same { SAME } else { SPARSE },
            r.start_ms,
            r.thread_cpu_ms,
            r.cpu_ms,
            r.cpu_percent(),
            r.context_switches,
            r.rss_after_start_kib as f64 * 1024.0 / 1e6,
            r.peak_mb(),
            per_job,
            r.fires
        );
    }
    let largest = reports
        .iter()
        .rfind(|r| !r.same)
        .expect("a sparse configuration");
    println!(
        "  (CPU = on-CPU time of the threads over the window (schedstat, ns); stat = the same from \
         /proc/self/stat (10 ms ticks); wake-ups = the threads' context switches; shutdown of {} \
         jobs took {:.1} ms)",
        largest.jobs, largest.shutdown_ms
    );
    println!(
        "target: {} jobs idle CPU < {CPU_TARGET_PERCENT}% of one core: {:.3}%, {}",
        largest.jobs,
        largest.cpu_percent(),
        verdict(largest.cpu_percent() < CPU_TARGET_PERCENT, mode.judged())
    );
    println!(
        "target: {} jobs peak RSS < {RSS_TARGET_MB} MB: {:.1} MB, {}",
        largest.jobs,
        largest.peak_mb(),
        verdict(largest.peak_mb() < RSS_TARGET_MB, mode.judged())
    );
    if let Some(same) = reports.iter().find(|r| r.same) {
        println!(
            "target: {} jobs of one expression idle CPU < {CPU_TARGET_PERCENT}% of one core: {:.3}%, {}",
            same.jobs,
            same.cpu_percent(),
            verdict(same.cpu_percent() < CPU_TARGET_PERCENT, mode.judged())
        );
        println!(
            "target: {} jobs of one expression peak RSS < {SAME_RSS_TARGET_MB} MB: {:.1} MB, {}",
            same.jobs,
            same.peak_mb(),
            verdict(same.peak_mb() < SAME_RSS_TARGET_MB, mode.judged())
        );
    }
    assert!(
        reports.iter().all(|r| r.fires == 0),
        "a job fired during the idle window: the schedules are not sparse enough"
    );
}

/// A sparse trigger for job `i` whose next fire is after `quiet_until`.
fn sparse_trigger(i: usize, quiet_until: chrono::DateTime<Utc>) -> Trigger {
    let now = Utc::now();
    for attempt in 0..48 {
        let trigger = match i % 3 {
            // Daily at a time of its own.
            0 => Trigger::cron(&format!(
                "{} {} {} * * *",
                i % 60,
                (i / 60) % 60,
                (i / 3600 + attempt) % 24
            )),
            // Weekly, on a day of its own.
            1 => Trigger::cron(&format!(
                "{} {} {} * * {}",
                i % 60,
                (i / 60) % 60,
                attempt % 24,
                ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"][i % 7]
            )),
            // About hourly: periods of 1 h plus a few seconds, so slots spread out.
            _ => Trigger::fixed_rate(Duration::from_secs(
                3600 + (i as u64 % 600) + attempt as u64,
            )),
        }
        .expect("a valid trigger");
        if trigger
            .next_slot(now)
            .is_some_and(|next| next.instant() > quiet_until)
        {
            return trigger;
        }
    }
    panic!("no quiet trigger found for job {i}");
}

/// One cron expression for every job, firing once a day at a time at least an hour away.
fn same_trigger(quiet_until: chrono::DateTime<Utc>) -> Trigger {
    use chrono::Timelike;
    let hour = (quiet_until.hour() + 12) % 24;
    Trigger::cron(&format!("0 0 {hour} * * *")).expect("a valid trigger")
}

fn child(jobs: usize, secs: u64, same: bool) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let report = runtime.block_on(async {
        let fires = Arc::new(AtomicUsize::new(0));
        // Nothing may fire from start to the end of the window, with a margin.
        let quiet_until = Utc::now() + TimeDelta::seconds(secs as i64 + 120);
        let list: Vec<Job> = (0..jobs)
            .map(|i| {
                let fires = fires.clone();
                Job::new(
                    format!("idle-{i:05}"),
                    if same {
                        same_trigger(quiet_until)
                    } else {
                        sparse_trigger(i, quiet_until)
                    },
                    move || {
                        fires.fetch_add(1, Ordering::Relaxed);
                        async {}
                    },
                )
            })
            .collect();
        let started = Instant::now();
        let scheduler = Scheduler::builder()
            .lock_provider(InMemoryLockProvider::new())
            .instance_id("idle-cost")
            .jobs(list)
            .start()
            .await
            .expect("start");
        let start_ms = started.elapsed().as_secs_f64() * 1e3;
        // Let every job loop compute its first slot and go to sleep.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let before = Usage::now().expect("/proc");
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let after = Usage::now().expect("/proc");
        let stopping = Instant::now();
        scheduler.shutdown().await.expect("shutdown");
        Report {
            jobs,
            start_ms,
            shutdown_ms: stopping.elapsed().as_secs_f64() * 1e3,
            cpu_ms: after.cpu.saturating_sub(before.cpu).as_secs_f64() * 1e3,
            thread_cpu_ms: after
                .thread_cpu
                .saturating_sub(before.thread_cpu)
                .as_secs_f64()
                * 1e3,
            context_switches: after
                .context_switches
                .saturating_sub(before.context_switches),
            rss_after_start_kib: before.rss_kib,
            peak_rss_kib: after.peak_rss_kib,
            fires: fires.load(Ordering::Relaxed),
            secs,
            same,
        }
    });
    println!("{}", report.to_line());
}
