// A #[scheduled] function's parameters are extractors: the compiler says so on each type that
// is not one.
use lock_core::JobContext;
use lock_scheduler::scheduled;

#[scheduled(fixed_rate = "1m", name = "needs_input")]
async fn needs_input(_day: u32, _ctx: JobContext) {}

#[scheduled(fixed_rate = "1m", name = "sync_needs_input")]
fn sync_needs_input(_label: String) {}

fn main() {}
