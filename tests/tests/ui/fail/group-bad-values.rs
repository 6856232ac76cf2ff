use lock_scheduler::scheduled;

#[scheduled(fixed_rate = "1m", group = "", name = "empty_group")]
async fn empty_group() {}

#[scheduled(fixed_rate = "1m", group = "reports ", name = "trailing_space")]
async fn trailing_space() {}

#[scheduled(fixed_rate = "1m", group = reports, name = "not_a_string")]
async fn not_a_string() {}

#[scheduled(fixed_rate = "1m", group = ["a", "b"], name = "two_groups")]
async fn two_groups() {}

fn main() {}
