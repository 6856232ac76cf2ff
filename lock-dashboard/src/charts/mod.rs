//! Charts as inline SVG, drawn on the server: no script, no image file, nothing from
//! elsewhere, so the Content-Security-Policy stays `default-src 'none'` with the dashboard's
//! own stylesheet. Every chart is a `figure` with an `svg role="img"` and an `aria-label`, a
//! `<title>` on each mark (the browser's tooltip, a screen reader's text), and its numbers
//! again as text under it; colours come from classes in `assets/dashboard.css`, never from a
//! `style` attribute (the policy refuses inline styles).
//!
//! - [`runs`]: a job's recent runs (the Job page): runs over time by outcome, the duration
//!   distribution, the success rate, the lock wait.
//! - [`failing`]: the jobs failing now, longest without a success first (the Jobs page).
//! - [`stats`]: the figures they draw (percentiles by nearest rank, rates, buckets).

pub(crate) mod failing;
pub(crate) mod runs;
pub(crate) mod stats;

/// How many of a job's newest runs the Job page's charts cover: one indexed read of the
/// history (the page's first page of runs comes out of the same read).
pub(crate) const WINDOW_RUNS: u32 = 200;

/// The drawing area of every chart, in SVG units (the stylesheet sets its size on screen).
pub(crate) const WIDTH: f64 = 420.0;
pub(crate) const HEIGHT: f64 = 140.0;
/// Room above the plot for a label, and under it for the axis labels.
pub(crate) const TOP: f64 = 14.0;
pub(crate) const BOTTOM: f64 = 14.0;

/// A coordinate as the SVG carries it: one decimal, enough at this size.
pub(crate) fn at(value: f64) -> String {
    format!("{value:.1}")
}
