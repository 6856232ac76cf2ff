// The cron parser is the runtime's: its message is shown at the expression.
use lock_scheduler::scheduled;

#[scheduled(cron = "0 60 * * * *", name = "minute_out_of_range")]
async fn minute_out_of_range() {}

#[scheduled(cron = "0 0 0 * FOO *", name = "unknown_month_name")]
async fn unknown_month_name() {}

#[scheduled(cron = "@often", name = "unknown_macro")]
async fn unknown_macro() {}

#[scheduled(cron = "0 0 0 L3 * ?", name = "unsupported_last_offset")]
async fn unsupported_last_offset() {}

// Two bad fields: no single field is to blame, so all fields are explained.
#[scheduled(cron = "0 99 99 * * *", name = "two_bad_fields")]
async fn two_bad_fields() {}

fn main() {}
