use lock_scheduler::{scheduled, scheduler_lock};

struct Billing;

impl Billing {
    #[scheduled(fixed_rate = "1m", name = "scheduled_method")]
    async fn scheduled_method(&self) {}

    #[scheduler_lock(name = "billing")]
    async fn locked_method(&mut self, _day: u32) {}

    #[scheduler_lock(name = "locked_by_value")]
    fn locked_by_value(self: Box<Self>) {}
}

fn main() {}
