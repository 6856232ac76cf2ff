use lock_scheduler::scheduled;

#[scheduled(after = [], name = "no_parent")]
async fn no_parent() {}

#[scheduled(after = "", name = "empty_parent")]
async fn empty_parent() {}

#[scheduled(after = ["import_orders", "import_refunds", "import_orders"], name = "twice")]
async fn twice() {}

#[scheduled(after = ["ok", "tab\there", " leading"], name = "bad_characters")]
async fn bad_characters() {}

#[scheduled(after = ["import_orders", import_refunds], name = "not_a_string")]
async fn not_a_string() {}

#[scheduled(after = 5, name = "not_a_name")]
async fn not_a_name() {}

#[scheduled(after, name = "no_value")]
async fn no_value() {}

fn main() {}
