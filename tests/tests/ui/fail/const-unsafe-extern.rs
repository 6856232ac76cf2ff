// `const fn` cannot take a lock; the scheduler cannot call `unsafe fn` or honour an ABI.
use lock_core::{scheduled, scheduler_lock};

#[scheduler_lock]
const fn constant() {}

#[scheduled(fixed_rate = "1m")]
unsafe fn with_contract() {}

#[scheduled(fixed_rate = "1m")]
extern "C" fn exported() {}

fn main() {}
