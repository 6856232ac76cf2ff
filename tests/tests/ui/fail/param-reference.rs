// The scheduler builds each parameter anew at each fire: references and `impl Trait` are
// refused with what to take instead.
use lock_scheduler::{State, scheduled};

#[scheduled(fixed_rate = "1m", name = "borrows")]
async fn borrows(_pool: &State<String>) {}

#[scheduled(fixed_rate = "1m", name = "sync_needs_input")]
fn sync_needs_input(_items: impl IntoIterator<Item = u8>) {}

fn main() {}
