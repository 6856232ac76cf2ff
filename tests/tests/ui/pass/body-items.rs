//! The body keeps working as written: `use` items, nested items, inner attributes, doc
//! comments and other attributes on the function, a function defined inside another one, and
//! functions written by `macro_rules!`.

#![deny(warnings)]

use lock_scheduler::__private::{ScheduledJob, inventory};
use lock_scheduler::{scheduled, scheduler_lock};

/// Sends the daily digest.
#[scheduled(cron = "@daily", name = "digest")]
#[doc(alias = "daily-digest")]
#[inline(never)]
async fn digest() -> Result<(), String> {
    #![allow(clippy::needless_return)]
    use std::collections::BTreeMap;
    const LIMIT: usize = 3;
    fn render(map: &BTreeMap<u8, u8>) -> String {
        format!("{map:?}")
    }
    let map: BTreeMap<u8, u8> = (0..LIMIT as u8).map(|i| (i, i)).collect();
    return if render(&map).is_empty() { Err("empty".into()) } else { Ok(()) };
}

macro_rules! job {
    // The lock name as a `tt`: a `literal` fragment reaches the attribute wrapped in an
    // invisible group, which is not a string literal.
    ($name:ident, $lock:tt, $ret:ty, $value:expr) => {
        #[scheduled(fixed_rate = "1m", name = $lock)]
        async fn $name() -> $ret {
            $value
        }
    };
}

job!(from_macro, "from-macro", Result<(), String>, Ok(()));
job!(from_macro_unit, "from-macro-unit", (), ());

fn outer() -> usize {
    #[scheduled(fixed_delay = "1m")]
    #[scheduler_lock(name = "defined-inside-a-function")]
    fn inner() {}
    inventory::iter::<ScheduledJob>.into_iter().count()
}

fn main() {
    assert_eq!(outer(), 4);
}
