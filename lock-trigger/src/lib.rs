#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

mod check;
mod cron;
mod distribution;
mod intern;
mod iso_duration;
mod name;
mod params;
mod policy;
mod spec;
mod wall_clock;

pub use check::{ZERO_LEASE, check_cron, check_duration, explain_cron, lease_conflict};
pub use chrono_tz::Tz;
pub use cron::Cron;
pub use distribution::{Distribution, DistributionError, MAX_SHARDS, check_shard_count};
pub use name::{MAX_LOCK_NAME_LEN, NameError, check_job_name, check_lock_name, is_bidi_control};
pub use params::{MAX_PARAM_KEY_LEN, MAX_PARAM_VALUE_LEN, MAX_PARAMS, Params, ParamsError};
pub use policy::{
    DEFAULT_MISFIRE_MAX, MAX_MISFIRE_MAX, MAX_PAUSE_AFTER_FAILURES, MAX_RETRIES, MAX_RETRY_DELAY,
    MISFIRE_POLICIES, MisfirePolicy, OVERLAP_POLICIES, Overlap, jittered, retry_delay,
    retry_plan_conflict, retry_plan_total, timeout_grace,
};
pub use spec::{
    CronSchedule, CronSpec, DEFAULT_RETRY_BACKOFF, Firing, LeaseError, LockSpec, MAX_DURATION,
    TriggerKind, TriggerSpec, check_lease,
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
/// month day-of-week`, with `*`, `,`, `-`, `/`, `?`, month and weekday names (`JAN`, `MON`),
/// weekday 0 or 7 for Sunday, the macros `@yearly`, `@annually`, `@monthly`, `@weekly`,
/// `@daily`, `@midnight`, `@hourly`, and Spring's Quartz forms, also inside lists:
///
/// - day-of-month: `L` (last day), `L-n` (n days before it), `LW` (last weekday), `nW` (the
///   weekday nearest day n, within the month);
/// - day-of-week: `nL` (`5L`, `FRIL`: the last Friday), `n#k` (`FRI#2`, `7#3`, `0#3`).
///
/// As in Spring, when both day fields are restricted a day must match both, and what Spring
/// refuses is refused (`L` alone as a day-of-week, `1#L`, `L-0`). An expression that can never
/// fire (`0 0 0 30 2 *`) is an error too.
///
/// ```
/// let cron = lock_trigger::parse_cron("0 5 1 * * *").unwrap();
/// assert!(lock_trigger::parse_cron("@daily").is_ok());
/// assert!(lock_trigger::parse_cron("0 0 12 ? * MON-FRI").is_ok());
/// assert!(lock_trigger::parse_cron("0 0 0 1W,15,LW * ?").is_ok());
/// let err = lock_trigger::parse_cron("*/5 * * * *").unwrap_err();
/// assert!(err.to_string().contains("6 fields"), "{err}");
/// let err = lock_trigger::parse_cron("0 0 0 30 2 *").unwrap_err();
/// assert!(err.to_string().contains("never fires"), "{err}");
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
    let Ok(six) = <[&str; 6]>::try_from(fields.as_slice()) else {
        return Err(TriggerError(format!(
            "a cron expression needs 6 fields (second minute hour day-of-month month day-of-week), found {}{}",
            fields.len(),
            if fields.len() == 5 {
                "; add the seconds field first, e.g. `0 ` + the expression"
            } else {
                ""
            }
        )));
    };
    Cron::parse(&six)
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

/// The two duration forms a message names when it refuses one.
pub const DURATION_FORMS: &str = "a humantime duration (`30s`, `5m`, `1h 30m`, `500ms`) or an \
     ISO-8601 one as ShedLock writes it (`PT30S`, `PT5M`, `PT1H30M`, `PT0.5S`, `P1D`)";

/// Parses a duration in `humantime` syntax (`30m`, `1h 30m`, `10s`, `500ms`) or in ISO-8601 as
/// ShedLock and Java's `Duration.parse` write it (`PT30M`, `PT0.5S`, `P1D`, `PT1H30M`).
///
/// A text that starts with `P` (either case, after an optional `+`) is ISO-8601: days, hours,
/// minutes and seconds, a fraction on the seconds. Negative durations are refused in both forms.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(lock_trigger::parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
/// assert_eq!(lock_trigger::parse_duration("PT1H30M").unwrap(), Duration::from_secs(5400));
/// assert_eq!(lock_trigger::parse_duration("PT0.5S").unwrap(), Duration::from_millis(500));
/// let refused = lock_trigger::parse_duration("30 minutes please").unwrap_err();
/// assert!(refused.to_string().contains("PT30S"), "{refused}");
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, TriggerError> {
    let iso = text.trim_start_matches(['+', '-']).starts_with(['P', 'p']);
    let parsed = if iso {
        iso_duration::parse_iso_duration(text)
    } else if text.trim_start().starts_with('-') {
        Err("a negative duration is refused: a lease or period must be positive".to_string())
    } else {
        humantime::parse_duration(text).map_err(|e| e.to_string())
    };
    parsed.map_err(|e| {
        TriggerError(format!(
            "invalid duration `{text}`: {e}; write {DURATION_FORMS}"
        ))
    })
}

/// The first instant strictly after `after` at which `cron` fires, evaluated on the wall clock
/// of `zone`. Across DST changes:
///
/// - the result is strictly after `after`, always, also from inside a repeated autumn hour;
/// - a local time skipped by a spring-forward gap fires once, at the gap's end (`0 30 2 * * *`
///   and `0 */15 2 * * *` alike fire once at 03:00 when 02:00 jumps to 03:00);
/// - in a repeated autumn hour, an expression that fires several times an hour or every hour
///   keeps its real period (every 15 minutes stays 15 real minutes), and any other, a fixed
///   local time such as 01:30, fires once, at the first pass.
///
/// Returns `None` only beyond the calendar's end (a parsed expression always fires again).
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
    wall_clock::next_fire(cron, zone, after)
}
