use lock_scheduler::{scheduled, scheduler_lock};

#[scheduled(fixed_rate = "1m")]
struct Job;

trait Jobs {
    #[scheduler_lock(name = "declared_only")]
    fn declared_only();
}

fn main() {}
