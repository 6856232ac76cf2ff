//! The Job page's charts over the job's newest runs ([`WINDOW_RUNS`](super::WINDOW_RUNS) at
//! most): each run over time by outcome, the duration distribution with p50 and p95, the
//! success rate over the window and per time bucket, and the lock wait (slot to start) with
//! p50 and p95.

use lock_cluster::{RunState, RunView};
use maud::{Markup, html};

use super::stats::{Rate, Spread, bucket_of, buckets};
use super::{BOTTOM, HEIGHT, TOP, WIDTH, at};
use crate::format::{shown, span_ms};
use crate::read::{duration_ms, lag_ms};

/// How many time buckets the success-rate chart splits the window into.
const RATE_BUCKETS: usize = 12;

/// The four charts of `runs` (newest first, as the history reads), for job `job`.
pub(crate) fn charts(job: &str, runs: &[RunView]) -> Markup {
    let chronological: Vec<&RunView> = runs.iter().rev().collect();
    html! {
        div.charts #job-charts {
            (timeline(job, &chronological))
            (distribution(
                "durations",
                &format!("Durations of job {job}'s ended runs, shortest first, with p50 and p95"),
                "Duration",
                "ended runs",
                chronological.iter().filter_map(|run| Some((duration_ms(run)?, *run))).collect(),
            ))
            (success_rate(job, &chronological))
            (distribution(
                "lock-wait",
                &format!("Lock wait of job {job}'s runs (slot to start), shortest first, with p50 and p95"),
                "Lock wait (slot to start)",
                "runs with a slot",
                chronological.iter().filter_map(|run| Some((lag_ms(run)?, *run))).collect(),
            ))
        }
    }
}

/// Whether an outcome is drawn as bad (red): the run did not do its work.
fn bad(outcome: RunState) -> bool {
    !matches!(
        outcome,
        RunState::Succeeded | RunState::Running | RunState::Skipped | RunState::Cancelled
    )
}

/// A mark's classes: its outcome (the colour), and `bad` for a run that did not do its work.
fn classes(kind: &str, outcome: RunState) -> String {
    if bad(outcome) {
        format!("{kind} {} bad", outcome.as_str())
    } else {
        format!("{kind} {}", outcome.as_str())
    }
}

/// Each run as a tick at its start, coloured by outcome; the legend counts each outcome.
fn timeline(job: &str, runs: &[&RunView]) -> Markup {
    let label = format!("Runs of job {job} over time, coloured by outcome");
    let (Some(first), Some(last)) = (runs.first(), runs.last()) else {
        return empty("timeline", "Runs over time", "no run yet");
    };
    let (first, last) = (first.started_at, last.started_at);
    let span = (last - first).num_milliseconds().max(1) as f64;
    let plot = HEIGHT - TOP - BOTTOM;
    let mut counts: Vec<(RunState, usize)> = Vec::new();
    for run in runs {
        match counts.iter_mut().find(|(state, _)| *state == run.outcome) {
            Some((_, n)) => *n += 1,
            None => counts.push((run.outcome, 1)),
        }
    }
    counts.sort_by_key(|(state, n)| (std::cmp::Reverse(*n), state.as_str()));
    html! {
        figure.chart #chart-timeline {
            figcaption { "Runs over time" }
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img" aria-label=(label) {
                line x1="0" y1=(HEIGHT - BOTTOM) x2=(WIDTH) y2=(HEIGHT - BOTTOM) {}
                @for run in runs {
                    @let x = 2.0 + (run.started_at - first).num_milliseconds() as f64 / span * (WIDTH - 7.0);
                    rect class=(classes("mark", run.outcome)) x=(at(x)) y=(at(TOP)) width="3" height=(at(plot)) {
                        title { "run " (run.id) " at " (shown(run.started_at)) ": " (run.outcome) }
                    }
                }
                text x="2" y=(HEIGHT - 3.0) { (shown(first)) }
                text x=(WIDTH - 2.0) y=(HEIGHT - 3.0) text-anchor="end" { (shown(last)) }
            }
            ul.legend {
                @for (state, n) in &counts {
                    li { span class={ "swatch " (state.as_str()) } {} (state.as_str()) " " (n) }
                }
            }
        }
    }
}

/// `values` (with their runs) sorted as bars, with a line at p50 and one at p95.
fn distribution(
    id: &str,
    label: &str,
    caption: &str,
    what: &str,
    mut values: Vec<(i64, &RunView)>,
) -> Markup {
    values.sort_by_key(|(value, run)| (*value, run.id));
    let sorted: Vec<i64> = values.iter().map(|(value, _)| (*value).max(0)).collect();
    let Some(spread) = Spread::of_sorted(&sorted) else {
        return empty(id, caption, &format!("no {what} yet"));
    };
    let max = spread.max.max(1) as f64;
    let plot = HEIGHT - TOP - BOTTOM;
    let base = HEIGHT - BOTTOM;
    let y = |value: i64| base - value as f64 / max * plot;
    let slot = WIDTH / values.len() as f64;
    html! {
        figure.chart id={ "chart-" (id) } {
            figcaption { (caption) }
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img" aria-label=(label) {
                line x1="0" y1=(at(base)) x2=(WIDTH) y2=(at(base)) {}
                @for (i, (value, run)) in values.iter().enumerate() {
                    @let height = (base - y((*value).max(0))).max(1.0);
                    rect class=(classes("bar", run.outcome))
                        x=(at(i as f64 * slot + slot * 0.1)) y=(at(base - height))
                        width=(at((slot * 0.8).max(0.5))) height=(at(height)) {
                        title { "run " (run.id) " (" (run.outcome) "): " (span_ms(*value)) }
                    }
                }
                (percentile_line("p50", spread.p50, y(spread.p50)))
                (percentile_line("p95", spread.p95, y(spread.p95)))
                text x="2" y="10" { "max " (span_ms(spread.max)) }
            }
            p.numbers {
                "p50 " (span_ms(spread.p50)) " · p95 " (span_ms(spread.p95))
                " · max " (span_ms(spread.max)) " · " (spread.count) " " (what)
            }
        }
    }
}

fn percentile_line(name: &str, value: i64, y: f64) -> Markup {
    html! {
        line class={ "percentile " (name) } x1="0" y1=(at(y)) x2=(WIDTH) y2=(at(y)) {
            title { (name) " " (span_ms(value)) }
        }
        text class={ "percentile " (name) } x=(WIDTH - 2.0) y=(at((y - 2.0).max(9.0))) text-anchor="end" {
            (name) " " (span_ms(value))
        }
    }
}

/// The success rate over the window, and per equal time bucket of it as bars.
fn success_rate(job: &str, runs: &[&RunView]) -> Markup {
    let label = format!("Success rate of job {job} per time bucket");
    let (Some(first), Some(last)) = (runs.first(), runs.last()) else {
        return empty("success-rate", "Success rate", "no run yet");
    };
    let overall = Rate::of(runs.iter().map(|run| run.outcome));
    let (starts, bucket_width) = buckets(first.started_at, last.started_at, RATE_BUCKETS);
    let mut rates = vec![Rate::default(); starts.len()];
    for run in runs {
        rates[bucket_of(run.started_at, first.started_at, bucket_width, starts.len())]
            .add(run.outcome);
    }
    let plot = HEIGHT - TOP - BOTTOM;
    let base = HEIGHT - BOTTOM;
    let slot = WIDTH / starts.len() as f64;
    html! {
        figure.chart #chart-success-rate {
            figcaption { "Success rate" }
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img" aria-label=(label) {
                line x1="0" y1=(at(base)) x2=(WIDTH) y2=(at(base)) {}
                line class="full" x1="0" y1=(at(TOP)) x2=(WIDTH) y2=(at(TOP)) {}
                text x="2" y="10" { "100 %" }
                // A bucket with runs is a full column: succeeded below, the rest above.
                @for (i, (start, rate)) in starts.iter().zip(&rates).enumerate() {
                    @if let Some(pm) = rate.per_mille() {
                        @let ok = f64::from(pm) / 1000.0 * plot;
                        @let x = at(i as f64 * slot + slot * 0.1);
                        @let width = at(slot * 0.8);
                        @let tip = format!("{} to {}: {}", shown(*start), shown(*start + bucket_width), rate.text());
                        @if pm > 0 {
                            rect class="bar rate" x=(x) y=(at(base - ok)) width=(width) height=(at(ok)) { title { (tip) } }
                        }
                        @if pm < 1000 {
                            rect class="bar rate-failed bad" x=(x) y=(at(TOP)) width=(width) height=(at(plot - ok)) { title { (tip) } }
                        }
                    }
                }
                text x="2" y=(HEIGHT - 3.0) { (shown(first.started_at)) }
                text x=(WIDTH - 2.0) y=(HEIGHT - 3.0) text-anchor="end" { (shown(last.started_at)) }
            }
            p.numbers {
                "over the window: " strong.rate { (overall.text()) }
                " · " (starts.len()) " buckets of " (span_ms(bucket_width.num_milliseconds()))
                " (running and skipped runs left out)"
            }
        }
    }
}

fn empty(id: &str, caption: &str, why: &str) -> Markup {
    html! {
        figure.chart.empty id={ "chart-" (id) } {
            figcaption { (caption) }
            p.muted { (why) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeDelta, TimeZone, Utc};
    use lock_cluster::RunRecord;
    use lock_core::FireKind;

    fn run(id: i64, outcome: RunState, duration_ms: i64, lag_ms: i64) -> RunView {
        let slot = Utc.with_ymd_and_hms(2026, 1, 2, 3, 0, 0).unwrap() + TimeDelta::seconds(id);
        let started = slot + TimeDelta::milliseconds(lag_ms);
        RunRecord {
            id,
            job: "j".to_owned(),
            slot: Some(slot),
            fire_kind: FireKind::Scheduled,
            instance_id: "a".to_owned(),
            fence: id as u64,
            started_at: started,
            ended_at: (outcome != RunState::Running)
                .then(|| started + TimeDelta::milliseconds(duration_ms)),
            outcome,
            error: None,
            attempt: 1,
            cancel_requested: false,
            params: Default::default(),
        }
    }

    /// Newest first, as the history reads: 20 runs, every 4th failed, durations 10..=200 ms,
    /// lags 1..=20 ms.
    fn history() -> Vec<RunView> {
        (1..=20)
            .rev()
            .map(|id| {
                let outcome = if id % 4 == 0 {
                    RunState::Failed
                } else {
                    RunState::Succeeded
                };
                run(id, outcome, id * 10, id)
            })
            .collect()
    }

    #[test]
    fn the_four_charts_show_their_marks_and_numbers() {
        let html = charts("nightly", &history()).into_string();
        for id in [
            "chart-timeline",
            "chart-durations",
            "chart-success-rate",
            "chart-lock-wait",
        ] {
            assert!(html.contains(&format!(r#"id="{id}""#)), "{id} in {html}");
        }
        assert_eq!(html.matches(r#"role="img""#).count(), 4);
        // Nearest rank over 20: p50 is the 10th, p95 the 19th.
        assert!(
            html.contains("p50 100 ms · p95 190 ms · max 200 ms · 20 ended runs"),
            "{html}"
        );
        assert!(
            html.contains("p50 10 ms · p95 19 ms · max 20 ms · 20 runs with a slot"),
            "{html}"
        );
        assert!(html.contains(r#"<text class="percentile p95""#), "{html}");
        assert!(html.contains("75.0 % (15 of 20)"), "{html}");
        // A bucket with a failure: a column of succeeded below and failed above.
        assert!(
            html.contains(r#"<rect class="bar rate-failed bad""#),
            "{html}"
        );
        assert!(html.contains(r#"<rect class="bar rate""#), "{html}");
        // One tick per run, coloured by outcome, each with its tooltip.
        assert_eq!(html.matches(r#"<rect class="mark succeeded""#).count(), 15);
        assert_eq!(html.matches(r#"<rect class="mark failed bad""#).count(), 5);
        assert!(
            html.contains("<title>run 4 at 2026-01-02 03:00:04 UTC: failed</title>"),
            "{html}"
        );
        assert!(
            html.contains(r#"<span class="swatch succeeded"></span>succeeded 15"#),
            "{html}"
        );
        assert!(
            !html.contains("style="),
            "no inline style: the CSP refuses it"
        );
    }

    #[test]
    fn a_name_is_escaped_in_the_labels() {
        let html = charts(r#"<script>alert("x")</script>&"#, &history()).into_string();
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains(r#"aria-label="Runs of job &lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp; over time"#),
            "{html}"
        );
    }

    #[test]
    fn runs_without_an_end_or_a_slot_are_left_out_of_their_chart() {
        let mut runs = vec![
            run(2, RunState::Running, 0, 5),
            run(1, RunState::Succeeded, 30, 5),
        ];
        runs[1].slot = None;
        let html = charts("j", &runs).into_string();
        assert!(
            html.contains("p50 30 ms · p95 30 ms · max 30 ms · 1 ended runs"),
            "{html}"
        );
        assert!(
            html.contains("p50 5 ms · p95 5 ms · max 5 ms · 1 runs with a slot"),
            "{html}"
        );
        assert!(html.contains("100.0 % (1 of 1)"), "{html}");
        let none = charts("j", &[]).into_string();
        assert!(
            none.contains("no run yet") && none.contains("no ended runs yet"),
            "{none}"
        );
    }
}
