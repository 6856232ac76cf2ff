//! Runs the `metrics_prometheus` example and scrapes its `/metrics` endpoint over HTTP, as
//! Prometheus would, checking the scheduler's counters, gauge and histograms after some fires.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// Kills the example when the test ends, passed or failed.
use test_support::http::get;
use test_support::process::{KillOnDrop as Running, free_port};

/// Every sample of a Prometheus text exposition, keyed by series (`name{labels}`).
fn samples(body: &str) -> BTreeMap<String, f64> {
    body.lines()
        .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse().ok()?))
        })
        .collect()
}

fn value(samples: &BTreeMap<String, f64>, series: &str) -> f64 {
    *samples
        .get(series)
        .unwrap_or_else(|| panic!("no sample {series} in the scrape:\n{samples:#?}"))
}

#[test]
fn the_example_serves_scheduler_metrics_for_prometheus() {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_metrics_prometheus"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--seconds", "60"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the metrics_prometheus example");
    let mut running = Running(child);

    // tick fires every 200 ms, flaky_export every second: wait for a few of each.
    let deadline = Instant::now() + Duration::from_secs(20);
    let (body, samples) = loop {
        if let Some(status) = running.0.try_wait().expect("poll the example") {
            panic!("the example exited early: {status}");
        }
        if let Ok((200, body)) = get(("127.0.0.1", port), "/metrics") {
            let samples = samples(&body);
            let get = |s: &str| samples.get(s).copied().unwrap_or(0.0);
            if get(r#"scheduled_lock_acquired_total{scheduled_job="tick"}"#) >= 3.0
                && get(r#"scheduled_lock_acquired_total{scheduled_job="flaky_export"}"#) >= 2.0
            {
                break (body, samples);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no scrape with 3 tick and 2 flaky_export fires within 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    };

    for job in ["tick", "flaky_export"] {
        let series = |name: &str| format!("{name}{{scheduled_job=\"{job}\"}}");
        let attempts = value(&samples, &series("scheduled_lock_attempts_total"));
        let acquired = value(&samples, &series("scheduled_lock_acquired_total"));
        let skipped = value(&samples, &series("scheduled_lock_skipped_total"));
        // Two instances try every fire; exactly one of them runs it.
        assert!(attempts >= 3.0, "{job}: {attempts} attempts\n{body}");
        assert!(acquired >= 2.0, "{job}: {acquired} acquired\n{body}");
        assert!(skipped >= 1.0, "{job}: {skipped} skipped\n{body}");
        // A scrape may fall between an attempt and its result, never the other way round.
        assert!(
            attempts >= acquired + skipped,
            "{job}: {attempts} attempts < {acquired} acquired + {skipped} skipped\n{body}"
        );
        assert_eq!(value(&samples, &series("scheduled_lock_errors_total")), 0.0);
        assert_eq!(value(&samples, &series("scheduled_lock_lost_total")), 0.0);
        let active = value(&samples, &series("scheduled_job_active"));
        assert!((0.0..=1.0).contains(&active), "{job}: {active} active");
        // Every run that finished has a duration, the failing job's included.
        let durations = value(&samples, &series("scheduled_job_duration_seconds_count"));
        assert!(
            durations >= acquired - 1.0 && durations <= acquired,
            "{job}: {durations} durations for {acquired} runs\n{body}"
        );
        let lags = value(&samples, &series("scheduled_job_fire_lag_seconds_count"));
        assert!(
            lags >= 2.0,
            "{job}: {lags} lags for {attempts} attempts\n{body}"
        );
        // Real histograms (buckets), which can be summed across instances.
        assert!(
            samples.contains_key(&format!(
                "scheduled_job_fire_lag_seconds_bucket{{scheduled_job=\"{job}\",le=\"+Inf\"}}"
            )),
            "{body}"
        );
    }
    assert!(
        value(
            &samples,
            r#"scheduled_lock_acquired_total{scheduled_job="tick"}"#
        ) >= 3.0,
        "{body}"
    );
    // Every finished run of the failing job is a failure; the healthy job has none.
    let failures = value(
        &samples,
        r#"scheduled_job_failures_total{scheduled_job="flaky_export"}"#,
    );
    let flaky_runs = value(
        &samples,
        r#"scheduled_lock_acquired_total{scheduled_job="flaky_export"}"#,
    );
    assert!(
        failures >= flaky_runs - 1.0 && failures >= 1.0,
        "{failures} failures for {flaky_runs} runs\n{body}"
    );
    assert_eq!(
        value(
            &samples,
            r#"scheduled_job_failures_total{scheduled_job="tick"}"#
        ),
        0.0,
        "{body}"
    );
    // The failing job takes its 20 ms sleep before failing: its durations show real runs.
    let flaky_sum = value(
        &samples,
        r#"scheduled_job_duration_seconds_sum{scheduled_job="flaky_export"}"#,
    );
    let flaky_count = value(
        &samples,
        r#"scheduled_job_duration_seconds_count{scheduled_job="flaky_export"}"#,
    );
    assert!(
        flaky_sum / flaky_count >= 0.019,
        "flaky_export mean duration {} s\n{body}",
        flaky_sum / flaky_count
    );
    // The last success: a recent Unix time for the job that succeeds, no series at all for
    // the one that never does (not a 0, which would read as "last success in 1970").
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let last = value(
        &samples,
        r#"scheduled_job_last_success_timestamp_seconds{scheduled_job="tick"}"#,
    );
    assert!(
        (now - 30.0..=now + 1.0).contains(&last),
        "{last} vs now {now}"
    );
    assert!(
        !body.contains(
            r#"scheduled_job_last_success_timestamp_seconds{scheduled_job="flaky_export"}"#
        ),
        "{body}"
    );
    drop(running);
}
