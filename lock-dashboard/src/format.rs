//! How times and spans read as text, the same on every page and in the JSON.

use chrono::{DateTime, Utc};

/// A time as the JSON and the pages' `datetime` attributes carry it.
pub(crate) fn instant(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()
}

/// Milliseconds as an operator reads them: `850 ms`, `12.3 s`, `4 min 10 s`.
pub(crate) fn span_ms(ms: i64) -> String {
    let abs = ms.unsigned_abs();
    let sign = if ms < 0 { "-" } else { "" };
    if abs < 1000 {
        format!("{sign}{abs} ms")
    } else if abs < 120_000 {
        format!("{sign}{:.1} s", abs as f64 / 1000.0)
    } else if abs < 7_200_000 {
        format!("{sign}{} min {} s", abs / 60_000, abs % 60_000 / 1000)
    } else {
        format!(
            "{sign}{} h {} min",
            abs / 3_600_000,
            abs % 3_600_000 / 60_000
        )
    }
}
