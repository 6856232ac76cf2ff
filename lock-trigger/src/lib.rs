#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use croner::parser::{CronParser, Seconds, Year};

mod spec;

pub use chrono_tz::Tz;
pub use croner::Cron;
pub use spec::{
    CronSchedule, CronSpec, LeaseError, LockSpec, MAX_DURATION, MAX_LOCK_NAME_LEN, NameError,
    TriggerKind, TriggerSpec, check_lease, check_lock_name,
};

/// A trigger value that could not be understood; the message says what and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TriggerError(String);

impl TriggerError {
    /// The message, without the offending input.
    pub fn message(&self) -> &str {
        &self.0
    }

    /// The same error, prefixed with which value it is about (`zone: unknown time zone ..`).
    fn context(self, what: &str) -> Self {
        TriggerError(format!("{what}: {}", self.0))
    }
}

impl fmt::Display for TriggerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TriggerError {}

/// Spring's `@`-macros and the six-field expressions they stand for.
const MACROS: [(&str, &str); 7] = [
    ("@yearly", "0 0 0 1 1 *"),
    ("@annually", "0 0 0 1 1 *"),
    ("@monthly", "0 0 0 1 * *"),
    ("@weekly", "0 0 0 * * 0"),
    ("@daily", "0 0 0 * * *"),
    ("@midnight", "0 0 0 * * *"),
    ("@hourly", "0 0 * * * *"),
];

/// Parses a cron expression in Spring's six-field dialect: `second minute hour day-of-month
/// month day-of-week`, with `*`, `,`, `-`, `/`, `?`, `L` (last day of month; `5L` or `FRIL` the
/// last Friday), `nW` (nearest weekday), `#` (`FRI#2`), month and weekday names (`JAN`, `MON`),
/// weekday 0 or 7 for Sunday, and the macros `@yearly`, `@annually`, `@monthly`, `@weekly`,
/// `@daily`, `@midnight`, `@hourly`.
///
/// As in Spring, when both day-of-month and day-of-week are restricted, a day must match both.
/// Not supported (an error says so): `L-n` and `LW`.
///
/// ```
/// let cron = lock_trigger::parse_cron("0 5 1 * * *").unwrap();
/// assert!(lock_trigger::parse_cron("@daily").is_ok());
/// assert!(lock_trigger::parse_cron("0 0 12 ? * MON-FRI").is_ok());
/// let err = lock_trigger::parse_cron("*/5 * * * *").unwrap_err();
/// assert!(err.to_string().contains("6 fields"), "{err}");
/// # let _ = cron;
/// ```
pub fn parse_cron(expr: &str) -> Result<Cron, TriggerError> {
    let trimmed = expr.trim();
    let expanded = if trimmed.starts_with('@') {
        MACROS
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(trimmed))
            .map(|(_, six)| *six)
            .ok_or_else(|| {
                TriggerError(format!(
                    "unknown cron macro `{trimmed}`; expected one of {}",
                    MACROS.map(|(name, _)| name).join(", ")
                ))
            })?
    } else {
        trimmed
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    if fields.len() != 6 {
        return Err(TriggerError(format!(
            "a cron expression needs 6 fields (second minute hour day-of-month month day-of-week), found {}{}",
            fields.len(),
            if fields.len() == 5 {
                "; add the seconds field first, e.g. `0 ` + the expression"
            } else {
                ""
            }
        )));
    }
    let day_of_month = fields[3].to_ascii_uppercase();
    if day_of_month.contains("L-") || day_of_month.contains("LW") {
        return Err(TriggerError(format!(
            "day-of-month `{}`: `L-n` and `LW` are not supported; use `L` (last day) or `nW` (nearest weekday)",
            fields[3]
        )));
    }
    parser()
        .parse(expanded)
        .map_err(|e| TriggerError(format!("invalid cron expression: {e}")))
}

fn parser() -> CronParser {
    CronParser::builder()
        .seconds(Seconds::Required)
        .year(Year::Disallowed)
        // Spring matches a day only if both day fields match when both are restricted.
        .dom_and_dow(true)
        .build()
}

/// Parses an IANA time zone name (`Asia/Shanghai`, `UTC`).
///
/// ```
/// assert_eq!(lock_trigger::parse_zone("Asia/Shanghai").unwrap(), lock_trigger::Tz::Asia__Shanghai);
/// assert!(lock_trigger::parse_zone("Mars/Olympus").is_err());
/// ```
pub fn parse_zone(name: &str) -> Result<Tz, TriggerError> {
    name.parse::<Tz>().map_err(|_| {
        TriggerError(format!(
            "unknown time zone `{name}`; use an IANA name such as `UTC`, `Europe/Berlin` or `Asia/Shanghai`"
        ))
    })
}

/// Parses a duration in `humantime` syntax (`30m`, `1h 30m`, `10s`, `500ms`).
///
/// ```
/// use std::time::Duration;
/// assert_eq!(lock_trigger::parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
/// assert!(lock_trigger::parse_duration("30 minutes please").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, TriggerError> {
    humantime::parse_duration(text).map_err(|e| {
        TriggerError(format!(
            "invalid duration `{text}`: {e}; write e.g. `30s`, `5m`, `1h 30m`, `500ms`"
        ))
    })
}

/// The first instant strictly after `after` at which `cron` fires, evaluated on the wall clock
/// of `zone` (so DST changes are honoured: a time inside a spring-forward gap fires once just
/// after the gap; a time in a repeated autumn hour fires once, at its first occurrence).
///
/// Returns `None` when the expression never fires again (e.g. February 30th).
///
/// ```
/// use chrono::{TimeZone, Utc};
/// let cron = lock_trigger::parse_cron("0 5 1 * * *").unwrap();
/// let zone = lock_trigger::parse_zone("Asia/Shanghai").unwrap();
/// let after = Utc.with_ymd_and_hms(2026, 11, 29, 0, 0, 0).unwrap();
/// // 01:05 in Shanghai (UTC+8) is 17:05 UTC the day before.
/// assert_eq!(
///     lock_trigger::next_fire(&cron, zone, after),
///     Some(Utc.with_ymd_and_hms(2026, 11, 29, 17, 5, 0).unwrap())
/// );
/// ```
pub fn next_fire(cron: &Cron, zone: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    // croner carries sub-second parts of the start through; fires are on whole seconds.
    let start = after
        .duration_trunc(TimeDelta::seconds(1))
        .unwrap_or(after)
        .with_timezone(&zone);
    cron.find_next_occurrence(&start, false)
        .ok()
        .map(|at| at.with_timezone(&Utc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    fn fires(expr: &str, zone: &str, from: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        let cron = parse_cron(expr).unwrap();
        let zone = parse_zone(zone).unwrap();
        let mut at = from;
        (0..n)
            .map(|_| {
                at = next_fire(&cron, zone, at).unwrap();
                at
            })
            .collect()
    }

    #[test]
    fn spring_forward_gap_fires_once_after_the_gap() {
        // 2026-03-08 02:00 EST jumps to 03:00 EDT in New York: 02:30 does not exist that day.
        let got = fires(
            "0 30 2 * * *",
            "America/New_York",
            utc(2026, 3, 6, 12, 0, 0),
            4,
        );
        assert_eq!(
            got,
            vec![
                utc(2026, 3, 7, 7, 30, 0), // 02:30 EST
                utc(2026, 3, 8, 7, 0, 0),  // 03:00 EDT, first instant after the gap, once
                utc(2026, 3, 9, 6, 30, 0), // 02:30 EDT
                utc(2026, 3, 10, 6, 30, 0),
            ]
        );
    }

    #[test]
    fn fall_back_repeated_hour_fires_once() {
        // 2026-11-01 02:00 EDT falls back to 01:00 EST: 01:30 happens twice, 02:30 once.
        let got = fires(
            "0 30 2 * * *",
            "America/New_York",
            utc(2026, 10, 31, 12, 0, 0),
            3,
        );
        assert_eq!(
            got,
            vec![
                utc(2026, 11, 1, 7, 30, 0), // 02:30 EST (exists once)
                utc(2026, 11, 2, 7, 30, 0),
                utc(2026, 11, 3, 7, 30, 0),
            ]
        );
        let got = fires(
            "0 30 1 * * *",
            "America/New_York",
            utc(2026, 10, 31, 12, 0, 0),
            2,
        );
        // 01:30 EDT (05:30 UTC) only; the repeated 01:30 EST (06:30 UTC) is not a second fire.
        assert_eq!(
            got,
            vec![utc(2026, 11, 1, 5, 30, 0), utc(2026, 11, 2, 6, 30, 0)]
        );
    }

    #[test]
    fn every_second_is_every_second() {
        let from = utc(2026, 1, 1, 0, 0, 0) + TimeDelta::milliseconds(400);
        let got = fires("* * * * * *", "UTC", from, 3);
        assert_eq!(
            got,
            vec![
                utc(2026, 1, 1, 0, 0, 1),
                utc(2026, 1, 1, 0, 0, 2),
                utc(2026, 1, 1, 0, 0, 3)
            ]
        );
    }

    #[test]
    fn spring_dialect_features() {
        // Last Friday of the month, as `5L` and `FRIL`.
        let from = utc(2026, 11, 29, 0, 0, 0);
        assert_eq!(
            fires("0 0 0 ? * 5L", "UTC", from, 1),
            vec![utc(2026, 12, 25, 0, 0, 0)]
        );
        assert_eq!(
            fires("0 0 0 ? * FRIL", "UTC", from, 1),
            vec![utc(2026, 12, 25, 0, 0, 0)]
        );
        // Second Friday, last day, nearest weekday, names, Sunday as 7, macros.
        assert_eq!(
            fires("0 0 0 ? * FRI#2", "UTC", from, 1),
            vec![utc(2026, 12, 11, 0, 0, 0)]
        );
        assert_eq!(
            fires("0 0 0 L * ?", "UTC", from, 1),
            vec![utc(2026, 11, 30, 0, 0, 0)]
        );
        assert_eq!(
            fires("0 0 0 15W * ?", "UTC", from, 1),
            vec![utc(2026, 12, 15, 0, 0, 0)]
        );
        assert_eq!(
            fires("0 0 0 1 JAN ?", "UTC", from, 1),
            vec![utc(2027, 1, 1, 0, 0, 0)]
        );
        assert_eq!(
            fires("0 0 0 ? * 7", "UTC", from, 1),
            vec![utc(2026, 12, 6, 0, 0, 0)]
        );
        assert_eq!(
            fires("@daily", "UTC", from, 1),
            vec![utc(2026, 11, 30, 0, 0, 0)]
        );
        assert_eq!(
            fires("@hourly", "UTC", from, 1),
            vec![utc(2026, 11, 29, 1, 0, 0)]
        );
        // Both day fields restricted: both must match (Spring), not either (Vixie cron).
        assert_eq!(
            fires("0 0 0 1 * MON", "UTC", from, 1),
            vec![utc(2027, 2, 1, 0, 0, 0)]
        );
    }

    #[test]
    fn errors_say_what_is_wrong() {
        for (expr, needle) in [
            ("* * * * *", "6 fields"),
            ("0 60 * * * *", "invalid cron"),
            ("@often", "unknown cron macro"),
            ("0 0 0 L-3 * ?", "not supported"),
            ("0 0 0 LW * ?", "not supported"),
            ("0 0 0 * FOO *", "invalid cron"),
        ] {
            let err = parse_cron(expr).unwrap_err().to_string();
            assert!(err.contains(needle), "{expr}: {err}");
        }
    }
}
