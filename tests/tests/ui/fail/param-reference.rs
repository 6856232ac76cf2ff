// The scheduler builds each parameter anew at each fire: references and `impl Trait` are
// refused with what to take instead.
use lock_core::{State, scheduled};

#[scheduled(fixed_rate = "1m")]
async fn borrows(_pool: &State<String>) {}

#[scheduled(fixed_rate = "1m")]
fn sync_needs_input(_items: impl IntoIterator<Item = u8>) {}

fn main() {}
