use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(cron "0 0 * * * *", name = "missing_equals")]
async fn missing_equals() {}

#[scheduled("0 0 * * * *", name = "missing_key")]
async fn missing_key() {}

#[scheduled(fixed_rate = "1m" initial_delay = "1s", name = "missing_comma")]
async fn missing_comma() {}

// Reported by rustc when the attribute runs itself...
#[scheduler_lock = "name"]
async fn name_value_form() {}

// ... and by #[scheduled] when it handles the attribute.
#[scheduled(fixed_rate = "1m", name = "name_value_form_second")]
#[scheduler_lock = "name"]
async fn name_value_form_second() {}

fn main() {}
