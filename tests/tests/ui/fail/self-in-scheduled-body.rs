// A #[scheduled] body moves into a nested function, where `Self` is not in scope; rustc says
// to name the type instead.
use lock_scheduler::scheduled;

struct Billing;

impl Billing {
    const REGION: &'static str = "eu";

    #[scheduled(fixed_rate = "1m", name = "nightly")]
    async fn nightly() {
        let _ = Self::REGION;
    }
}

fn main() {}
