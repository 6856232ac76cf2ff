use lock_core::scheduled;

#[scheduled(fixed_rate = "1m")]
async fn needs_input(_day: u32, _label: &str) {}

#[scheduled(fixed_rate = "1m")]
fn sync_needs_input(_items: impl IntoIterator<Item = u8>) {}

fn main() {}
