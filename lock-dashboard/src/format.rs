//! How times and spans read as text, the same on every page and in the JSON.

use chrono::{DateTime, Datelike, SecondsFormat, Timelike, Utc};

/// A time as the JSON and the pages' `datetime` attributes carry it:
/// `2026-01-02T03:04:05.000Z`.
// Not `format("%Y-..")`: a strftime string is parsed at every call, and the Jobs page formats
// a few thousand times.
pub(crate) fn instant(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A time as the pages show it: `2026-01-02 03:04:05 UTC`.
pub(crate) fn shown(at: DateTime<Utc>) -> String {
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
        at.year(),
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second()
    )
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn times_read_as_the_json_and_the_pages_show_them() {
        let at =
            Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap() + chrono::TimeDelta::milliseconds(7);
        assert_eq!(instant(at), "2026-01-02T03:04:05.007Z");
        assert_eq!(shown(at), "2026-01-02 03:04:05 UTC");
        assert_eq!(instant(at), at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string());
        assert_eq!(shown(at), at.format("%Y-%m-%d %H:%M:%S UTC").to_string());
    }
}
