use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "zero", pause_after_failures = 0)]
async fn zero() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "too_many", pause_after_failures = 1001)]
async fn too_many() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "a_string", pause_after_failures = "3")]
async fn a_string() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "a_fraction", pause_after_failures = 2.5)]
async fn a_fraction() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "suffix", pause_after_failures = 3u32)]
async fn suffix() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "pause_zero", pause_after_failures = 3, pause_for = "0s")]
async fn pause_zero() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "pause_words", pause_after_failures = 3, pause_for = "ten minutes")]
async fn pause_words() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "pause_iso", pause_after_failures = 3, pause_for = "PT10X")]
async fn pause_iso() {}

fn main() {}
