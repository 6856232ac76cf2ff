//! The cron engine against Spring's results and the project's DST rules (issue 13, points 1-3).
//!
//! The Spring cases are ported from spring-projects/spring-framework,
//! `spring-context/src/test/java/org/springframework/scheduling/support/CronExpressionTests.java`
//! (expression, start, expected next fires; Spring's `LocalDateTime` cases are run in UTC).

use chrono::{DateTime, NaiveDate, TimeDelta, TimeZone, Utc};
use lock_trigger::{next_fire, parse_cron, parse_zone};

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
}

/// `n` successive fires of `expr` in `zone`, each strictly after the one before.
fn fires(expr: &str, zone: &str, from: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
    let cron = parse_cron(expr).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let zone = parse_zone(zone).unwrap();
    let mut at = from;
    (0..n)
        .map(|_| {
            at = next_fire(&cron, zone, at).unwrap_or_else(|| panic!("{expr}: no fire after {at}"));
            at
        })
        .collect()
}

/// Spring's `LocalDateTime.of(y, m, d, h, mi[, s])` as a UTC instant.
fn local(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(y, mo, d)
        .unwrap()
        .and_hms_opt(h, mi, s)
        .unwrap()
        .and_utc()
}

// Moved from `lib.rs`'s unit tests: the first DST and dialect cases.

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
        ("0 0 0 L-0 * ?", "invalid cron"),
        ("0 0 0 ? * L", "no day-of-week before `L`"),
        ("0 0 0 * FOO *", "invalid cron"),
    ] {
        let err = parse_cron(expr).unwrap_err().to_string();
        assert!(err.contains(needle), "{expr}: {err}");
    }
}

// 2026-11-01 in New York: 02:00 EDT (06:00 UTC) falls back to 01:00 EST, so 01:00-02:00 local
// happens twice: first pass 05:00-06:00 UTC (EDT), second pass 06:00-07:00 UTC (EST).

#[test]
fn repeated_hour_next_fire_is_strictly_after_for_every_start() {
    let zone = parse_zone("America/New_York").unwrap();
    for expr in [
        "0 30 1 * * *",
        "0 0 1 * * *",
        "0 */15 * * * *",
        "0 */15 1 * * *",
        "*/20 * * * * *",
        "0 0 * * * *",
        "0 59 0 * * *",
    ] {
        let cron = parse_cron(expr).unwrap();
        let mut after = utc(2026, 11, 1, 4, 0, 0);
        while after < utc(2026, 11, 1, 8, 0, 0) {
            let next = next_fire(&cron, zone, after).unwrap();
            assert!(
                next > after,
                "{expr}: next_fire({after}) = {next}, not after it"
            );
            after += TimeDelta::seconds(97);
        }
    }
}

#[test]
fn repeated_hour_intervals_keep_their_real_period() {
    // Every 15 minutes: 15 real minutes apart straight through both passes.
    let got = fires(
        "0 */15 * * * *",
        "America/New_York",
        utc(2026, 11, 1, 5, 40, 0),
        7,
    );
    let want: Vec<_> = (0..7)
        .map(|i| utc(2026, 11, 1, 5, 45, 0) + TimeDelta::minutes(15 * i))
        .collect();
    assert_eq!(got, want);
    // Every 15 minutes during hour 1 only: hour 1 lasts two real hours that day.
    let got = fires(
        "0 */15 1 * * *",
        "America/New_York",
        utc(2026, 11, 1, 4, 50, 0),
        9,
    );
    let mut want: Vec<_> = (0..8)
        .map(|i| utc(2026, 11, 1, 5, 0, 0) + TimeDelta::minutes(15 * i))
        .collect();
    want.push(utc(2026, 11, 2, 6, 0, 0));
    assert_eq!(got, want);
    // Every 20 seconds across the instant the clock falls back.
    let got = fires(
        "*/20 * * * * *",
        "America/New_York",
        utc(2026, 11, 1, 5, 59, 30),
        4,
    );
    assert_eq!(
        got,
        vec![
            utc(2026, 11, 1, 5, 59, 40),
            utc(2026, 11, 1, 6, 0, 0),
            utc(2026, 11, 1, 6, 0, 20),
            utc(2026, 11, 1, 6, 0, 40),
        ]
    );
}

#[test]
fn repeated_hour_fixed_time_fires_once_even_from_the_second_pass() {
    // From inside the second pass (01:10 EST), 01:30 has already fired (01:30 EDT): next day.
    let got = fires(
        "0 30 1 * * *",
        "America/New_York",
        utc(2026, 11, 1, 6, 10, 0),
        1,
    );
    assert_eq!(got, vec![utc(2026, 11, 2, 6, 30, 0)]);
    let got = fires(
        "0 30 1 * * *",
        "America/New_York",
        utc(2026, 10, 31, 12, 0, 0),
        2,
    );
    assert_eq!(
        got,
        vec![utc(2026, 11, 1, 5, 30, 0), utc(2026, 11, 2, 6, 30, 0)]
    );
}

// 2026-03-08 in New York: 02:00 EST (07:00 UTC) jumps to 03:00 EDT; 02:00-03:00 local is skipped.

#[test]
fn spring_forward_gap_fires_once_at_its_end_for_every_shape() {
    let from = utc(2026, 3, 7, 12, 0, 0);
    assert_eq!(
        fires("0 10 2 * * *", "America/New_York", from, 2),
        vec![utc(2026, 3, 8, 7, 0, 0), utc(2026, 3, 9, 6, 10, 0)]
    );
    assert_eq!(
        fires("0 */15 2 * * *", "America/New_York", from, 3),
        vec![
            utc(2026, 3, 8, 7, 0, 0), // 03:00 EDT, once for 02:00, 02:15, 02:30 and 02:45
            utc(2026, 3, 9, 6, 0, 0),
            utc(2026, 3, 9, 6, 15, 0),
        ]
    );
    assert_eq!(
        fires(
            "0 */20 * * * *",
            "America/New_York",
            utc(2026, 3, 8, 6, 30, 0),
            4
        ),
        vec![
            utc(2026, 3, 8, 6, 40, 0), // 01:40 EST
            utc(2026, 3, 8, 7, 0, 0),  // 03:00 EDT: 02:00, 02:20, 02:40 fire once, here
            utc(2026, 3, 8, 7, 20, 0),
            utc(2026, 3, 8, 7, 40, 0),
        ]
    );
}

/// Expression, start, expected fires.
type Case<'a> = (&'a str, DateTime<Utc>, &'a [DateTime<Utc>]);

/// Spring's `CronExpressionTests`: expression, start (Spring's `LocalDateTime`), expected fires.
#[test]
fn springs_quartz_dialect_results() {
    let table: &[Case<'_>] = &[
        // leapYearSpecificDate, weekDaySequence, monthSequence, everyTenDays
        (
            "0 0 0 29 2 *",
            local(2007, 2, 10, 12, 0, 0),
            &[local(2008, 2, 29, 0, 0, 0), local(2012, 2, 29, 0, 0, 0)],
        ),
        (
            "0 0 7 ? * MON-FRI",
            local(2009, 9, 26, 12, 0, 0),
            &[
                local(2009, 9, 28, 7, 0, 0),
                local(2009, 9, 29, 7, 0, 0),
                local(2009, 9, 30, 7, 0, 0),
            ],
        ),
        (
            "0 30 23 30 1/3 ?",
            local(2010, 12, 30, 12, 0, 0),
            &[
                local(2011, 1, 30, 23, 30, 0),
                local(2011, 4, 30, 23, 30, 0),
                local(2011, 7, 30, 23, 30, 0),
            ],
        ),
        (
            "0 15 12 */10 1-8 5",
            local(2021, 4, 30, 12, 14, 59),
            &[
                local(2021, 5, 21, 12, 15, 0),
                local(2021, 6, 11, 12, 15, 0),
                local(2022, 1, 21, 12, 15, 0),
            ],
        ),
        // quartzLastDayOfMonth, quartzLastDayOfMonthOffset
        (
            "0 0 0 L * *",
            local(2008, 1, 4, 12, 0, 0),
            &[
                local(2008, 1, 31, 0, 0, 0),
                local(2008, 2, 29, 0, 0, 0),
                local(2008, 3, 31, 0, 0, 0),
                local(2008, 4, 30, 0, 0, 0),
            ],
        ),
        (
            "0 0 0 L-3 * *",
            local(2008, 1, 4, 12, 0, 0),
            &[
                local(2008, 1, 28, 0, 0, 0),
                local(2008, 2, 26, 0, 0, 0),
                local(2008, 3, 28, 0, 0, 0),
                local(2008, 4, 27, 0, 0, 0),
            ],
        ),
        // quartzLastWeekdayOfMonth
        (
            "0 0 0 LW * *",
            local(2008, 1, 4, 12, 0, 0),
            &[
                local(2008, 1, 31, 0, 0, 0),
                local(2008, 2, 29, 0, 0, 0),
                local(2008, 3, 31, 0, 0, 0),
                local(2008, 4, 30, 0, 0, 0),
                local(2008, 5, 30, 0, 0, 0),
                local(2008, 6, 30, 0, 0, 0),
                local(2008, 7, 31, 0, 0, 0),
                local(2008, 8, 29, 0, 0, 0),
                local(2008, 9, 30, 0, 0, 0),
                local(2008, 10, 31, 0, 0, 0),
                local(2008, 11, 28, 0, 0, 0),
                local(2008, 12, 31, 0, 0, 0),
            ],
        ),
        // quartzLastDayOfWeekOffset
        (
            "0 0 0 * * 5L",
            local(2008, 1, 4, 12, 0, 0),
            &[
                local(2008, 1, 25, 0, 0, 0),
                local(2008, 2, 29, 0, 0, 0),
                local(2008, 3, 28, 0, 0, 0),
                local(2008, 4, 25, 0, 0, 0),
                local(2008, 5, 30, 0, 0, 0),
                local(2008, 6, 27, 0, 0, 0),
            ],
        ),
        // quartzWeekdayNearestTo15
        (
            "0 0 0 15W * ?",
            local(2020, 1, 1, 0, 0, 0),
            &[
                local(2020, 1, 15, 0, 0, 0),
                local(2020, 2, 14, 0, 0, 0),
                local(2020, 3, 16, 0, 0, 0),
                local(2020, 4, 15, 0, 0, 0),
            ],
        ),
        // dayOfMonthListWithQuartz
        (
            "0 0 0 1W,15,LW * ?",
            local(2019, 12, 30, 0, 0, 0),
            &[
                local(2019, 12, 31, 0, 0, 0),
                local(2020, 1, 1, 0, 0, 0),
                local(2020, 1, 15, 0, 0, 0),
                local(2020, 1, 31, 0, 0, 0),
            ],
        ),
        // quartzLastDayOfMonthOffsetEveryHour
        (
            "0 0 * L-1 * *",
            local(2021, 1, 29, 0, 1, 0),
            &[local(2021, 1, 30, 0, 0, 0)],
        ),
        (
            "0 0 * L-1 * *",
            local(2021, 1, 30, 1, 0, 0),
            &[local(2021, 1, 30, 2, 0, 0)],
        ),
        // quartzLastWeekdayOfMonthEveryHour
        (
            "0 0 * LW * *",
            local(2021, 1, 28, 0, 1, 0),
            &[local(2021, 1, 29, 0, 0, 0)],
        ),
        (
            "0 0 * LW * *",
            local(2021, 1, 29, 1, 0, 0),
            &[local(2021, 1, 29, 2, 0, 0)],
        ),
        // quartzLastDayOfMonthEveryHour, quartzFirstWeekdayOfMonthEveryHour
        (
            "0 0 * L * *",
            local(2021, 1, 30, 0, 1, 0),
            &[local(2021, 1, 31, 0, 0, 0)],
        ),
        (
            "0 0 * 1W * *",
            local(2021, 1, 31, 0, 1, 0),
            &[local(2021, 2, 1, 0, 0, 0)],
        ),
        // quartzWeekdayNearestTo1
        (
            "0 0 0 1W * ?",
            local(2019, 12, 31, 0, 0, 0),
            &[
                local(2020, 1, 1, 0, 0, 0),
                local(2020, 2, 3, 0, 0, 0),
                local(2020, 3, 2, 0, 0, 0),
                local(2020, 4, 1, 0, 0, 0),
            ],
        ),
        (
            "0 0 0 1W * ?",
            local(2022, 1, 1, 0, 0, 0),
            &[local(2022, 1, 3, 0, 0, 0)],
        ),
        (
            "0 0 0 1W * ?",
            local(2021, 8, 1, 0, 0, 0),
            &[local(2021, 8, 2, 0, 0, 0)],
        ),
        // quartzWeekdayNearestTo31
        (
            "0 0 0 31W * ?",
            local(2020, 1, 1, 0, 0, 0),
            &[
                local(2020, 1, 31, 0, 0, 0),
                local(2020, 3, 31, 0, 0, 0),
                local(2020, 7, 31, 0, 0, 0),
                local(2020, 8, 31, 0, 0, 0),
                local(2020, 10, 30, 0, 0, 0),
                local(2020, 12, 31, 0, 0, 0),
            ],
        ),
        // quartz2ndFridayOfTheMonth, quartzFifthWednesdayOfTheMonth
        (
            "0 0 0 ? * 5#2",
            local(2020, 1, 1, 0, 0, 0),
            &[local(2020, 1, 10, 0, 0, 0), local(2020, 2, 14, 0, 0, 0)],
        ),
        (
            "0 0 0 ? * 3#5",
            local(2020, 1, 1, 0, 0, 0),
            &[
                local(2020, 1, 29, 0, 0, 0),
                local(2020, 4, 29, 0, 0, 0),
                local(2020, 7, 29, 0, 0, 0),
                local(2020, 9, 30, 0, 0, 0),
                local(2020, 12, 30, 0, 0, 0),
            ],
        ),
        // dayOfWeekListWithQuartz
        (
            "0 0 0 ? * THU#1,THU#3,THU#5",
            local(2019, 12, 31, 0, 0, 0),
            &[
                local(2020, 1, 2, 0, 0, 0),
                local(2020, 1, 16, 0, 0, 0),
                local(2020, 1, 30, 0, 0, 0),
            ],
        ),
        // quartz5thFridayOfTheMonthEveryHour, quartzLastFridayOfTheMonthEveryHour
        (
            "0 0 * ? * FRI#5",
            local(2021, 1, 28, 0, 1, 0),
            &[local(2021, 1, 29, 0, 0, 0)],
        ),
        (
            "0 0 * ? * FRIL",
            local(2021, 1, 29, 1, 0, 0),
            &[local(2021, 1, 29, 2, 0, 0)],
        ),
        // sundayToFriday
        (
            "0 0 0 ? * SUN-FRI",
            local(2021, 2, 25, 15, 0, 0),
            &[local(2021, 2, 26, 0, 0, 0), local(2021, 2, 28, 0, 0, 0)],
        ),
        // various
        (
            "3-57 13-28 17,18 1,15 3-12 6#1",
            local(2022, 9, 15, 17, 44, 11),
            &[local(2022, 10, 1, 17, 13, 3)],
        ),
        (
            "*/28 56 22 */6 * *",
            local(2022, 2, 27, 8, 0, 42),
            &[local(2022, 3, 1, 22, 56, 0)],
        ),
        // Sunday as 7 and as 0 before `#` (Spring's parseDayOfWeek maps 0 to 7).
        (
            "0 0 0 ? * 7#3",
            local(2020, 1, 1, 0, 0, 0),
            &[local(2020, 1, 19, 0, 0, 0)],
        ),
        (
            "0 0 0 ? * 0#3",
            local(2020, 1, 1, 0, 0, 0),
            &[local(2020, 1, 19, 0, 0, 0)],
        ),
        (
            "0 0 0 ? * 0L",
            local(2020, 1, 1, 0, 0, 0),
            &[local(2020, 1, 26, 0, 0, 0)],
        ),
    ];
    for (expr, start, want) in table {
        assert_eq!(
            &fires(expr, "UTC", *start, want.len()),
            want,
            "{expr} from {start}"
        );
    }
}

/// Spring's `daylightSaving` case (Europe/Amsterdam), with the one deliberate difference.
#[test]
fn springs_daylight_saving_results() {
    let amsterdam = "Europe/Amsterdam";
    // 09:00 across both changes of 2021 (+01:00 -> +02:00 on 03-28, back on 10-31).
    assert_eq!(
        fires("0 0 9 * * *", amsterdam, utc(2021, 3, 27, 8, 0, 0), 1),
        vec![utc(2021, 3, 28, 7, 0, 0)]
    );
    assert_eq!(
        fires("0 0 9 * * *", amsterdam, utc(2021, 10, 30, 7, 0, 0), 1),
        vec![utc(2021, 10, 31, 8, 0, 0)]
    );
    // From 01:00+01:00 on the day of the gap, 00:05 is next the following day.
    assert_eq!(
        fires("0 5 0 * * *", amsterdam, utc(2021, 3, 28, 0, 0, 0), 1),
        vec![utc(2021, 3, 28, 22, 5, 0)]
    );
    // 02:10 on 2013-03-31 does not exist. Spring skips to 2013-04-01T02:10+02:00; the project's
    // rule (DESIGN.md: a skipped local time fires once at the gap's end) fires at 03:00+02:00.
    assert_eq!(
        fires("0 10 2 * * *", amsterdam, utc(2013, 3, 31, 0, 9, 0), 2),
        vec![utc(2013, 3, 31, 1, 0, 0), utc(2013, 4, 1, 0, 10, 0)]
    );
}

/// What Spring's parser refuses, and crons that can never fire, are errors from the parser.
#[test]
fn refused_like_spring_and_never_firing_is_an_error() {
    for (expr, needle) in [
        ("0 0 0 ? * L", "before `L`"),
        ("0 0 0 ? * 1#L", "invalid cron expression"),
        ("0 0 0 ? * 1#0", "invalid cron expression"),
        ("0 0 0 ? * 8#1", "invalid cron expression"),
        ("0 0 0 ? * #2", "invalid cron expression"),
        ("0 0 0 L-0 * ?", "invalid cron expression"),
        ("0 0 0 L3 * ?", "invalid cron expression"),
        ("0 0 0 W * ?", "invalid cron expression"),
        ("0 0 0 3WL * ?", "invalid cron expression"),
        ("0 0 0 32W * ?", "invalid cron expression"),
        ("0 0 0 30 2 *", "never fires"),
        ("0 0 0 31 4,6,9,11 ?", "never fires"),
        ("0 0 0 ? * 5#6", "never fires"),
    ] {
        match parse_cron(expr) {
            Ok(_) => panic!("{expr}: accepted"),
            Err(e) => assert!(e.to_string().contains(needle), "{expr}: {e}"),
        }
    }
    // Rare but real: February 29th on a Monday (2044), and the 5th Monday of February (2044).
    for expr in ["0 0 0 29 2 MON", "0 0 0 ? 2 MON#5"] {
        assert_eq!(
            fires(expr, "UTC", utc(2026, 1, 1, 0, 0, 0), 1),
            vec![utc(2044, 2, 29, 0, 0, 0)]
        );
    }
}

/// A year of fires in zones with different DST shapes (a 30-minute change at Lord Howe, changes
/// at midnight in Santiago): fires strictly increase, and the slot at or before each fire is
/// that fire, and just before it the previous one.
#[test]
fn fires_and_slots_agree_through_a_year_of_clock_changes() {
    use lock_trigger::{CronSpec, TriggerKind, TriggerSpec};
    for zone in [
        "America/New_York",
        "Europe/London",
        "Australia/Lord_Howe",
        "America/Santiago",
    ] {
        for expr in [
            "0 */15 * * * *",
            "0 30 1 * * *",
            "0 0 0 * * *",
            "0 0 2 * * *",
            "0 */30 0-3 * * *",
            "0 0 * * * *",
        ] {
            let trigger = TriggerSpec::new(TriggerKind::Cron(CronSpec {
                expr,
                zone: Some(zone),
            }))
            .parse()
            .unwrap()
            .kind;
            let mut previous: Option<DateTime<Utc>> = None;
            let mut at = utc(2026, 1, 1, 0, 0, 0);
            while at < utc(2027, 1, 1, 0, 0, 0) {
                let next = trigger.next_slot(at).unwrap();
                assert!(next > at, "{zone} {expr}: {at} -> {next}");
                assert_eq!(trigger.slot_at_or_before(next), Some(next), "{zone} {expr}");
                if let Some(previous) = previous {
                    assert_eq!(
                        trigger.slot_at_or_before(next - TimeDelta::seconds(1)),
                        Some(previous),
                        "{zone} {expr}: before {next}"
                    );
                }
                previous = Some(next);
                at = next;
            }
        }
    }
}
