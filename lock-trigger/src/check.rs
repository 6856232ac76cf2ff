//! The checks of values written by users, with the messages they get: the macros report them
//! at compile time on the literal, the scheduler at `start()` for values from configuration.
//! One function per value kind, so both places say the same thing.

use std::time::Duration;

use crate::{Cron, MAX_DURATION, TriggerError, parse_cron, parse_duration};

/// Why a zero `lock_at_most_for` is refused.
pub const ZERO_LEASE: &str = "a lease of zero expires as it is taken";

/// Spring's cron fields and what each accepts.
const CRON_FIELDS: [(&str, &str); 6] = [
    ("second", "0-59"),
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day-of-month", "1-31, `?`, `L`, `L-n`, `nW`, `LW`"),
    ("month", "1-12 or JAN-DEC"),
    (
        "day-of-week",
        "0-7 (0 and 7 are Sunday) or SUN-SAT, `?`, `nL`, `n#k`",
    ),
];

/// Parses a cron expression; the error names the refused field and what it accepts.
///
/// ```
/// let message = lock_trigger::check_cron("0 0 25 * * *").unwrap_err();
/// assert!(message.contains("in the hour field `25` (it accepts 0-23)"), "{message}");
/// ```
pub fn check_cron(expr: &str) -> Result<Cron, String> {
    parse_cron(expr).map_err(|error| explain_cron(expr, &error))
}

/// The parser's message, plus which field it refused: the parser does not say, so each field
/// in turn is replaced by `*`; the one whose replacement makes the expression valid is it.
pub fn explain_cron(expr: &str, error: &TriggerError) -> String {
    let fields: Vec<&str> = expr.split_whitespace().collect();
    if fields.len() != CRON_FIELDS.len() || !error.message().starts_with("invalid cron expression")
    {
        // Wrong field count, macros, unsupported forms: the message already says what to do.
        return error.to_string();
    }
    let culprit = (0..fields.len()).find(|&i| {
        let mut fixed = fields.clone();
        fixed[i] = "*";
        parse_cron(&fixed.join(" ")).is_ok()
    });
    match culprit {
        Some(i) => {
            let (name, accepts) = CRON_FIELDS[i];
            format!(
                "{}, in the {name} field `{}` (it accepts {accepts})",
                error.message().trim_end_matches('.'),
                fields[i]
            )
        }
        None => {
            let all = CRON_FIELDS
                .iter()
                .map(|(name, accepts)| format!("{name} {accepts}"))
                .collect::<Vec<_>>()
                .join("; ");
            format!(
                "{} (the fields are: {all})",
                error.message().trim_end_matches('.')
            )
        }
    }
}

/// Parses the duration `text` given to `key`: `humantime` syntax, whole milliseconds (the
/// lock table's precision), at most [`MAX_DURATION`]; zero is refused with `zero` as the
/// reason, when given.
///
/// ```
/// use std::time::Duration;
/// use lock_trigger::{ZERO_LEASE, check_duration};
/// assert_eq!(check_duration("lock_at_most_for", "1h 30m", Some(ZERO_LEASE)), Ok(Duration::from_secs(5400)));
/// let message = check_duration("lock_at_most_for", "0s", Some(ZERO_LEASE)).unwrap_err();
/// assert_eq!(message, "`lock_at_most_for` must be greater than zero: a lease of zero expires as it is taken");
/// ```
pub fn check_duration(key: &str, text: &str, zero: Option<&str>) -> Result<Duration, String> {
    let duration = parse_duration(text).map_err(|e| e.to_string())?;
    if duration.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!(
            "`{key} = {text:?}` is finer than a millisecond: lock and trigger durations have \
             millisecond precision; use whole milliseconds (`1ms` at least)"
        ));
    }
    if duration > MAX_DURATION {
        return Err(format!(
            "`{key} = {text:?}` is over the longest duration a lock table or timer accepts: \
             365000 days (about 1000 years)"
        ));
    }
    if let (true, Some(why)) = (duration.is_zero(), zero) {
        return Err(format!("`{key}` must be greater than zero: {why}"));
    }
    Ok(duration)
}

/// The message for a `lock_at_least_for` longer than `lock_at_most_for`, each as written.
pub fn lease_conflict(at_least: &str, at_most: &str) -> String {
    format!(
        "`lock_at_least_for = {at_least:?}` is longer than `lock_at_most_for = {at_most:?}`: a \
         lease cannot be kept longer than it may last at most; lower `lock_at_least_for` or \
         raise `lock_at_most_for`"
    )
}
