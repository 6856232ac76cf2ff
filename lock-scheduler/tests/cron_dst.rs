//! `Trigger::cron` at run time: the same dialect and refusals as the macro, and the DST rules
//! (issue 13, points 1-3). The engine's full table is in `lock-trigger/tests/spring_cron.rs`.

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use lock_scheduler::Trigger;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

#[test]
fn never_firing_and_spring_refused_crons_are_errors() {
    for expr in ["0 0 0 30 2 *", "0 0 0 ? * L", "0 0 0 ? * 1#L"] {
        let err = Trigger::cron(expr)
            .err()
            .unwrap_or_else(|| panic!("{expr}: accepted"));
        assert!(err.to_string().contains(expr), "{expr}: {err}");
    }
    for expr in ["0 0 0 1W,15,LW * ?", "0 0 * L-1 * *", "0 0 0 ? * 7#3"] {
        assert!(Trigger::cron(expr).is_ok(), "{expr}");
    }
}

#[test]
fn next_slot_is_strictly_after_through_the_repeated_hour() {
    // New York, 2026-11-01: 06:00 UTC is 02:00 EDT falling back to 01:00 EST.
    let every_15 = Trigger::cron("0 */15 * * * *")
        .unwrap()
        .in_zone("America/New_York")
        .unwrap();
    let daily = Trigger::cron("0 30 1 * * *")
        .unwrap()
        .in_zone("America/New_York")
        .unwrap();
    let mut at = utc(2026, 11, 1, 5, 0);
    let mut daily_fires = Vec::new();
    while at < utc(2026, 11, 1, 8, 0) {
        let next = every_15.next_slot(at).unwrap().instant();
        assert!(
            next > at && next - at <= TimeDelta::minutes(15),
            "{at} -> {next}"
        );
        at = next;
        daily_fires.push(daily.next_slot(at).unwrap().instant());
    }
    // 01:30 fired once (01:30 EDT); from the second pass on the next fire is the next day.
    assert!(daily_fires.iter().all(|&f| f > utc(2026, 11, 1, 5, 0)));
    assert!(daily_fires.contains(&utc(2026, 11, 2, 6, 30)));
    assert!(!daily_fires.contains(&utc(2026, 11, 1, 6, 30)));
}

#[test]
fn spring_forward_gap_fires_once_at_its_end() {
    // New York, 2026-03-08: 02:00 EST (07:00 UTC) jumps to 03:00 EDT.
    for expr in ["0 10 2 * * *", "0 */15 2 * * *"] {
        let trigger = Trigger::cron(expr)
            .unwrap()
            .in_zone("America/New_York")
            .unwrap();
        let first = trigger.next_slot(utc(2026, 3, 7, 12, 0)).unwrap().instant();
        assert_eq!(first, utc(2026, 3, 8, 7, 0), "{expr}");
        let second = trigger.next_slot(first).unwrap().instant();
        assert!(second >= utc(2026, 3, 9, 6, 0), "{expr}: {second}");
    }
}
