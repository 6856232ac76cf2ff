//! Bar charts as inline SVG (no script, no image file): one bar per run, oldest on the left.

use maud::{Markup, html};

/// One bar: its value in milliseconds (None: no bar, e.g. a run still going), whether to
/// draw it as bad (a failed run), and its tooltip.
pub(crate) struct Bar {
    pub(crate) value_ms: Option<i64>,
    pub(crate) bad: bool,
    pub(crate) label: String,
}

const WIDTH: f64 = 420.0;
const HEIGHT: f64 = 120.0;
const TOP: f64 = 14.0;

/// A chart titled `title` of `bars`, scaled to the largest value.
pub(crate) fn bars(title: &str, bars: &[Bar]) -> Markup {
    let max = bars
        .iter()
        .filter_map(|bar| bar.value_ms)
        .map(|v| v.max(0))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let slot = WIDTH / bars.len().max(1) as f64;
    let plot = HEIGHT - TOP;
    html! {
        figure.chart {
            figcaption { (title) }
            svg xmlns="http://www.w3.org/2000/svg" viewBox={ "0 0 " (WIDTH) " " (HEIGHT) } role="img" aria-label=(title) {
                line x1="0" y1=(HEIGHT) x2=(WIDTH) y2=(HEIGHT) {}
                text x="2" y="10" { "max " (crate::format::span_ms(max as i64)) }
                @for (i, bar) in bars.iter().enumerate() {
                    @if let Some(value) = bar.value_ms {
                        @let height = (value.max(0) as f64 / max * plot).max(1.0);
                        rect class=(if bar.bad { "bar bad" } else { "bar" })
                            x=(format!("{:.1}", i as f64 * slot + slot * 0.1))
                            y=(format!("{:.1}", HEIGHT - height))
                            width=(format!("{:.1}", (slot * 0.8).max(0.5)))
                            height=(format!("{height:.1}")) {
                            title { (bar.label) }
                        }
                    }
                }
            }
        }
    }
}
