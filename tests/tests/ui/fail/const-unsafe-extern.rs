// `const fn` cannot take a lock; the scheduler cannot call `unsafe fn` or honour an ABI.
use lock_scheduler::{scheduled, scheduler_lock};

#[scheduler_lock(name = "constant")]
const fn constant() {}

#[scheduled(fixed_rate = "1m", name = "with_contract")]
unsafe fn with_contract() {}

#[scheduled(fixed_rate = "1m", name = "exported")]
extern "C" fn exported() {}

fn main() {}
