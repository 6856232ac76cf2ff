//! Spring's cron dialect: parsing and matching on a wall clock (no zone).
//!
//! croner parses the second, minute, hour and month fields. The two day fields are parsed here,
//! element by element as Spring's `CronField` / `QuartzCronField` do, because croner has no
//! `L-n` or `LW`, accepts a bare `L` as a day-of-week (Spring refuses it) and does not combine
//! Quartz forms with plain values in one list (`1W,15,LW`).

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Weekday};
use croner::parser::{CronParser, Seconds, Year};

use crate::TriggerError;

/// A parsed cron expression in Spring's dialect; see [`parse_cron`](crate::parse_cron).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u32,
    months: u16,
    days_of_month: Vec<DayOfMonth>,
    days_of_week: Vec<DayOfWeek>,
}

/// One element of the day-of-month list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DayOfMonth {
    /// Plain days, bit `d` for day `d`.
    Days(u32),
    /// `L` (offset 0) or `L-n`: the last day of the month, `n` days earlier.
    Last(u32),
    /// `LW`: the last weekday (Monday to Friday) of the month.
    LastWeekday,
    /// `nW`: the weekday nearest to day `n`, within the month.
    NearestWeekday(u32),
}

/// One element of the day-of-week list; weekdays counted from Sunday = 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DayOfWeek {
    /// Plain weekdays, bit `w` for weekday `w`.
    Days(u8),
    /// `nL`: the last such weekday of the month.
    Last(u32),
    /// `n#k`: the `k`-th such weekday of the month.
    Nth(u32, u32),
}

/// The Gregorian calendar repeats, weekdays included, every 400 years.
const CYCLE_DAYS: usize = 146_097;

impl Cron {
    /// Parses six fields (macros already expanded).
    pub(crate) fn parse(fields: &[&str; 6]) -> Result<Self, TriggerError> {
        let [second, minute, hour, dom, month, dow] = *fields;
        let times = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Disallowed)
            .build()
            .parse(&format!("{second} {minute} {hour} * {month} *"))
            .map_err(|e| TriggerError(format!("invalid cron expression: {e}")))?;
        let bits = |max: u32, matches: &dyn Fn(u32) -> bool| {
            (0..=max)
                .filter(|&v| matches(v))
                .fold(0u64, |acc, v| acc | 1 << v)
        };
        let p = &times.pattern;
        let cron = Cron {
            seconds: bits(59, &|v| p.second_match(v).unwrap_or(false)),
            minutes: bits(59, &|v| p.minute_match(v).unwrap_or(false)),
            hours: bits(23, &|v| p.hour_match(v).unwrap_or(false)) as u32,
            months: bits(12, &|v| v > 0 && p.month_match(v).unwrap_or(false)) as u16,
            days_of_month: list(dom, day_of_month)?,
            days_of_week: list(&replace_day_names(dow), day_of_week)?,
        };
        let cycle_start = NaiveDate::from_ymd_opt(2000, 1, 1).unwrap_or(NaiveDate::MIN);
        if cron.first_day_from(cycle_start, CYCLE_DAYS).is_none() {
            return Err(TriggerError(format!(
                "cron expression never fires: no date matches day-of-month `{dom}`, month `{month}` and day-of-week `{dow}` together"
            )));
        }
        Ok(cron)
    }

    /// Whether the expression fires more than once an hour, or every hour: such a job keeps
    /// its real period through a repeated (autumn) hour; any other fires once in it.
    pub(crate) fn is_interval(&self) -> bool {
        self.seconds.count_ones() * self.minutes.count_ones() > 1 || self.hours == (1 << 24) - 1
    }

    /// The first wall-clock time at or after `from` that matches.
    pub(crate) fn next_local(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut day = from.date();
        let mut time = Some(from.time());
        // A fire exists in every 400-year cycle (checked at parse), so this ends.
        for _ in 0..=CYCLE_DAYS {
            if self.day_matches(day)
                && let Some(at) = self.first_time_from(time.unwrap_or(NaiveTime::MIN))
            {
                return Some(day.and_time(at));
            }
            day = day.succ_opt()?;
            time = None;
        }
        None
    }

    /// The last wall-clock time at or before `from` that matches.
    pub(crate) fn previous_local(&self, from: NaiveDateTime) -> Option<NaiveDateTime> {
        let mut day = from.date();
        let mut time = from.time();
        for _ in 0..=CYCLE_DAYS {
            if self.day_matches(day)
                && let Some(at) = self.last_time_until(time)
            {
                return Some(day.and_time(at));
            }
            day = day.pred_opt()?;
            time = NaiveTime::from_hms_opt(23, 59, 59)?;
        }
        None
    }

    fn first_day_from(&self, from: NaiveDate, days: usize) -> Option<NaiveDate> {
        from.iter_days().take(days).find(|&d| self.day_matches(d))
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        self.months & (1 << date.month()) != 0
            && self.days_of_month.iter().any(|e| e.matches(date))
            && self.days_of_week.iter().any(|e| e.matches(date))
    }

    fn first_time_from(&self, from: NaiveTime) -> Option<NaiveTime> {
        let (h0, m0, s0) = (from.hour(), from.minute(), from.second());
        for h in (h0..24).filter(|&h| self.hours & (1 << h) != 0) {
            let m_from = if h == h0 { m0 } else { 0 };
            for m in (m_from..60).filter(|&m| self.minutes & (1 << m) != 0) {
                let s_from = if h == h0 && m == m0 { s0 } else { 0 };
                let rest = self.seconds >> s_from;
                if rest != 0 {
                    return NaiveTime::from_hms_opt(h, m, s_from + rest.trailing_zeros());
                }
            }
        }
        None
    }

    fn last_time_until(&self, until: NaiveTime) -> Option<NaiveTime> {
        let (h0, m0, s0) = (until.hour(), until.minute(), until.second());
        for h in (0..=h0).rev().filter(|&h| self.hours & (1 << h) != 0) {
            let m_to = if h == h0 { m0 } else { 59 };
            for m in (0..=m_to).rev().filter(|&m| self.minutes & (1 << m) != 0) {
                let s_to = if h == h0 && m == m0 { s0 } else { 59 };
                let upto = self.seconds & (u64::MAX >> (63 - s_to));
                if upto != 0 {
                    return NaiveTime::from_hms_opt(h, m, 63 - upto.leading_zeros());
                }
            }
        }
        None
    }
}

fn last_day(date: NaiveDate) -> u32 {
    let first_next = if date.month() == 12 {
        NaiveDate::from_ymd_opt(date.year() + 1, 1, 1)
    } else {
        NaiveDate::from_ymd_opt(date.year(), date.month() + 1, 1)
    };
    first_next
        .and_then(|d| d.pred_opt())
        .map_or(31, |d| d.day())
}

impl DayOfMonth {
    fn matches(self, date: NaiveDate) -> bool {
        let day = date.day();
        let last = last_day(date);
        let on = |target: Option<u32>| target == Some(day);
        match self {
            DayOfMonth::Days(bits) => bits & (1 << day) != 0,
            DayOfMonth::Last(offset) => on(last.checked_sub(offset)),
            DayOfMonth::LastWeekday => {
                let last_date = date.with_day(last);
                on(last_date.map(|d| match d.weekday() {
                    Weekday::Sat => last - 1,
                    Weekday::Sun => last - 2,
                    _ => last,
                }))
            }
            // Spring's `weekdayNearestTo`: a Saturday moves to Friday (the 1st to Monday the
            // 3rd), a Sunday to Monday; never into another month.
            DayOfMonth::NearestWeekday(n) => on(date.with_day(n).and_then(|d| match d.weekday() {
                Weekday::Sat if n == 1 => Some(3),
                Weekday::Sat => Some(n - 1),
                Weekday::Sun => (n < last).then_some(n + 1),
                _ => Some(n),
            })),
        }
    }
}

impl DayOfWeek {
    fn matches(self, date: NaiveDate) -> bool {
        let weekday = date.weekday().num_days_from_sunday();
        match self {
            DayOfWeek::Days(bits) => bits & (1 << weekday) != 0,
            DayOfWeek::Last(w) => w == weekday && date.day() + 7 > last_day(date),
            DayOfWeek::Nth(w, k) => w == weekday && (date.day() - 1) / 7 + 1 == k,
        }
    }
}

fn list<T>(field: &str, element: fn(&str) -> Result<T, String>) -> Result<Vec<T>, TriggerError> {
    field
        .to_ascii_uppercase()
        .split(',')
        .map(|e| element(e).map_err(|why| TriggerError(format!("invalid cron expression: {why}"))))
        .collect()
}

/// Spring's `replaceOrdinals`: `MON`..`SUN` become 1..7 anywhere in the field.
fn replace_day_names(field: &str) -> String {
    const DAYS: [&str; 7] = ["MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN"];
    let mut field = field.to_ascii_uppercase();
    for (i, name) in DAYS.iter().enumerate() {
        field = field.replace(name, &(i + 1).to_string());
    }
    field
}

fn number(text: &str, what: &str, range: std::ops::RangeInclusive<u32>) -> Result<u32, String> {
    text.parse::<u32>()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| {
            format!(
                "{what} `{text}` is not a number from {} to {}",
                range.start(),
                range.end()
            )
        })
}

/// `*`, `?`, `n`, `a-b`, each optionally `/step`, as bits `min..=max`.
fn plain(element: &str, min: u32, max: u32, sunday_seven: bool) -> Result<u64, String> {
    let (range, step) = match element.split_once('/') {
        Some((range, step)) => (range, number(step, "step", 1..=max)?),
        None => (element, 1),
    };
    let (from, to) = match range.split_once('-') {
        _ if range == "*" || range == "?" => (min, max),
        Some((a, b)) => {
            let mut a = number(a, "value", min..=max)?;
            // Spring: Sunday as the start of a range is 0, not 7 (`SUN-FRI`).
            if sunday_seven && a == 7 {
                a = 0;
            }
            (a, number(b, "value", min..=max)?)
        }
        None if step > 1 => (number(range, "value", min..=max)?, max),
        None => {
            let n = number(range, "value", min..=max)?;
            (n, n)
        }
    };
    if from > to {
        return Err(format!("range `{range}` runs backwards"));
    }
    Ok((from..=to)
        .step_by(step as usize)
        .fold(0, |acc, v| acc | 1 << v))
}

/// Spring's `QuartzCronField.parseDaysOfMonth` and `BitsCronField.parseDaysOfMonth`.
fn day_of_month(element: &str) -> Result<DayOfMonth, String> {
    if let Some(at) = element.rfind('L') {
        if at != 0 {
            return Err(format!("unrecognized characters before `L` in `{element}`"));
        }
        return match &element[1..] {
            "" => Ok(DayOfMonth::Last(0)),
            "W" => Ok(DayOfMonth::LastWeekday),
            rest => match rest.strip_prefix('-').map(|n| number(n, "offset", 1..=30)) {
                Some(Ok(offset)) => Ok(DayOfMonth::Last(offset)),
                _ => Err(format!(
                    "`{element}`: after `L` comes `W` or `-n` (n from 1 to 30)"
                )),
            },
        };
    }
    if let Some(day) = element.strip_suffix('W') {
        return Ok(DayOfMonth::NearestWeekday(number(
            day,
            "day-of-month before `W`",
            1..=31,
        )?));
    }
    if element.contains('W') {
        return Err(format!("`W` must end `{element}`, after a day-of-month"));
    }
    plain(element, 1, 31, false).map(|bits| DayOfMonth::Days(bits as u32))
}

/// Spring's `QuartzCronField.parseDaysOfWeek` and `BitsCronField.parseDaysOfWeek` (names are
/// numbers already, Monday = 1; 0 and 7 are Sunday).
fn day_of_week(element: &str) -> Result<DayOfWeek, String> {
    let weekday = |text: &str| number(text, "day-of-week", 0..=7).map(|w| w % 7);
    if let Some(day) = element.strip_suffix('L') {
        if day.is_empty() {
            return Err(format!("no day-of-week before `L` in `{element}`"));
        }
        return Ok(DayOfWeek::Last(weekday(day)?));
    }
    if element.contains('L') {
        return Err(format!("unrecognized characters after `L` in `{element}`"));
    }
    if let Some((day, ordinal)) = element.split_once('#') {
        let ordinal = number(ordinal, "ordinal after `#`", 1..=u32::MAX)?;
        return Ok(DayOfWeek::Nth(weekday(day)?, ordinal));
    }
    let bits = plain(element, 0, 7, true)?;
    // Sunday is both 0 and 7.
    Ok(DayOfWeek::Days(((bits | bits >> 7) & 0x7f) as u8))
}
