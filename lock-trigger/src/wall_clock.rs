//! From wall-clock matches to instants in a zone, with the DST rules:
//!
//! - **strictly after**: [`next_fire`](crate::next_fire) returns an instant after the one given,
//!   always, also from inside a repeated hour;
//! - **gap**: a local time the spring-forward gap skips fires once, at the gap's end (the first
//!   instant after it), whatever the expression's shape;
//! - **repeated hour**: an expression that fires several times an hour, or every hour
//!   ([`Cron::is_interval`]), fires in both passes and so keeps its real period; any other
//!   (a fixed local time such as 01:30) fires once, in the first pass.

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeDelta, TimeZone, Utc};

use crate::Tz;
use crate::cron::Cron;

/// The instants at which the wall-clock time `local` fires in `zone`: the first, and the second
/// pass of a repeated hour when the expression is an interval.
fn instants(cron: &Cron, zone: Tz, local: NaiveDateTime) -> (DateTime<Utc>, Option<DateTime<Utc>>) {
    match zone.from_local_datetime(&local) {
        LocalResult::Single(at) => (at.to_utc(), None),
        LocalResult::Ambiguous(first, second) => {
            (first.to_utc(), cron.is_interval().then(|| second.to_utc()))
        }
        LocalResult::None => (gap_end(zone, local), None),
    }
}

fn offset(zone: Tz, at: DateTime<Utc>) -> TimeDelta {
    TimeDelta::seconds(i64::from(
        zone.offset_from_utc_datetime(&at.naive_utc())
            .fix()
            .local_minus_utc(),
    ))
}

fn local_of(zone: Tz, at: DateTime<Utc>) -> NaiveDateTime {
    at.with_timezone(&zone).naive_local()
}

/// The first instant in `(lo, hi]` for which `past` holds, given it holds at `hi`, not at `lo`,
/// and once it holds it keeps holding (to the second).
fn first_where(
    mut lo: DateTime<Utc>,
    mut hi: DateTime<Utc>,
    past: impl Fn(DateTime<Utc>) -> bool,
) -> DateTime<Utc> {
    while hi - lo > TimeDelta::seconds(1) {
        let mid = lo + TimeDelta::seconds((hi - lo).num_seconds() / 2);
        if past(mid) { hi = mid } else { lo = mid }
    }
    hi
}

/// The instant a spring-forward gap containing the wall-clock time `local` ends.
fn gap_end(zone: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    let near = whole_second(local.and_utc());
    let day = TimeDelta::hours(26);
    first_where(near - day, near + day, |at| local_of(zone, at) > local)
}

/// The repeated hour around `at`, if `at` is in one: (the first-pass reading of `at`'s
/// wall-clock time, the instant the clock fell back, the repeat's length).
fn fold_at(zone: Tz, at: DateTime<Utc>) -> Option<(DateTime<Utc>, DateTime<Utc>, TimeDelta)> {
    match zone.from_local_datetime(&local_of(zone, at)) {
        LocalResult::Ambiguous(first, second) => {
            let (first, second) = (first.to_utc(), second.to_utc());
            let length = second - first;
            let before = offset(zone, first);
            let fell_back = first_where(first, second, |x| offset(zone, x) != before);
            Some((first, fell_back, length))
        }
        _ => None,
    }
}

fn whole_second(at: DateTime<Utc>) -> DateTime<Utc> {
    at - TimeDelta::nanoseconds(i64::from(at.timestamp_subsec_nanos()))
}

/// The first fire strictly after `after`; see the module's rules.
pub(crate) fn next_fire(cron: &Cron, zone: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let after = whole_second(after);
    let start = local_of(zone, after);
    let mut best: Option<DateTime<Utc>> = None;
    let mut keep = |at: DateTime<Utc>| {
        if at > after && best.is_none_or(|b| at < b) {
            best = Some(at);
        }
    };
    // In the first pass of a repeated hour, the second pass of an earlier wall-clock time is
    // still ahead: the first match from the start of the repeated hour, on its second pass.
    if let Some((first, fell_back, length)) = fold_at(zone, after)
        && first == after
        && cron.is_interval()
    {
        let repeated_from = local_of(zone, fell_back);
        if let Some(local) = cron.next_local(repeated_from)
            && local < repeated_from + length
            && let (_, Some(second)) = instants(cron, zone, local)
        {
            keep(second);
        }
    }
    // Wall-clock matches from `start` on: beyond the first, fires only grow, so the first
    // match with a fire after `after` (other than `start` itself) ends the search.
    let mut local = cron.next_local(start)?;
    for _ in 0..100_000 {
        let (first, second) = instants(cron, zone, local);
        let found = [Some(first), second]
            .into_iter()
            .flatten()
            .filter(|&at| at > after)
            .min();
        if let Some(at) = found {
            keep(at);
            if local > start {
                break;
            }
        }
        local = cron.next_local(local + TimeDelta::seconds(1))?;
    }
    best
}

/// The last fire at or before `at`; the mirror of [`next_fire`].
pub(crate) fn previous_fire(cron: &Cron, zone: Tz, at: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let at = whole_second(at);
    let start = local_of(zone, at);
    let mut best: Option<DateTime<Utc>> = None;
    let mut keep = |fire: DateTime<Utc>| {
        if fire <= at && best.is_none_or(|b| fire > b) {
            best = Some(fire);
        }
    };
    // In the second pass of a repeated hour, the first pass of a later wall-clock time is
    // already behind: the last match before the repeated hour ends, on its first pass.
    if let Some((first, fell_back, length)) = fold_at(zone, at)
        && first + length == at
    {
        let repeated_until = local_of(zone, fell_back) + length;
        if let Some(local) = cron.previous_local(repeated_until - TimeDelta::seconds(1)) {
            let (first, second) = instants(cron, zone, local);
            [Some(first), second]
                .into_iter()
                .flatten()
                .for_each(&mut keep);
        }
    }
    let mut local = cron.previous_local(start)?;
    for _ in 0..100_000 {
        let (first, second) = instants(cron, zone, local);
        if let Some(fire) = [Some(first), second]
            .into_iter()
            .flatten()
            .filter(|&f| f <= at)
            .max()
        {
            keep(fire);
            break;
        }
        local = cron.previous_local(local - TimeDelta::seconds(1))?;
    }
    best
}
