use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "too_many", retries = 1000)]
async fn too_many() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "negative", retries = -1)]
async fn negative() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "quoted", retries = "3", retry_backoff = 10)]
async fn quoted() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "zeros", retries = 2, retry_backoff = "0s", timeout = "0s")]
async fn zeros() {}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(name = "bad_timeout", timeout = "five minutes")]
async fn bad_timeout() {}

fn main() {}
