// The scheduler runs jobs on tokio's multi-thread runtime: the body's future must be Send.
use lock_scheduler::scheduled;
use std::rc::Rc;

#[scheduled(fixed_rate = "1m", name = "holds_an_rc")]
async fn holds_an_rc() {
    let shared = Rc::new(1);
    tokio::task::yield_now().await;
    drop(shared);
}

fn main() {}
