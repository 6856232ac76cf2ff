//! The Jobs page's "most failing" chart: the jobs whose newest run failed, longest without a
//! success first (never succeeded before all), one bar each as long as that time.
//!
//! Decisions, and why:
//! - **From what the page reads already**: each job's newest run and its last success (one
//!   grouped read each, `OperatorStore::last_runs` and `last_successes`), so the chart adds
//!   no query. It ranks by how long a job has been without a success, not by a count of
//!   failures in a window: a count per job would need a new store query on every provider,
//!   and "failing for 3 hours" is what an operator acts on first. The page says so.
//! - **Failing** is the Jobs page's rule (`read::failing`): the newest run failed, panicked,
//!   lost its lock or never ended. A job whose newest run is still going is not in the chart
//!   until that run ends, since the page does not read the run before it.
//! - At most [`SHOWN`] bars; the page says how many failing jobs there are.

use chrono::{DateTime, Utc};
use lock_cluster::JobView;
use maud::{Markup, html};

use super::{WIDTH, at};
use crate::format::{shown, span_ms};
use crate::read;

/// How many failing jobs the chart shows.
pub(crate) const SHOWN: usize = 10;

const ROW: f64 = 18.0;
/// Room on the left for the job's name.
const NAMES: f64 = 150.0;

/// The failing jobs of `jobs`, longest without a success first: never succeeded first (by
/// name), then by the last success, oldest first.
pub(crate) fn most_failing<'a>(jobs: &[&'a JobView]) -> Vec<&'a JobView> {
    let mut failing: Vec<&JobView> = jobs
        .iter()
        .copied()
        .filter(|job| read::failing(job))
        .collect();
    // None (never) sorts before every time.
    failing.sort_by_key(|job| (job.last_success, job.name.as_str()));
    failing
}

/// The chart of `failing` (as [`most_failing`] orders them) at the database's `now`; nothing
/// when no job is failing.
pub(crate) fn chart(failing: &[&JobView], now: DateTime<Utc>) -> Markup {
    if failing.is_empty() {
        return html! {};
    }
    let shown_jobs = &failing[..failing.len().min(SHOWN)];
    let since = |job: &JobView| {
        job.last_success
            .map(|at| (now - at).num_milliseconds().max(0))
    };
    let longest = shown_jobs
        .iter()
        .filter_map(|job| since(job))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let height = ROW * shown_jobs.len() as f64 + 4.0;
    // Room on the right for the bar's figure ("59 min 59 s").
    let plot = WIDTH - NAMES - 70.0;
    html! {
        figure.chart.failing #chart-most-failing {
            figcaption {
                "Most failing: longest without a success first"
                span.muted { " · " (failing.len()) " failing" @if failing.len() > SHOWN { ", the first " (SHOWN) " shown" }
                    " · from each job's newest run and last success" }
            }
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (at(height)) } role="img"
                aria-label="Failing jobs, longest without a success first" {
                @for (i, job) in shown_jobs.iter().enumerate() {
                    @let y = 2.0 + i as f64 * ROW;
                    @let (length, short, text) = match since(job) {
                        Some(ms) => (ms as f64 / longest * plot, span_ms(ms), format!("{} without a success", span_ms(ms))),
                        None => (plot, "never".to_owned(), "never succeeded".to_owned()),
                    };
                    text.name x=(at(NAMES - 4.0)) y=(at(y + ROW * 0.7)) text-anchor="end" { (truncate(&job.name)) }
                    rect class=(if job.last_success.is_none() { "bar bad never" } else { "bar bad" })
                        x=(at(NAMES)) y=(at(y + 2.0)) width=(at(length.max(1.0))) height=(at(ROW - 5.0)) {
                        title {
                            (job.name) ": " (text)
                            @if let Some(at) = job.last_success { " (last success " (shown(at)) ")" }
                        }
                    }
                    text x=(at(NAMES + length.max(1.0) + 4.0)) y=(at(y + ROW * 0.7)) { (short) }
                }
            }
            ol #most-failing {
                @for job in shown_jobs {
                    li data-job=(job.name) {
                        (job.name) ": "
                        @match job.last_success {
                            Some(last) => { (span_ms((now - last).num_milliseconds().max(0))) " without a success (the last " (shown(last)) ")" }
                            None => { "never succeeded" }
                        }
                    }
                }
            }
        }
    }
}

/// A name cut to fit the chart's name column (the list under it has it whole).
fn truncate(name: &str) -> String {
    const KEEP: usize = 24;
    if name.chars().count() <= KEEP {
        name.to_owned()
    } else {
        let mut cut: String = name.chars().take(KEEP - 1).collect();
        cut.push('…');
        cut
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeDelta, TimeZone};
    use lock_cluster::{RunRecord, RunState};
    use lock_core::FireKind;

    fn job(name: &str, last: RunState, success_ago_s: Option<i64>, now: DateTime<Utc>) -> JobView {
        JobView {
            name: name.to_owned(),
            lock_name: Some(name.to_owned()),
            trigger: Some("every 1s".to_owned()),
            zone: None,
            next_fire: None,
            paused: false,
            live_instances: Vec::new(),
            last_run: Some(RunRecord {
                id: 1,
                job: name.to_owned(),
                slot: None,
                fire_kind: FireKind::Scheduled,
                instance_id: "a".to_owned(),
                fence: 1,
                started_at: now,
                ended_at: Some(now),
                outcome: last,
                error: None,
                attempt: 1,
                cancel_requested: false,
                params: Default::default(),
            }),
            last_success: success_ago_s.map(|s| now - TimeDelta::seconds(s)),
            missed: false,
            pending_triggers: 0,
        }
    }

    #[test]
    fn never_succeeded_first_then_longest_without_a_success() {
        let now = Utc.with_ymd_and_hms(2026, 1, 2, 3, 0, 0).unwrap();
        let jobs = [
            job("ok", RunState::Succeeded, Some(1), now),
            job("recent", RunState::Failed, Some(60), now),
            job("<b>old</b>", RunState::Panicked, Some(3600), now),
            job("zz-never", RunState::Failed, None, now),
            job("a-never", RunState::Failed, None, now),
        ];
        let refs: Vec<&JobView> = jobs.iter().collect();
        let order: Vec<&str> = most_failing(&refs)
            .iter()
            .map(|j| j.name.as_str())
            .collect();
        assert_eq!(order, ["a-never", "zz-never", "<b>old</b>", "recent"]);
        let html = chart(&most_failing(&refs), now).into_string();
        assert!(html.contains("4 failing"), "{html}");
        assert!(html.contains("60 min 0 s without a success"), "{html}");
        assert!(html.contains("never succeeded"), "{html}");
        assert!(
            html.contains("&lt;b&gt;old&lt;/b&gt;") && !html.contains("<b>"),
            "{html}"
        );
        assert!(!html.contains("style="), "{html}");
        assert_eq!(chart(&[], now).into_string(), "");
    }

    #[test]
    fn at_most_ten_bars_and_the_page_says_so() {
        let now = Utc.with_ymd_and_hms(2026, 1, 2, 3, 0, 0).unwrap();
        let jobs: Vec<JobView> = (0..12)
            .map(|i| job(&format!("job-{i:02}"), RunState::Failed, Some(i), now))
            .collect();
        let refs: Vec<&JobView> = jobs.iter().collect();
        let html = chart(&most_failing(&refs), now).into_string();
        assert_eq!(html.matches("<li ").count(), SHOWN);
        assert!(html.contains("12 failing, the first 10 shown"), "{html}");
        assert_eq!(truncate(&"x".repeat(30)).chars().count(), 24);
    }
}
