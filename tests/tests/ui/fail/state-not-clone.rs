// Each fire gets a clone of the registered value: `State<T>` needs `T: Clone` (share a
// service object as `State<Arc<Service>>`).
use lock_scheduler::{State, scheduled};

struct Service;

#[scheduled(fixed_rate = "1m", name = "uses_service")]
async fn uses_service(State(_service): State<Service>) {}

fn main() {}
