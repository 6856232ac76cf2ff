//! ISO-8601 durations as ShedLock writes them (`PT30M`, `PT0.5S`, `P1D`, `PT1H30M`).
//!
//! Decisions, and why:
//! - The grammar is Java's `Duration.parse`, which ShedLock uses: `PnDTnHnMnS`, days at most
//!   (no years, months or weeks, whose length is not fixed), a fraction on the seconds only
//!   (`.` or `,`, up to 9 digits), letters in either case. So a value copied from a Java service
//!   means the same here.
//! - A minus sign is refused, where Java would accept it: a negative lease or period has no
//!   meaning, and saying so beats a duration that silently means something else.
//! - A small parser rather than a crate: the `iso8601` crate parses calendar durations
//!   (years, months) with another grammar and pulls `nom`; this is 100 lines with their tests.

use std::time::Duration;

/// Parses `text` as an ISO-8601 duration; the error says what is wrong, without the text.
pub(crate) fn parse_iso_duration(text: &str) -> Result<Duration, String> {
    let upper = text.to_ascii_uppercase();
    if upper.contains('-') {
        return Err("a negative duration is refused: a lease or period must be positive".into());
    }
    let body = upper.strip_prefix('+').unwrap_or(&upper);
    let body = body
        .strip_prefix('P')
        .ok_or("an ISO-8601 duration starts with `P`")?;
    let (date, time) = match body.split_once('T') {
        Some((date, time)) => (date, Some(time)),
        None => (body, None),
    };
    let mut total = Duration::ZERO;
    let mut any = false;
    if !date.is_empty() {
        let days = date
            .strip_suffix('D')
            .ok_or("before `T` only days are accepted (`P1D`); years, months and weeks have no fixed length")?;
        total = add(total, whole(days, "days")?, 86_400)?;
        any = true;
    }
    if let Some(time) = time {
        if time.is_empty() {
            return Err("`T` must be followed by hours, minutes or seconds (`PT30M`)".into());
        }
        let mut rest = time;
        for (unit, seconds) in [('H', 3_600), ('M', 60)] {
            if let Some((number, after)) = split_unit(rest, unit) {
                total = add(total, whole(number, unit_name(unit))?, seconds)?;
                rest = after;
            }
        }
        if !rest.is_empty() {
            let number = rest
                .strip_suffix('S')
                .ok_or("after `T` come hours, minutes and seconds, each number with its unit, in that order (`PT1H30M10S`)")?;
            total = total
                .checked_add(seconds(number)?)
                .ok_or("the duration is too long")?;
        }
        any = true;
    }
    if !any {
        return Err("`P` must be followed by days or `T` and a time (`P1D`, `PT30M`)".into());
    }
    Ok(total)
}

/// `rest` split at the first `unit`, when what comes before it is a number.
fn split_unit(rest: &str, unit: char) -> Option<(&str, &str)> {
    let (number, after) = rest.split_once(unit)?;
    (!number.is_empty() && number.bytes().all(|b| b.is_ascii_digit())).then_some((number, after))
}

fn unit_name(unit: char) -> &'static str {
    if unit == 'H' { "hours" } else { "minutes" }
}

fn whole(number: &str, unit: &str) -> Result<u64, String> {
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "the {unit} must be a whole number, `{number}` is not"
        ));
    }
    number
        .parse()
        .map_err(|_| "the duration is too long".into())
}

fn add(total: Duration, count: u64, unit_seconds: u64) -> Result<Duration, String> {
    count
        .checked_mul(unit_seconds)
        .and_then(|s| total.checked_add(Duration::from_secs(s)))
        .ok_or_else(|| "the duration is too long".into())
}

/// Seconds with an optional fraction of up to 9 digits, after `.` or `,` as Java accepts.
fn seconds(number: &str) -> Result<Duration, String> {
    let (int, fraction) = match number.split_once(['.', ',']) {
        Some((int, fraction)) => (int, fraction),
        None => (number, ""),
    };
    let secs = whole(int, "seconds")?;
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "the fraction of a second is up to 9 digits, `{fraction}` is not"
        ));
    }
    let nanos = format!("{fraction:0<9}").parse::<u32>().unwrap_or(0);
    Ok(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::parse_iso_duration as parse;
    use std::time::Duration;

    #[test]
    fn shedlock_values_parse_as_java_does() {
        let cases = [
            ("PT30M", 1_800_000),
            ("PT0.5S", 500),
            ("P1D", 86_400_000),
            ("PT1H30M", 5_400_000),
            ("PT10S", 10_000),
            (
                "P2DT3H4M5.25S",
                ((2 * 24 + 3) * 3600 + 4 * 60 + 5) * 1000 + 250,
            ),
            ("pt30m", 1_800_000),
            ("Pt1h", 3_600_000),
            ("+PT1S", 1_000),
            ("PT1,5S", 1_500),
            ("PT0S", 0),
            ("PT1.S", 1_000),
            ("PT90M", 5_400_000),
        ];
        for (text, millis) in cases {
            assert_eq!(parse(text), Ok(Duration::from_millis(millis)), "{text}");
        }
        assert_eq!(parse("PT0.000000001S"), Ok(Duration::from_nanos(1)));
    }

    #[test]
    fn malformed_values_are_refused_with_the_reason() {
        let cases = [
            ("P", "`P` must be followed"),
            ("PT", "`T` must be followed"),
            ("P1Y", "only days"),
            ("P1M", "only days"),
            ("P1W", "only days"),
            ("PT1M1H", "in that order"),
            ("PT1.5M", "in that order"),
            ("PT1.5H", "in that order"),
            ("PTS", "seconds must be a whole number"),
            ("PT1.1234567891S", "up to 9 digits"),
            ("PT30", "in that order"),
            ("PxD", "days must be a whole number"),
            ("T30M", "starts with `P`"),
            ("P1DT", "`T` must be followed"),
            ("PT99999999999999999999S", "too long"),
            ("P999999999999999999D", "too long"),
        ];
        for (text, reason) in cases {
            let error = parse(text).unwrap_err();
            assert!(error.contains(reason), "{text}: {error}");
        }
    }

    #[test]
    fn negatives_are_refused_though_java_accepts_them() {
        for text in ["-PT30M", "PT-30M", "-P1D", "pt-0.5s"] {
            let error = parse(text).unwrap_err();
            assert!(error.contains("negative"), "{text}: {error}");
        }
    }
}
